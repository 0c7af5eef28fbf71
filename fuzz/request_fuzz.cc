// The request validation both front doors share, fuzzed: the HTTP API's JSON
// bodies (server/http/openai_request.h: POST /v1/completions, /v1/attention,
// /tokenize; server/http/chat_request.h: /v1/chat/completions) and a
// serialized GenerateRequest as gRPC hands it to the
// service (bytes, parsed by server/grpc/wire.h's ParseMessage), each then
// translated for the engine (server/api/proto_convert.h, ToEngineRequest) with
// the shipped model's tokenizer. The first byte picks the route, the rest is
// the body. Whatever the bytes: no crash, and a refusal is INVALID_ARGUMENT (or
// NOT_FOUND for a `model` other than the one served), the statuses the HTTP API
// turns into 400 and 404.
#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "fuzz/fuzz_check.h"
#include "model/config.h"
#include "model/formats/hf_config.h"
#include "model/text/tokenizer_factory.h"
#include "server/api/proto_convert.h"
#include "server/grpc/wire.h"
#include "server/http/chat_request.h"
#include "server/http/openai_request.h"
#include "textgen/v1/textgen.pb.h"

namespace {

constexpr absl::string_view kModelName = "shakespeare-char";

bool IsRefusal(const absl::Status& status) {
  return status.code() == absl::StatusCode::kInvalidArgument ||
         status.code() == absl::StatusCode::kNotFound;
}

const textgen::Tokenizer& ShippedTokenizer() {
  static const std::unique_ptr<textgen::Tokenizer> tokenizer = [] {
    auto loaded = textgen::LoadTokenizer(std::string(TEXTGEN_SOURCE_DIR) +
                                         "/models/shakespeare-char");
    FUZZ_CHECK(loaded.ok());
    return *std::move(loaded);
  }();
  return *tokenizer;
}

const textgen::ModelConfig& ShippedConfig() {
  static const textgen::ModelConfig config = [] {
    auto loaded =
        textgen::LoadModelConfig(std::string(TEXTGEN_SOURCE_DIR) +
                                 "/models/shakespeare-char/config.json");
    FUZZ_CHECK(loaded.ok());
    return *std::move(loaded);
  }();
  return config;
}

// The engine's view of an accepted request: OK or INVALID_ARGUMENT (a
// decoder-only model refuses a source with INVALID_ARGUMENT too), or, for a
// conversation, FAILED_PRECONDITION: this model has no chat template.
void CheckTranslation(const textgen::v1::GenerateRequest& request) {
  const absl::StatusOr<textgen::GenerationRequest> translated =
      textgen::ToEngineRequest(request, &ShippedTokenizer(), ShippedConfig());
  FUZZ_CHECK(
      translated.ok() ||
      translated.status().code() == absl::StatusCode::kInvalidArgument ||
      (request.prompt().has_conversation() &&
       translated.status().code() == absl::StatusCode::kFailedPrecondition));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const absl::string_view body(reinterpret_cast<const char*>(data) + 1,
                               size - 1);
  switch (data[0] % 5) {
    case 0: {
      auto parsed = textgen::ParseCompletionRequest(body, kModelName);
      FUZZ_CHECK(parsed.ok() || IsRefusal(parsed.status()));
      if (parsed.ok()) CheckTranslation(parsed->generate);
      break;
    }
    case 1: {
      auto parsed = textgen::ParseAttentionRequest(body, kModelName);
      FUZZ_CHECK(parsed.ok() || IsRefusal(parsed.status()));
      break;
    }
    case 2: {
      auto parsed = textgen::ParseTokenizeRequest(body, kModelName);
      FUZZ_CHECK(parsed.ok() || IsRefusal(parsed.status()));
      break;
    }
    case 4: {
      auto parsed = textgen::ParseChatRequest(body, kModelName);
      FUZZ_CHECK(parsed.ok() || IsRefusal(parsed.status()));
      if (parsed.ok()) CheckTranslation(parsed->generate);
      break;
    }
    default: {
      // As the service parses it (server/grpc/wire.h): bytes that are no
      // GenerateRequest are INVALID_ARGUMENT.
      grpc::Slice slice(body.data(), body.size());
      const grpc::ByteBuffer bytes(&slice, 1);
      textgen::v1::GenerateRequest request;
      const absl::Status parsed = textgen::ParseMessage(bytes, request);
      FUZZ_CHECK(parsed.ok() ||
                 parsed.code() == absl::StatusCode::kInvalidArgument);
      if (parsed.ok()) CheckTranslation(request);
      break;
    }
  }
  return 0;
}
