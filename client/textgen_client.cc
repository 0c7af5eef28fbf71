#include "client/textgen_client.h"

#include <algorithm>
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
#include "client/packed_weights.h"
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
  TEXTGEN_ASSIGN_OR_RETURN(AttentionReply reply, DebugAttention(request));
  return std::move(reply.kinds);
}

namespace {

// Positions [begin, end) of one axis's n tokens that a request selects.
struct Span {
  int begin = 0;
  int end = 0;
};

Span Selected(bool has_range, const v1::AttentionRange& range, int n) {
  if (!has_range) return {0, n};
  return {range.begin(), range.end() == 0 ? n : std::min(range.end(), n)};
}

// Cells of `step` positions from `first` up to `end`, the last perhaps shorter.
int Cells(int first, int end, int step) {
  return end <= first ? 0 : (end - first + step - 1) / step;
}

// Labels of an axis's rows or columns: the tokens themselves, or for pooled
// cells the positions each covers ("8-15") and its first token's id.
void LabelAxis(const std::vector<std::string>& texts,
               const std::vector<int>& ids, int first, int end, int step,
               std::vector<std::string>* labels, std::vector<int>* label_ids) {
  labels->clear();
  label_ids->clear();
  for (int p = first; p < end; p += step) {
    labels->push_back(step == 1
                          ? texts[p]
                          : absl::StrCat(p, "-", std::min(p + step, end) - 1));
    label_ids->push_back(ids[p]);
  }
}

// One map as its pieces arrive: where its rows sit, and the rows so far by
// index (0 = the selection's first query or cell).
struct MapPieces {
  int first_key = 0;
  int query_step = 1;
  int key_step = 1;
  std::map<int, std::vector<float>> rows;
};

std::string MapName(int kind, int layer, int head) {
  return absl::StrCat(
      "map ", v1::AttentionKind_Name(static_cast<v1::AttentionKind>(kind)),
      " L", layer, " H", head);
}

}  // namespace

absl::StatusOr<AttentionReply> TextgenClient::DebugAttention(
    const v1::DebugAttentionRequest& request) {
  grpc::ClientContext context;
  PrepareContext(&context);
  std::unique_ptr<grpc::ClientReader<v1::DebugAttentionResponse>> reader =
      stub_->DebugAttention(&context, request);

  std::vector<std::string> target_texts, source_texts;
  std::vector<int> target_ids, source_ids;
  // (kind, layer, head) → its pieces so far.
  std::map<std::tuple<int, int, int>, MapPieces> pieces;
  AttentionReply reply;
  v1::AttentionRollout rollout;
  v1::DebugAttentionResponse response;
  absl::Status bad;
  // Keeps the first problem and drains the stream, so that the server's own
  // error, if any, is what the caller sees.
  auto fail = [&bad](absl::Status status) {
    if (bad.ok()) bad = std::move(status);
  };
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
      const bool queries_are_source =
          m.kind() == v1::ATTENTION_KIND_ENCODER_SELF;
      const bool keys_are_source =
          queries_are_source || m.kind() == v1::ATTENTION_KIND_CROSS;
      const int num_queries = static_cast<int>(
          queries_are_source ? source_texts.size() : target_texts.size());
      const int num_keys = static_cast<int>(
          keys_are_source ? source_texts.size() : target_texts.size());
      const Span queries =
          Selected(request.has_queries(), request.queries(), num_queries);
      const Span keys = Selected(request.has_keys(), request.keys(), num_keys);
      const int query_step = std::max(m.query_step(), 1);
      const int key_step = std::max(m.key_step(), 1);
      const std::string name = MapName(m.kind(), m.layer(), m.head());
      auto [it, fresh] = pieces.try_emplace({m.kind(), m.layer(), m.head()});
      MapPieces& map = it->second;
      if (fresh) {
        map.first_key = m.first_key();
        map.query_step = query_step;
        map.key_step = key_step;
      } else if (map.first_key != m.first_key() ||
                 map.query_step != query_step || map.key_step != key_step) {
        fail(absl::DataLossError(
            absl::StrCat(name, ": pieces disagree on where their rows sit")));
        continue;
      }
      const int offset = m.first_query() - queries.begin;
      if (offset < 0 || offset % query_step != 0) {
        fail(absl::DataLossError(
            absl::StrCat(name, ": a piece from query ", m.first_query(),
                         ", not a row of the selection from ", queries.begin,
                         " by ", query_step)));
        continue;
      }
      const int width = Cells(m.first_key(), keys.end, key_step);
      absl::StatusOr<std::vector<float>> rows =
          DecodeMapRows(m, width, key_step);
      if (!rows.ok()) {
        fail(absl::DataLossError(
            absl::StrCat(name, ": ", rows.status().message())));
        continue;
      }
      for (size_t r = 0; r * width < rows->size(); ++r) {
        map.rows[offset / query_step + static_cast<int>(r)].assign(
            rows->begin() + r * width, rows->begin() + (r + 1) * width);
      }
    }
    reply.summaries.insert(reply.summaries.end(), response.summaries().begin(),
                           response.summaries().end());
    if (response.has_rollout()) rollout = response.rollout();
  }
  absl::Status status = ToStatus(reader->Finish());
  if (!status.ok()) return status;
  if (!bad.ok()) return bad;

  const bool encoder_decoder = !source_texts.empty();
  // In the API's order: encoder self, decoder self, cross.
  for (const auto& [wire, kind] :
       {std::pair{v1::ATTENTION_KIND_ENCODER_SELF, MapKind::kEncoderSelf},
        std::pair{v1::ATTENTION_KIND_DECODER_SELF, MapKind::kDecoderSelf},
        std::pair{v1::ATTENTION_KIND_CROSS, MapKind::kCross}}) {
    std::set<int> layer_set, head_set;
    const MapPieces* first = nullptr;
    for (const auto& [key, map] : pieces) {
      if (std::get<0>(key) != wire) continue;
      layer_set.insert(std::get<1>(key));
      head_set.insert(std::get<2>(key));
      if (first == nullptr) first = &map;
    }
    if (first == nullptr) continue;
    AttentionMaps maps;
    maps.kind = kind;
    maps.encoder_decoder = encoder_decoder;
    maps.layers.assign(layer_set.begin(), layer_set.end());
    maps.heads.assign(head_set.begin(), head_set.end());
    const bool queries_are_source = kind == MapKind::kEncoderSelf;
    const bool keys_are_source = kind != MapKind::kDecoderSelf;
    const std::vector<std::string>& query_texts =
        queries_are_source ? source_texts : target_texts;
    const std::vector<int>& query_ids =
        queries_are_source ? source_ids : target_ids;
    const std::vector<std::string>& key_texts =
        keys_are_source ? source_texts : target_texts;
    const std::vector<int>& key_ids = keys_are_source ? source_ids : target_ids;
    const Span queries = Selected(request.has_queries(), request.queries(),
                                  static_cast<int>(query_texts.size()));
    const Span keys = Selected(request.has_keys(), request.keys(),
                               static_cast<int>(key_texts.size()));
    maps.first_query = queries.begin;
    maps.first_key = first->first_key;
    maps.query_step = first->query_step;
    maps.key_step = first->key_step;
    LabelAxis(query_texts, query_ids, queries.begin, queries.end,
              maps.query_step, &maps.tokens, &maps.token_ids);
    const bool whole = maps.first_query == 0 && maps.first_key == 0 &&
                       maps.query_step == 1 && maps.key_step == 1 &&
                       queries.end == static_cast<int>(query_texts.size()) &&
                       keys.end == static_cast<int>(key_texts.size());
    // Whole self-attention maps keep their keys as `tokens` (as pictures of
    // them expect); anything else names its columns.
    if (keys_are_source || !whole) {
      LabelAxis(key_texts, key_ids, maps.first_key, keys.end, maps.key_step,
                &maps.key_tokens, &maps.key_token_ids);
    }
    const size_t rows = maps.num_tokens();
    for (int layer : maps.layers) {
      for (int head : maps.heads) {
        const auto it = pieces.find({wire, layer, head});
        const MapPieces* map = it == pieces.end() ? nullptr : &it->second;
        if (map == nullptr || map->rows.size() != rows ||
            map->first_key != maps.first_key ||
            map->query_step != maps.query_step ||
            map->key_step != maps.key_step ||
            (rows > 0 &&
             map->rows.rbegin()->first != static_cast<int>(rows) - 1)) {
          return absl::DataLossError(
              absl::StrCat("map ", MapKindTitle(kind), " L", layer, " H", head,
                           " has ", map == nullptr ? 0 : map->rows.size(),
                           " of ", rows, " rows where the others have theirs"));
        }
        std::vector<float> dense;
        dense.reserve(rows * maps.num_keys());
        for (const auto& [q, row] : map->rows)
          dense.insert(dense.end(), row.begin(), row.end());
        maps.maps.push_back(std::move(dense));
      }
    }
    reply.kinds.push_back(std::move(maps));
  }
  if (reply.kinds.empty() && !request.summary_only()) {
    return absl::DataLossError("the reply has no maps");
  }

  const int n = static_cast<int>(target_texts.size());
  if (rollout.weights_size() > 0) {
    if (rollout.weights_size() != n * n) {
      return absl::DataLossError(absl::StrCat("a rollout of ",
                                              rollout.weights_size(),
                                              " weights for ", n, " tokens"));
    }
    reply.rollout.assign(rollout.weights().begin(), rollout.weights().end());
    reply.rollout_size = n;
  } else if (rollout.compact().row_keys_size() > 0) {
    if (rollout.compact().row_keys_size() != n) {
      return absl::DataLossError(absl::StrCat("a rollout of ",
                                              rollout.compact().row_keys_size(),
                                              " rows for ", n, " tokens"));
    }
    absl::StatusOr<std::vector<float>> dense =
        DecodePackedWeights(rollout.compact(), n);
    if (!dense.ok()) {
      return absl::DataLossError(
          absl::StrCat("the rollout: ", dense.status().message()));
    }
    reply.rollout = *std::move(dense);
    reply.rollout_size = n;
  }
  return reply;
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
