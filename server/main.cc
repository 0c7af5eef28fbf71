// textgen_server: serves a model over gRPC (textgen.v1.TextGeneration, plus
// grpc.health.v1 and server reflection) and, with --http_port, over HTTP
// (OpenAI-compatible completions, server/http/http_server.h).
//
//   build/server/textgen_server --model models/shakespeare-char --port 50051
//   build/server/textgen_server --model stories260K.bin --tokenizer tok512.bin
//
// SIGTERM or SIGINT drains (server/server.h): health turns NOT_SERVING,
// calls still arriving are served until they stop (--drain_linger,
// --drain_quiet), then new calls and connections are refused, connections
// get GOAWAY, running streams get up to --drain_seconds (from the signal) to
// finish, then the process exits 0.
// SIGHUP re-reads --auth_tokens_file. The security flags (TLS, tokens,
// per-client limits, connections, metrics) are server/README.md "Security".
#include <malloc.h>
#include <signal.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/file_util.h"
#include "base/resident_memory.h"
#include "base/status_macros.h"
#include "engine/draft_model.h"
#include "model/formats/chat_template_files.h"
#include "model/formats/load_flags.h"
#include "model/formats/memory_budget.h"
#include "model/formats/model_loader.h"
#include "model/kernels/dispatch.h"
#include "server/front_door/auth.h"
#include "server/http/browser_guard.h"
#include "server/server.h"
#include "spdlog/spdlog.h"

namespace textgen {
// --debug_attention=off|token|open (and the old true/false).
bool AbslParseFlag(absl::string_view text, DebugAttentionMode* mode,
                   std::string* error) {
  absl::StatusOr<DebugAttentionMode> parsed = ParseDebugAttentionMode(text);
  if (!parsed.ok()) {
    *error = std::string(parsed.status().message());
    return false;
  }
  *mode = *parsed;
  return true;
}
std::string AbslUnparseFlag(DebugAttentionMode mode) {
  return DebugAttentionModeName(mode);
}
}  // namespace textgen

ABSL_FLAG(std::string, host, "127.0.0.1",
          "Address to listen on; loopback by default (0.0.0.0: every "
          "interface, as in the container image)");
ABSL_FLAG(int, port, 50051, "Port to listen on; 0 picks a free one");
ABSL_FLAG(int, threads, 1,
          "Threads of the engine's forward pass, the engine thread included "
          "(model/decoder.h); results do not depend on it");
ABSL_FLAG(int, num_slots, 8,
          "Sequences generated at once, at most (each a KV-cache slot: a "
          "handle on blocks of the pool)");
ABSL_FLAG(int, kv_block_tokens, 16, "Positions per KV-cache block");
ABSL_FLAG(int, kv_cache_tokens, 0,
          "Positions the KV-cache pool holds over all sequences (whole "
          "blocks); 0 = num_slots x the model's context, the memory of "
          "unpaged slots");
ABSL_FLAG(bool, prefix_cache, true,
          "Reuse the KV-cache blocks of earlier prompts' common prefixes");
ABSL_FLAG(int, max_queue, 64,
          "Requests that may wait for a slot; beyond, RESOURCE_EXHAUSTED");
ABSL_FLAG(int, max_completions, 8,
          "Largest n (completions per Generate call) accepted; each takes a "
          "slot and counts against --max_queue");
ABSL_FLAG(int, max_new_tokens_limit, 1024, "Largest max_new_tokens accepted");
ABSL_FLAG(int, default_max_new_tokens, 256, "What max_new_tokens = 0 means");
ABSL_FLAG(int, max_prompt_tokens, 0,
          "Longest prompt in tokens; 0 = the model's context less one");
ABSL_FLAG(int, prefill_chunk_tokens, 256, "Prompt tokens fed per engine step");
ABSL_FLAG(std::string, speculative, "off",
          "Speculative decoding: off, ngram (prompt lookup) or draft "
          "(--draft_model). The output is the same as without it, token for "
          "token; only the speed differs");
ABSL_FLAG(int, speculative_tokens, 0,
          "Tokens proposed per step at most (a request may ask for fewer); 0: "
          "the mode's default, 5 for ngram and 3 for draft");
ABSL_FLAG(int, speculative_max_batch, 4,
          "Propose only while at most this many sequences decode in a step: "
          "a larger batch has no idle compute to verify guesses with");
ABSL_FLAG(double, speculative_draft_min_probability, 0,
          "--speculative=draft: a sequence's guesses stop at the first the "
          "draft gives less than this probability (llama.cpp's "
          "--draft-p-min); 0 = off");
ABSL_FLAG(std::string, draft_model, "",
          "The draft model of --speculative=draft: a directory or file the "
          "server loads, with the same tokenizer as --model, held as "
          "--weights_dtype says");
ABSL_FLAG(std::string, chat_template, "",
          "The chat template to render conversations with (a Jinja file, or a "
          "chat_template.json / tokenizer_config.json holding one), instead "
          "of the model's own (tokenizer_config.json, chat_template.jinja, "
          "GGUF tokenizer.chat_template). Empty = the model's, if it has one");
ABSL_FLAG(int, max_attention_tokens, 4096,
          "Longest prompt DebugAttention accepts (and at most the model's "
          "context); what one reply carries is bounded by "
          "--max_attention_map_bytes, so long prompts are looked at through "
          "query/key ranges and pooled overviews");
ABSL_FLAG(textgen::DebugAttentionMode, debug_attention,
          textgen::DebugAttentionMode::kToken,
          "Who may call DebugAttention and ask for attention taps: off, token "
          "(a debug-role token from --auth_tokens_file; without that file no "
          "call is authenticated and this means everyone), open (everyone "
          "who may generate). The old true/false mean open/off");
ABSL_FLAG(double, drain_seconds, 30,
          "On SIGTERM, how long running streams may take to finish");
ABSL_FLAG(absl::Duration, drain_linger, absl::Seconds(5),
          "On SIGTERM, health turns NOT_SERVING at once but calls that still "
          "arrive are served for up to this long (within --drain_seconds), "
          "then new calls get UNAVAILABLE and connections a GOAWAY; 0 closes "
          "at once");
ABSL_FLAG(absl::Duration, drain_quiet, absl::Milliseconds(250),
          "The linger (--drain_linger) ends as soon as no call has arrived "
          "for this long");
ABSL_FLAG(int64_t, max_attention_map_bytes, int64_t{64} << 20,
          "Largest total of attention maps one DebugAttention reply carries "
          "(layers x heads x tokens^2 x 4 bytes, repeats counted once)");
ABSL_FLAG(int, max_concurrent_debug_attention, 2,
          "DebugAttention calls admitted at once (until their reply is "
          "written); beyond, RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, max_tokenize_bytes, 256 << 10,
          "Longest text Tokenize (and a text prompt) accepts, in bytes");
ABSL_FLAG(int, max_concurrent_tokenize, 4,
          "Tokenize calls (gRPC and HTTP /tokenize) running at once; beyond, "
          "RESOURCE_EXHAUSTED (HTTP 429)");
ABSL_FLAG(int, constraint_cache_entries, 64,
          "Compiled structured-output constraints (JSON Schemas, regexes, "
          "grammars, choices) kept for reuse");
ABSL_FLAG(int64_t, constraint_cache_mib, 512,
          "Memory the cached constraints' token masks may take, in MiB");
ABSL_FLAG(int, max_concurrent_constraint_compiles, 2,
          "New constraints compiling at once (each can take a core for up to "
          "--max_constraint_compile_seconds); beyond, RESOURCE_EXHAUSTED "
          "(HTTP 429)");
ABSL_FLAG(double, max_constraint_compile_seconds, 10,
          "A constraint whose compilation against the vocabulary takes longer "
          "is refused (RESOURCE_EXHAUSTED)");
ABSL_FLAG(int64_t, max_constraint_bytes, 64 << 10,
          "Longest constraint text (schema, regex, grammar, choices), bytes");
ABSL_FLAG(double, stream_idle_timeout, 30,
          "Seconds a Generate stream may go unread (its buffer full) before "
          "it ends with RESOURCE_EXHAUSTED and frees its slot");
ABSL_FLAG(int64_t, memory_budget_mb, 0,
          "Memory the model may need (weights, position table, a full-context "
          "KV cache per slot), checked from its config before loading; 0 = "
          "the machine's physical memory");
ABSL_FLAG(int, http_port, 0,
          "Port for the HTTP API (OpenAI-compatible /v1/completions, "
          "/v1/models, /tokenize, /v1/attention, /health, /metrics; "
          "server/README.md \"HTTP API\"), on --host with the same tokens, "
          "limits and TLS as gRPC; 0 = off");
ABSL_FLAG(absl::Duration, http_head_timeout, absl::Seconds(10),
          "HTTP API: time a request's line and headers may take to arrive, "
          "from the connection's start or, on a kept-alive connection, from "
          "the request's first byte; the connection is closed after it "
          "(slowloris: a byte now and then does not extend it)");
ABSL_FLAG(absl::Duration, http_body_timeout, absl::Seconds(30),
          "HTTP API: time a request body may take to arrive, in whatever "
          "transfer encoding; the connection is closed after it");
ABSL_FLAG(absl::Duration, http_keep_alive_timeout, absl::Seconds(5),
          "HTTP API: time a kept-alive connection may sit idle between "
          "requests");
ABSL_FLAG(int64_t, http_max_head_bytes, 16 << 10,
          "HTTP API: bytes a request line and headers may take (431 beyond)");
ABSL_FLAG(int, http_max_connections, 1024,
          "HTTP API: connections open at once (beyond: 503 and close); keep "
          "it under the process's file-descriptor limit");
ABSL_FLAG(int, http_max_connections_per_peer, 256,
          "HTTP API: connections open at once from one address (beyond: 503 "
          "and close)");
ABSL_FLAG(int, max_json_depth, 64,
          "HTTP API: arrays and objects a JSON body may nest (the body is "
          "1); deeper is a 400 before the body is built");
ABSL_FLAG(int64_t, max_json_elements, 1 << 18,
          "HTTP API: values a JSON body may hold in all (strings, numbers, "
          "arrays, ...); more is a 400 before the body is built");
ABSL_FLAG(std::string, allowed_hosts, "",
          "HTTP API: comma-separated Host names it answers for besides its "
          "listening address, the address a connection reached and "
          "loopback names (DNS-rebinding defence; others get 421); `*` = "
          "any (behind a proxy that checks Host)");
ABSL_FLAG(std::string, allowed_origins, "",
          "HTTP API: comma-separated origins (`https://app.example:8443`) "
          "a browser may call it from cross-origin (CORS preflight answered, "
          "Access-Control-Allow-Origin sent); `*` = any; empty = none");
ABSL_FLAG(int, metrics_port, 0,
          "Port for Prometheus metrics over HTTP (GET /metrics); 0 = off");
ABSL_FLAG(std::string, metrics_host, "127.0.0.1",
          "Address the metrics port listens on; loopback by default, since "
          "metrics show load and errors to whoever can read them");
ABSL_FLAG(std::string, metrics_token_file, "",
          "File holding a token that GET /metrics must send as "
          "`Authorization: Bearer <token>`; empty = metrics are open");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain: serve TLS (with --tls_key)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle: require client certificates it signed (mutual TLS)");
ABSL_FLAG(int, tls_refresh_seconds, 60,
          "How often the TLS files are re-read (rotation without restart)");
ABSL_FLAG(std::string, auth_tokens_file, "",
          "Bearer tokens with roles, one `role token` or `role sha256:<hex>` "
          "per line (roles: generate, debug); re-read on SIGHUP. Empty = no "
          "authentication");
ABSL_FLAG(bool, reflection, true,
          "Serve gRPC server reflection (lists and describes the API)");
ABSL_FLAG(int, client_max_streams, -1,
          "Streams one client (a token; without tokens, an address) may have "
          "open at once, queued ones included; 0 = no limit; -1 = half of "
          "--num_slots with --auth_tokens_file, else no limit (behind a "
          "proxy every caller has the proxy's address)");
ABSL_FLAG(double, client_max_kv_fraction, 0.5,
          "Share of the KV pool's blocks one client's running requests may "
          "hold, in (0, 1]; 1 = no limit. Beyond it the client's requests wait "
          "while other clients' go ahead; one that alone needs more is "
          "RESOURCE_EXHAUSTED. Applies to token clients only "
          "(--auth_tokens_file): an address is no identity behind a proxy, "
          "where it would cap the whole server at the share");
ABSL_FLAG(double, client_rate, 0,
          "Requests per second one client may make on average (a token "
          "bucket); 0 = no limit");
ABSL_FLAG(double, client_burst, 0,
          "Requests one client may make at once after a pause; 0 = "
          "max(1, --client_rate)");
ABSL_FLAG(absl::Duration, keepalive_time, absl::Seconds(60),
          "Ping a connection idle this long to find dead peers; 0 = never");
ABSL_FLAG(absl::Duration, keepalive_timeout, absl::Seconds(20),
          "Close a connection whose ping is unanswered this long");
ABSL_FLAG(absl::Duration, max_connection_age, absl::Minutes(30),
          "Send GOAWAY to connections this old, so L4 balancers can spread "
          "clients again; 0 = no limit");
ABSL_FLAG(absl::Duration, max_connection_age_grace, absl::Minutes(5),
          "How long calls may still run on a connection past its age");
ABSL_FLAG(int, grpc_max_concurrent_streams, 100,
          "HTTP/2 streams a client may have open at once on one gRPC "
          "connection (SETTINGS_MAX_CONCURRENT_STREAMS); 0 leaves gRPC's "
          "default (no limit). Bounds open streams, not reset ones: see "
          "server/README.md \"Rapid reset\"");
ABSL_FLAG(int, max_receive_message_bytes, 4 << 20,
          "Largest request message in bytes (larger: RESOURCE_EXHAUSTED)");

namespace textgen {
namespace {

// "shakespeare-char" from "models/shakespeare-char/", "stories260K.bin" from
// "/data/stories260K.bin".
std::string ModelBaseName(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The memory held beside the weights that the serving flags imply, and the
// budget for all of it (--memory_budget_mb): the engine's KV pool
// (--kv_cache_tokens positions, or by default a full context per slot), and
// DebugAttention's one slot.
absl::StatusOr<MemoryBudget> ServingMemory(KvDtype kv_dtype) {
  if (absl::GetFlag(FLAGS_memory_budget_mb) < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--memory_budget_mb=", absl::GetFlag(FLAGS_memory_budget_mb),
        ": must be 0 or positive"));
  }
  MemoryBudget budget;
  budget.bytes = static_cast<uint64_t>(absl::GetFlag(FLAGS_memory_budget_mb))
                 << 20;
  budget.kv_dtype = kv_dtype;
  const int debug_slots =
      absl::GetFlag(FLAGS_debug_attention) != DebugAttentionMode::kOff ? 1 : 0;
  if (absl::GetFlag(FLAGS_kv_cache_tokens) > 0) {
    budget.kv_cache_slots = debug_slots;
    budget.kv_cache_tokens = absl::GetFlag(FLAGS_kv_cache_tokens);
    budget.sequence_slots = absl::GetFlag(FLAGS_num_slots) + debug_slots;
  } else {
    budget.kv_cache_slots = absl::GetFlag(FLAGS_num_slots) + debug_slots;
  }
  return budget;
}

// Blocks the signals in every thread (gRPC's and the engine's inherit the
// mask) so that the calling thread alone receives them, with sigwait. Called
// once the model is loaded: while it loads (no thread yet, nothing to drain)
// SIGTERM and SIGINT keep their default action and end the process at once.
sigset_t BlockSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);  // Reloads --auth_tokens_file.
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

// The engine's decoder over the loaded weights and, if DebugAttention is on,
// its own: it shares the engine's weights (server/api/debug_attention.h), only
// its scratch memory is its own, and it has one thread (it runs on gRPC's).
struct Decoders {
  std::unique_ptr<Decoder> engine;
  std::unique_ptr<Decoder> attention;
};
Decoders MakeDecoders(Checkpoint checkpoint) {
  Decoders decoders;
  const ModelConfig config = checkpoint.config;
  DecoderOptions options;
  options.threads = absl::GetFlag(FLAGS_threads);
  decoders.engine = std::make_unique<Decoder>(std::move(checkpoint), options);
  if (absl::GetFlag(FLAGS_debug_attention) != DebugAttentionMode::kOff) {
    // As many threads as the engine's, niced as the debugger's own thread is
    // (server/api/debug_attention.h): a 4,096-token pass takes seconds, and
    // serving comes first.
    DecoderOptions attention_options = options;
    attention_options.nice = kDebugAttentionNice;
    decoders.attention = std::make_unique<Decoder>(
        config, decoders.engine->shared_weights(), attention_options);
  }
  return decoders;
}

// The draft model of --speculative=draft (--draft_model), with as many
// threads as the engine's, checked to share the target's tokenizer; null for
// the other modes. INVALID_ARGUMENT for a --draft_model without draft mode or
// the other way round.
absl::StatusOr<std::unique_ptr<Decoder>> LoadDraft(
    const SpeculationOptions& speculation, const Tokenizer* tokenizer,
    const LoadOptions& load_options, const MemoryBudget& budget) {
  const std::string path = absl::GetFlag(FLAGS_draft_model);
  const bool wanted = speculation.mode == SpeculativeMode::kDraft;
  if (wanted != !path.empty()) {
    return absl::InvalidArgumentError(
        wanted ? "--speculative=draft needs --draft_model"
               : "--draft_model is given but --speculative is not draft");
  }
  if (!wanted) return nullptr;
  const absl::Time start = absl::Now();
  absl::StatusOr<LoadedModel> draft = LoadModel(path, "", load_options, budget);
  if (!draft.ok()) {
    return absl::Status(
        draft.status().code(),
        absl::StrCat("--draft_model=", path, ": ", draft.status().message()));
  }
  if (absl::Status s =
          DraftModel::CheckTokenizers(tokenizer, draft->tokenizer.get());
      !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--draft_model=", path, ": ", s.message()));
  }
  spdlog::info("draft model {}: {} in {:.2f} s", path,
               DescribeConfig(draft->checkpoint.config),
               absl::ToDoubleSeconds(absl::Now() - start));
  DecoderOptions options;
  options.threads = absl::GetFlag(FLAGS_threads);
  return std::make_unique<Decoder>(std::move(draft->checkpoint), options);
}

// The bearer token /metrics asks for (--metrics_token_file), "" for none.
absl::StatusOr<std::string> MetricsToken() {
  const std::string file = absl::GetFlag(FLAGS_metrics_token_file);
  if (file.empty()) return std::string();
  absl::StatusOr<std::string> token = ReadFileToString(file);
  if (!token.ok()) {
    return absl::Status(
        token.status().code(),
        absl::StrCat("--metrics_token_file: ", token.status().ToString()));
  }
  std::string stripped(absl::StripAsciiWhitespace(*token));
  if (stripped.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics_token_file=", file, ": the file is empty"));
  }
  return stripped;
}

// The server's options from the flags: its ports, engine, front door, gRPC
// settings and service limits.
absl::StatusOr<TextgenServerOptions> ServerOptions(
    const std::string& model_path, KvDtype kv_dtype) {
  const DebugAttentionMode debug_attention =
      absl::GetFlag(FLAGS_debug_attention);
  TextgenServerOptions options;
  absl::StatusOr<ChatTemplateFiles> chat_template = FindChatTemplate(
      model_path, TokenizerFlag(), absl::GetFlag(FLAGS_chat_template));
  if (!chat_template.ok()) return chat_template.status();
  options.chat_template = *std::move(chat_template);
  if (options.chat_template.empty()) {
    spdlog::info(
        "no chat template: conversations are refused "
        "(--chat_template FILE serves chat)");
  } else {
    spdlog::info("chat template from {}", options.chat_template.origin);
  }
  options.address =
      absl::StrCat(absl::GetFlag(FLAGS_host), ":", absl::GetFlag(FLAGS_port));
  options.engine.num_slots = absl::GetFlag(FLAGS_num_slots);
  options.engine.kv_block_tokens = absl::GetFlag(FLAGS_kv_block_tokens);
  options.engine.kv_cache_tokens = absl::GetFlag(FLAGS_kv_cache_tokens);
  options.engine.kv_dtype = kv_dtype;
  options.engine.prefix_cache = absl::GetFlag(FLAGS_prefix_cache);
  options.engine.max_queue = absl::GetFlag(FLAGS_max_queue);
  options.engine.max_completions = absl::GetFlag(FLAGS_max_completions);
  options.engine.max_new_tokens_limit =
      absl::GetFlag(FLAGS_max_new_tokens_limit);
  options.engine.default_max_new_tokens =
      absl::GetFlag(FLAGS_default_max_new_tokens);
  options.engine.prefill_chunk_tokens =
      absl::GetFlag(FLAGS_prefill_chunk_tokens);
  options.engine.stream_idle_timeout =
      absl::Seconds(absl::GetFlag(FLAGS_stream_idle_timeout));
  options.engine.max_prompt_tokens = absl::GetFlag(FLAGS_max_prompt_tokens);
  TEXTGEN_ASSIGN_OR_RETURN(
      options.engine.speculation.mode,
      ParseSpeculativeMode(absl::GetFlag(FLAGS_speculative)));
  options.engine.speculation.tokens = absl::GetFlag(FLAGS_speculative_tokens);
  options.engine.speculation.max_batch =
      absl::GetFlag(FLAGS_speculative_max_batch);
  options.engine.speculation.draft_min_probability = static_cast<float>(
      absl::GetFlag(FLAGS_speculative_draft_min_probability));
  if (!absl::GetFlag(FLAGS_draft_model).empty()) {
    options.service.draft_model_name =
        ModelBaseName(absl::GetFlag(FLAGS_draft_model));
  }
  options.engine.client_max_kv_fraction =
      absl::GetFlag(FLAGS_client_max_kv_fraction);
  options.metrics_port = absl::GetFlag(FLAGS_metrics_port) > 0
                             ? absl::GetFlag(FLAGS_metrics_port)
                             : -1;
  options.metrics_host = absl::GetFlag(FLAGS_metrics_host);
  options.http_port =
      absl::GetFlag(FLAGS_http_port) > 0 ? absl::GetFlag(FLAGS_http_port) : -1;
  options.http_host = absl::GetFlag(FLAGS_host);
  options.http_limits.head_timeout = absl::GetFlag(FLAGS_http_head_timeout);
  options.http_limits.body_timeout = absl::GetFlag(FLAGS_http_body_timeout);
  options.http_limits.keep_alive_idle_timeout =
      absl::GetFlag(FLAGS_http_keep_alive_timeout);
  options.http_limits.max_head_bytes = static_cast<size_t>(
      std::max<int64_t>(1024, absl::GetFlag(FLAGS_http_max_head_bytes)));
  options.http_limits.max_connections =
      std::max(1, absl::GetFlag(FLAGS_http_max_connections));
  options.http_limits.max_connections_per_peer =
      std::max(1, absl::GetFlag(FLAGS_http_max_connections_per_peer));
  options.http_json_limits.max_depth =
      std::max(1, absl::GetFlag(FLAGS_max_json_depth));
  options.http_json_limits.max_elements =
      std::max<int64_t>(1, absl::GetFlag(FLAGS_max_json_elements));
  options.http_allowed_hosts =
      SplitNameList(absl::GetFlag(FLAGS_allowed_hosts));
  options.http_allowed_origins =
      SplitNameList(absl::GetFlag(FLAGS_allowed_origins));
  TEXTGEN_ASSIGN_OR_RETURN(options.metrics_token, MetricsToken());
  options.tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  options.tls.key_file = absl::GetFlag(FLAGS_tls_key);
  options.tls.client_ca_file = absl::GetFlag(FLAGS_tls_client_ca);
  options.tls.refresh_seconds = absl::GetFlag(FLAGS_tls_refresh_seconds);
  options.front_door.auth.tokens_file = absl::GetFlag(FLAGS_auth_tokens_file);
  options.front_door.auth.debug_attention = debug_attention;
  options.front_door.limits.max_streams =
      absl::GetFlag(FLAGS_client_max_streams);
  if (options.front_door.limits.max_streams == -1) {
    options.front_door.limits.max_streams =
        options.front_door.auth.tokens_file.empty()
            ? 0
            : std::max(1, options.engine.num_slots / 2);
  }
  options.front_door.limits.rate = absl::GetFlag(FLAGS_client_rate);
  options.front_door.limits.burst = absl::GetFlag(FLAGS_client_burst);
  options.reflection = absl::GetFlag(FLAGS_reflection);
  options.drain_linger =
      std::max(absl::ZeroDuration(), absl::GetFlag(FLAGS_drain_linger));
  options.drain_quiet =
      std::max(absl::ZeroDuration(), absl::GetFlag(FLAGS_drain_quiet));
  options.keepalive_time = absl::GetFlag(FLAGS_keepalive_time);
  options.keepalive_timeout = absl::GetFlag(FLAGS_keepalive_timeout);
  options.max_connection_age = absl::GetFlag(FLAGS_max_connection_age);
  options.max_connection_age_grace =
      absl::GetFlag(FLAGS_max_connection_age_grace);
  options.max_receive_message_bytes =
      absl::GetFlag(FLAGS_max_receive_message_bytes);
  options.max_concurrent_streams =
      std::max(0, absl::GetFlag(FLAGS_grpc_max_concurrent_streams));
  // The name only: a path would show the server's directory layout.
  options.service.model_name = ModelBaseName(model_path);
  options.service.max_attention_tokens =
      absl::GetFlag(FLAGS_max_attention_tokens);
  options.service.max_attention_map_bytes = static_cast<size_t>(
      std::max<int64_t>(0, absl::GetFlag(FLAGS_max_attention_map_bytes)));
  options.service.max_concurrent_debug_attention =
      std::max(1, absl::GetFlag(FLAGS_max_concurrent_debug_attention));
  options.service.max_tokenize_bytes = static_cast<size_t>(
      std::max<int64_t>(0, absl::GetFlag(FLAGS_max_tokenize_bytes)));
  options.service.max_concurrent_tokenize =
      std::max(1, absl::GetFlag(FLAGS_max_concurrent_tokenize));
  ConstraintCompilerOptions& constraint = options.service.constraint;
  constraint.cache_entries =
      std::max(1, absl::GetFlag(FLAGS_constraint_cache_entries));
  constraint.cache_bytes =
      std::max<int64_t>(1, absl::GetFlag(FLAGS_constraint_cache_mib)) << 20;
  constraint.max_concurrent_compiles =
      std::max(1, absl::GetFlag(FLAGS_max_concurrent_constraint_compiles));
  constraint.compile.max_compile_time = absl::Seconds(
      std::max(0.001, absl::GetFlag(FLAGS_max_constraint_compile_seconds)));
  constraint.max_constraint_bytes = static_cast<size_t>(
      std::max<int64_t>(1, absl::GetFlag(FLAGS_max_constraint_bytes)));
  options.service.debug_attention = debug_attention != DebugAttentionMode::kOff;
  return options;
}

// Serves until SIGTERM or SIGINT, then drains (--drain_seconds); SIGHUP
// reloads the tokens.
void ServeUntilSignal(TextgenServer& server, const sigset_t& signals) {
  int signal = 0;
  while (sigwait(&signals, &signal) == 0 && signal == SIGHUP) {
    if (absl::Status s = server.ReloadTokens(); s.ok()) {
      spdlog::info("SIGHUP: tokens reloaded");
    } else {
      spdlog::error("SIGHUP: tokens not reloaded, the old ones stay: {}",
                    s.ToString());
    }
  }
  spdlog::info("signal {}: draining", signal);
  server.Drain(absl::Seconds(absl::GetFlag(FLAGS_drain_seconds)));
}

// Reads the flags, loads the model within the memory budget, starts the
// server and serves until a signal; 1 on any error, logged.
int Run() {
  if (absl::GetFlag(FLAGS_threads) < 1) {
    spdlog::error("--threads={}: must be at least 1",
                  absl::GetFlag(FLAGS_threads));
    return 1;
  }
  const absl::StatusOr<LoadFlags> flags = ParseLoadFlags();
  if (!flags.ok()) {
    spdlog::error("{}", std::string(flags.status().message()));
    return 1;
  }
  spdlog::info("CPU kernels: {} (--cpu_kernels={})",
               kernels::KernelFamilyName(flags->cpu_kernels),
               absl::GetFlag(FLAGS_cpu_kernels));
  const absl::StatusOr<MemoryBudget> budget = ServingMemory(flags->kv_dtype);
  if (!budget.ok()) {
    spdlog::error("{}", std::string(budget.status().message()));
    return 1;
  }

  const std::string model_path = ModelFlag();
  const absl::Time start = absl::Now();
  absl::StatusOr<LoadedModel> model =
      LoadModel(model_path, TokenizerFlag(), flags->load_options(), *budget);
  if (!model.ok()) {
    spdlog::error("{}", model.status().ToString());
    return 1;
  }
  const sigset_t signals = BlockSignals();
  const ModelConfig config = model->checkpoint.config;
  spdlog::info("loaded {} in {:.2f} s: {:.1f} MiB of tensors as stored",
               model_path, absl::ToDoubleSeconds(absl::Now() - start),
               model->checkpoint.stored_bytes / 1048576.0);
  Decoders decoders = MakeDecoders(std::move(model->checkpoint));
  spdlog::info(
      "model {}: {}; weights {} ({:.1f} MiB); KV cache {}; {} thread(s); "
      "tokenizer {}",
      model_path, DescribeConfig(config),
      decoders.engine->weights().StorageName(),
      decoders.engine->weights().MemoryBytes() / 1048576.0,
      KvDtypeName(flags->kv_dtype), decoders.engine->threads(),
      model->tokenizer ? model->tokenizer->Describe() : "none");

  absl::StatusOr<TextgenServerOptions> options =
      ServerOptions(model_path, flags->kv_dtype);
  if (!options.ok()) {
    spdlog::error("{}", std::string(options.status().message()));
    return 1;
  }
  absl::StatusOr<std::unique_ptr<Decoder>> draft =
      LoadDraft(options->engine.speculation, model->tokenizer.get(),
                flags->load_options(), *budget);
  if (!draft.ok()) {
    spdlog::error("{}", draft.status().ToString());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<TextgenServer>> server = TextgenServer::Start(
      *options, std::move(decoders.engine), std::move(decoders.attention),
      std::move(model->tokenizer), *std::move(draft));
  if (!server.ok()) {
    spdlog::error("{}", server.status().ToString());
    return 1;
  }
  // Start-up cost, as bench/README reports it: the time to serving and the
  // resident size then (weights plus whatever the server holds).
  spdlog::info("start-up {:.2f} s; resident {:.1f} MiB",
               absl::ToDoubleSeconds(absl::Now() - start),
               ResidentMemoryBytes() / 1048576.0);
  ServeUntilSignal(**server, signals);
  return 0;
}

}  // namespace
}  // namespace textgen

int main(int argc, char** argv) {
  // Allocations of 4 MiB and more (a request body at the default
  // --max_receive_message_bytes, a large reply) get pages of their own that
  // go back to the kernel when freed. glibc would raise this threshold after
  // the first such block is freed and serve later ones from its per-thread
  // arenas, which keep them: 16 concurrent 3.8 MB HTTP bodies left 91 MB
  // resident above idle that way, 2 MB with the threshold fixed (measured by
  // tests/server/http/frontdoor_http_test.py).
  mallopt(M_MMAP_THRESHOLD, 4 << 20);
  absl::SetProgramUsageMessage(
      "Serves a model over gRPC: textgen_server --model DIR --port N");
  absl::ParseCommandLine(argc, argv);
  return textgen::Run();
}
