// The TLS connection's instantiation, compiled apart from the other
// (http_listener_impl.h says why).
#include <memory>
#include <string>
#include <utility>

#include "server/http/http_connection.h"
#include "server/http/http_listener_impl.h"

namespace textgen {
namespace http_listener_internal {

void ServeTlsConnection(const std::shared_ptr<HttpListener::Impl>& owner,
                        std::string address, tcp::socket socket,
                        net::ssl::context& ssl) {
  auto connection =
      std::make_shared<HttpConnection<beast::ssl_stream<beast::tcp_stream>>>(
          owner, std::move(address), std::move(socket), ssl);
  owner->Register(connection);
  connection->Run();
}

}  // namespace http_listener_internal
}  // namespace textgen
