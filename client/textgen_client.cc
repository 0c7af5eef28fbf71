#include "client/textgen_client.h"

#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "grpc_health/v1/health.grpc.pb.h"

namespace textgen::client {
namespace {

constexpr char kConnectFailurePayload[] = "textgen.client/connect_failure";

// The file's bytes, or NOT_FOUND naming `flag` and `path`.
absl::StatusOr<std::string> ReadPem(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat(flag, "=", path, ": cannot read the file"));
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> Credentials(
    const ClientOptions& options) {
  if (options.client_cert_file.empty() != options.client_key_file.empty()) {
    return absl::InvalidArgumentError(
        "--client_cert and --client_key go together");
  }
  if (!options.tls && options.ca_cert_file.empty() &&
      options.client_cert_file.empty()) {
    return grpc::InsecureChannelCredentials();
  }
  grpc::SslCredentialsOptions ssl;
  const std::pair<const std::string*, std::string*> files[] = {
      {&options.ca_cert_file, &ssl.pem_root_certs},
      {&options.client_cert_file, &ssl.pem_cert_chain},
      {&options.client_key_file, &ssl.pem_private_key}};
  const char* flags[] = {"--ca_cert", "--client_cert", "--client_key"};
  for (int i = 0; i < 3; ++i) {
    if (files[i].first->empty()) continue;
    absl::StatusOr<std::string> pem = ReadPem(*files[i].first, flags[i]);
    if (!pem.ok()) return pem.status();
    *files[i].second = *std::move(pem);
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace

bool IsConnectFailure(const absl::Status& status) {
  return status.GetPayload(kConnectFailurePayload).has_value();
}

absl::StatusOr<TextgenClient> TextgenClient::Create(
    const ClientOptions& options) {
  if (options.lb_policy != "pick_first" && options.lb_policy != "round_robin") {
    return absl::InvalidArgumentError(
        absl::StrCat("--lb_policy must be pick_first or round_robin, got \"",
                     options.lb_policy, "\""));
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      Credentials(options);
  if (!credentials.ok()) return credentials.status();
  grpc::ChannelArguments args;
  args.SetLoadBalancingPolicyName(options.lb_policy);
  // Attention maps of long prompts come in pieces under 4 MB, but leave room.
  args.SetMaxReceiveMessageSize(64 << 20);
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(options.target, *credentials, args);
  return TextgenClient(options, std::move(channel));
}

TextgenClient::TextgenClient(ClientOptions options,
                             std::shared_ptr<grpc::Channel> channel)
    : options_(std::move(options)),
      channel_(std::move(channel)),
      stub_(v1::TextGeneration::NewStub(channel_)) {}

void TextgenClient::PrepareContext(grpc::ClientContext* context) const {
  if (!options_.token.empty()) {
    context->AddMetadata("authorization",
                         absl::StrCat("Bearer ", options_.token));
  }
  if (options_.timeout != absl::InfiniteDuration()) {
    context->set_deadline(absl::ToChronoTime(absl::Now() + options_.timeout));
  }
}

absl::Status TextgenClient::ToStatus(const grpc::Status& status) const {
  if (status.ok()) return absl::OkStatus();
  // gRPC's and absl's codes are the same numbers.
  absl::Status result(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    // A server that answers UNAVAILABLE (draining, say) leaves the channel
    // connected; a refused connection, an unknown name or a bad target leave it
    // failing.
    const grpc_connectivity_state state = channel_->GetState(false);
    const bool never_connected = state == GRPC_CHANNEL_TRANSIENT_FAILURE ||
                                 state == GRPC_CHANNEL_CONNECTING ||
                                 state == GRPC_CHANNEL_SHUTDOWN;
    const std::string& m = status.error_message();
    if (never_connected || absl::StrContains(m, "failed to connect") ||
        absl::StrContains(m, "DNS resolution failed")) {
      result.SetPayload(kConnectFailurePayload, absl::Cord(options_.target));
    }
  }
  return result;
}

absl::Status TextgenClient::Generate(
    const v1::GenerateRequest& request,
    const std::function<void(const v1::GenerateResponse&)>& on_response,
    const std::atomic<bool>* cancel) {
  grpc::ClientContext context;
  PrepareContext(&context);
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      stub_->Generate(&context, request);
  // Read() blocks, so a watcher turns the flag into TryCancel(), which makes it
  // return.
  std::atomic<bool> finished{false};
  std::thread watcher;
  if (cancel != nullptr) {
    watcher = std::thread([&] {
      while (!finished.load()) {
        if (cancel->load()) {
          context.TryCancel();
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  }
  v1::GenerateResponse response;
  while (reader->Read(&response)) on_response(response);
  const grpc::Status status = reader->Finish();
  finished = true;
  if (watcher.joinable()) watcher.join();
  return ToStatus(status);
}

absl::StatusOr<AttentionMaps> TextgenClient::Attention(
    const v1::Prompt& prompt, const std::vector<int>& layers,
    const std::vector<int>& heads) {
  TEXTGEN_ASSIGN_OR_RETURN(std::vector<AttentionMaps> kinds,
                           AttentionByKind(&prompt, nullptr, layers, heads));
  for (AttentionMaps& maps : kinds) {
    if (maps.kind == MapKind::kDecoderSelf) return std::move(maps);
  }
  return absl::DataLossError("the reply has no decoder self-attention maps");
}

absl::StatusOr<std::vector<AttentionMaps>> TextgenClient::AttentionByKind(
    const v1::Prompt* prompt, const v1::Prompt* source,
    const std::vector<int>& layers, const std::vector<int>& heads) {
  v1::DebugAttentionRequest request;
  if (prompt != nullptr) *request.mutable_prompt() = *prompt;
  if (source != nullptr) *request.mutable_source() = *source;
  for (int l : layers) request.add_layers(l);
  for (int h : heads) request.add_heads(h);
  grpc::ClientContext context;
  PrepareContext(&context);
  std::unique_ptr<grpc::ClientReader<v1::DebugAttentionResponse>> reader =
      stub_->DebugAttention(&context, request);

  std::vector<std::string> target_texts, source_texts;
  std::vector<int> target_ids, source_ids;
  // (kind, layer, head) → its rows so far, by query.
  std::map<std::tuple<int, int, int>, std::map<int, std::vector<float>>> rows;
  v1::DebugAttentionResponse response;
  absl::Status bad;
  while (reader->Read(&response)) {
    for (const v1::PromptToken& t : response.tokens()) {
      target_texts.push_back(t.text());
      target_ids.push_back(t.id());
    }
    for (const v1::PromptToken& t : response.source_tokens()) {
      source_texts.push_back(t.text());
      source_ids.push_back(t.id());
    }
    for (const v1::AttentionMap& m : response.maps()) {
      // Keys: the source's positions, but for decoder self-attention.
      const size_t n = m.kind() == v1::ATTENTION_KIND_ENCODER_SELF ||
                               m.kind() == v1::ATTENTION_KIND_CROSS
                           ? source_texts.size()
                           : target_texts.size();
      if (n == 0 || m.weights_size() % n != 0) {
        bad = absl::DataLossError(
            absl::StrCat("map ", v1::AttentionKind_Name(m.kind()), " L",
                         m.layer(), " H", m.head(), ": ", m.weights_size(),
                         " weights are not whole rows of ", n, " keys"));
        continue;
      }
      auto& piece = rows[{m.kind(), m.layer(), m.head()}];
      for (int r = 0; r < m.weights_size() / static_cast<int>(n); ++r) {
        piece[m.first_query() + r].assign(m.weights().begin() + r * n,
                                          m.weights().begin() + (r + 1) * n);
      }
    }
  }
  absl::Status status = ToStatus(reader->Finish());
  if (!status.ok()) return status;
  if (!bad.ok()) return bad;

  const bool encoder_decoder = !source_texts.empty();
  std::vector<AttentionMaps> kinds;
  // In the API's order: encoder self, decoder self, cross.
  for (const auto& [wire, kind] :
       {std::pair{v1::ATTENTION_KIND_ENCODER_SELF, MapKind::kEncoderSelf},
        std::pair{v1::ATTENTION_KIND_DECODER_SELF, MapKind::kDecoderSelf},
        std::pair{v1::ATTENTION_KIND_CROSS, MapKind::kCross}}) {
    AttentionMaps maps;
    maps.kind = kind;
    maps.encoder_decoder = encoder_decoder;
    if (kind == MapKind::kEncoderSelf) {
      maps.tokens = source_texts;
      maps.token_ids = source_ids;
    } else {
      maps.tokens = target_texts;
      maps.token_ids = target_ids;
    }
    if (kind == MapKind::kCross) {
      maps.key_tokens = source_texts;
      maps.key_token_ids = source_ids;
    }
    std::set<int> layer_set, head_set;
    for (const auto& [key, unused] : rows) {
      if (std::get<0>(key) != wire) continue;
      layer_set.insert(std::get<1>(key));
      head_set.insert(std::get<2>(key));
    }
    if (layer_set.empty()) continue;
    maps.layers.assign(layer_set.begin(), layer_set.end());
    maps.heads.assign(head_set.begin(), head_set.end());
    const size_t n = maps.num_tokens();
    for (int layer : maps.layers) {
      for (int head : maps.heads) {
        const auto& piece = rows[{wire, layer, head}];
        if (piece.size() != n ||
            (n > 0 && piece.rbegin()->first != static_cast<int>(n) - 1)) {
          return absl::DataLossError(
              absl::StrCat("map ", MapKindTitle(kind), " L", layer, " H", head,
                           " has ", piece.size(), " of ", n, " rows"));
        }
        std::vector<float> map;
        map.reserve(n * maps.num_keys());
        for (const auto& [q, row] : piece)
          map.insert(map.end(), row.begin(), row.end());
        maps.maps.push_back(std::move(map));
      }
    }
    kinds.push_back(std::move(maps));
  }
  if (kinds.empty()) return absl::DataLossError("the reply has no maps");
  return kinds;
}

absl::StatusOr<v1::ModelInfo> TextgenClient::Info() {
  grpc::ClientContext context;
  PrepareContext(&context);
  v1::ModelInfo info;
  absl::Status status =
      ToStatus(stub_->GetModelInfo(&context, v1::GetModelInfoRequest(), &info));
  if (!status.ok()) return status;
  return info;
}

absl::StatusOr<v1::TokenizeResponse> TextgenClient::Tokenize(
    const std::string& text) {
  grpc::ClientContext context;
  PrepareContext(&context);
  v1::TokenizeRequest request;
  request.set_text(text);
  v1::TokenizeResponse response;
  absl::Status status = ToStatus(stub_->Tokenize(&context, request, &response));
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<std::string> TextgenClient::Health() {
  grpc::ClientContext context;
  PrepareContext(&context);
  std::unique_ptr<grpc::health::v1::Health::Stub> health =
      grpc::health::v1::Health::NewStub(channel_);
  grpc::health::v1::HealthCheckResponse response;
  absl::Status status = ToStatus(health->Check(
      &context, grpc::health::v1::HealthCheckRequest(), &response));
  if (!status.ok()) return status;
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
      response.status());
}

}  // namespace textgen::client
