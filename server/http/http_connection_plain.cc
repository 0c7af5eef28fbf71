// The plain TCP connection's instantiation, compiled apart from the other
// (http_listener_impl.h says why).
#include <memory>
#include <string>
#include <utility>

#include "server/http/http_connection.h"
#include "server/http/http_listener_impl.h"

namespace textgen {
namespace http_listener_internal {

void ServePlainConnection(const std::shared_ptr<HttpListener::Impl>& owner,
                          std::string address, tcp::socket socket) {
  auto connection = std::make_shared<HttpConnection<beast::tcp_stream>>(
      owner, std::move(address), std::move(socket));
  owner->Register(connection);
  connection->Run();
}

}  // namespace http_listener_internal
}  // namespace textgen
