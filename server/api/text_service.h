// The text service apart from any transport: what a Generate, GetModelInfo,
// Tokenize or DebugAttention call does once its caller has been admitted, in
// the API's own messages (textgen.v1). Both ports call it: the gRPC service
// (server/grpc/service.h) with the messages it parsed from bytes, the HTTP API
// (server/http/http_server.h) with the same messages translated from its JSON
// (server/http/openai_request.h). So both have one validation, one set of
// limits, one set of metrics and one set of error messages; a transport adds
// only its framing, its deadline and its way of writing a stream.
//
// Who may call is not decided here: callers pass the front door
// (server/front_door/front_door.h) first.
//
// Errors (absl::Status, which each transport maps to its own codes):
//   INVALID_ARGUMENT     a field that is wrong, named in the message (a text
//                        over max_tokenize_bytes, a prompt the tokenizer
//                        refuses, whatever Engine::Submit refuses)
//   FAILED_PRECONDITION  no tokenizer (Tokenize), DebugAttention off
//   RESOURCE_EXHAUSTED   the engine's queue, DebugAttention's or Tokenize's
//                        calls at once, a request larger than its client's
//                        KV share (--client_max_kv_fraction)
//   UNAVAILABLE          the engine is shutting down
//
// Thread rules: every method may be called from any thread at once. Submitted
// streams are the engine's (engine/request_stream.h); DebugAttention's passes
// take turns on one decoder (server/api/debug_attention.h).
#ifndef TEXTGEN_SERVER_API_TEXT_SERVICE_H_
#define TEXTGEN_SERVER_API_TEXT_SERVICE_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "base/background_queue.h"
#include "engine/engine.h"
#include "model/decoder.h"
#include "model/text/tokenizer.h"
#include "server/api/chat_prompt.h"
#include "server/api/constraint_compiler.h"
#include "server/api/debug_attention.h"
#include "server/api/metrics.h"
#include "server/front_door/auth.h"
#include "textgen/v1/textgen.pb.h"

namespace textgen {

struct TextServiceOptions {
  // Reported by GetModelInfo (and GET /v1/models).
  std::string model_name;
  // The draft model's name, with speculative mode "draft" (likewise).
  std::string draft_model_name;
  // Longest prompt DebugAttention accepts: its reply grows with the square.
  int max_attention_tokens = 4096;
  bool debug_attention = true;
  // DebugAttention messages stay under this many bytes; a map that does not
  // fit comes in pieces of whole rows. Tests make it small to see the pieces.
  size_t max_attention_message_bytes = kMaxAttentionMessageBytes;
  // DebugAttention's bounds (server/api/debug_attention.h): the maps of one
  // reply, and the calls admitted at once.
  size_t max_attention_map_bytes = size_t{64} << 20;
  int max_concurrent_debug_attention = 2;
  // Longest Tokenize text, in bytes (its reply is several times larger).
  size_t max_tokenize_bytes = 256 << 10;
  // Tokenize calls (either port) running at once; beyond, RESOURCE_EXHAUSTED.
  // A 256 KiB text is ~10 ms to ~1 s of one core, on the transport's thread:
  // unbounded, 16 of them at once starved gRPC's health service for seconds.
  int max_concurrent_tokenize = 4;
  // What the HTTP API's GET /tokenizer_info reports (vLLM's endpoint, which
  // lm-evaluation-harness reads): the special tokens as the model's files
  // spell them, and its chat template ("" if none).
  std::string bos_token;
  std::string eos_token;
  std::string chat_template;
  // Structured output: the compiler's cache and limits.
  ConstraintCompilerOptions constraint;
};

class TextService {
 public:
  // `engine` (and `metrics`, if not null) must outlive the service.
  // `attention_decoder` serves DebugAttention; null (or debug_attention off)
  // disables it.
  // `chat` renders conversations (server/api/chat_prompt.h); null: the
  // model has no chat template, and a conversation is FAILED_PRECONDITION.
  TextService(const TextServiceOptions& options, Engine* engine,
              std::unique_ptr<Decoder> attention_decoder,
              Metrics* metrics = nullptr,
              std::unique_ptr<const ChatPrompter> chat = nullptr);
  ~TextService();

  TextService(const TextService&) = delete;
  TextService& operator=(const TextService&) = delete;

  // INVALID_ARGUMENT naming `field` if `text` is over max_tokenize_bytes.
  absl::Status CheckTextSize(absl::string_view text,
                             absl::string_view field) const;
  // The same bound on a conversation, counted as its encoded size (its
  // messages, tools and kwargs): INVALID_ARGUMENT over max_tokenize_bytes.
  absl::Status CheckConversationSize(const textgen::v1::Prompt& prompt) const;

  // Generate's engine request (CheckTextSize, then ToEngineRequest) with
  // `deadline`, submitted for `caller` (the front door's): its stream, or
  // INVALID_ARGUMENT naming the field, or Engine::Submit's refusals. A
  // refusal is counted in the metrics; a stream's end is the caller's to
  // count (Metrics::RecordRequest), since only the transport knows whether
  // its client stayed.
  //
  // An authenticated caller's request carries its identity into the engine:
  // its client (for the per-client KV share, --client_max_kv_fraction) and
  // its cache salt (its own prefix-cache partition). An anonymous caller's
  // carries neither: without tokens there is one shared cache and no KV
  // share, since an address is no identity behind a proxy or NAT (every
  // caller would share one share, capping the whole server at it).
  //
  // `max_new_tokens_must_fit`: a max_new_tokens the request gives must fit
  // the context with the prompt (INVALID_ARGUMENT otherwise), as OpenAI's
  // API rules; gRPC's rule is to generate until the context is full.
  absl::StatusOr<std::shared_ptr<RequestStream>> SubmitGenerate(
      const textgen::v1::GenerateRequest& request, absl::Time deadline,
      const Caller& caller, bool max_new_tokens_must_fit = false);

  // GetModelInfo's reply: the model, its name and the server's limits.
  textgen::v1::ModelInfo DescribeServer() const;

  // Tokenize's reply, or FAILED_PRECONDITION (no tokenizer),
  // INVALID_ARGUMENT (too long, or text the tokenizer refuses),
  // RESOURCE_EXHAUSTED (max_concurrent_tokenize calls are running).
  // Admitted calls run on the service's Tokenize threads (below), at a lower
  // priority than serving; the calling thread waits for the reply.
  absl::StatusOr<textgen::v1::TokenizeResponse> TokenizeText(
      const textgen::v1::TokenizeRequest& request);

  // The text of token ids (special tokens contribute none), or
  // FAILED_PRECONDITION (no tokenizer), INVALID_ARGUMENT (an id outside the
  // vocabulary, more ids than max_tokenize_bytes).
  absl::StatusOr<std::string> Detokenize(absl::Span<const int> ids) const;

  // TokenizeText for a caller whose thread must not wait on it (gRPC's
  // callback threads, which also answer health checks): done(its result) on
  // one of the service's Tokenize threads, or on the calling thread at once
  // when the call is refused before any work.
  using TokenizeDone =
      std::function<void(absl::StatusOr<textgen::v1::TokenizeResponse>)>;
  void TokenizeLater(textgen::v1::TokenizeRequest request, TokenizeDone done);

  // DebugAttention's admission ticket, to keep until the reply is written:
  // FAILED_PRECONDITION when it is off, INVALID_ARGUMENT (text too long),
  // RESOURCE_EXHAUSTED (calls at once).
  absl::StatusOr<std::shared_ptr<const void>> AdmitDebugAttention(
      const textgen::v1::DebugAttentionRequest& request);

  // The pass for a request already admitted (AdmitDebugAttention succeeded,
  // so DebugAttention is on), on the debugger's own thread, its messages to
  // `emit` as they are made, then done(its status) there:
  // AttentionDebugger::RunLater. Passes take turns on that niced thread, and
  // `emit` and `done` run in turn with them.
  void RunDebugAttentionLater(textgen::v1::DebugAttentionRequest request,
                              std::function<absl::Status()> check,
                              AttentionDebugger::EmitLater emit,
                              AttentionDebugger::Done done);

  Engine& engine() const { return *engine_; }
  Metrics* metrics() const { return metrics_; }
  // Null when the model has no chat template.
  const ChatPrompter* chat() const { return chat_.get(); }
  const TextServiceOptions& options() const { return options_; }

 private:
  const TextServiceOptions options_;
  Engine* const engine_;
  Metrics* const metrics_;                          // May be null.
  const Tokenizer* const tokenizer_;                // May be null.
  const std::unique_ptr<const ChatPrompter> chat_;  // May be null.
  ConstraintCompiler constraints_;
  // Null when DebugAttention is off.
  const std::unique_ptr<AttentionDebugger> attention_;
  // Tokenize: the calls admitted and not yet done (up to
  // options_.max_concurrent_tokenize), which is also the most jobs ever
  // queued; as many threads as that, started on first use, niced like the
  // DebugAttention worker so that tokenizing a long text yields the CPU to
  // the engine and to gRPC's threads (health checks).
  absl::StatusOr<textgen::v1::TokenizeResponse> Tokenize(
      const textgen::v1::TokenizeRequest& request) const;
  std::atomic<int> tokenizing_{0};
  // Last, so that it is destroyed first: the jobs still queued run while
  // everything they use is there.
  BackgroundQueue tokenize_threads_;
};

}  // namespace textgen

#endif  // TEXTGEN_SERVER_API_TEXT_SERVICE_H_
