// textgen_server: serves a model over gRPC (textgen.v1.TextGeneration, plus
// grpc.health.v1 and server reflection) and, with --http_port, over HTTP
// (OpenAI-compatible completions, server/http/http_server.h).
//
//   build/server/textgen_server --model models/shakespeare-char --port 50051
//   build/server/textgen_server --model stories260K.bin --tokenizer tok512.bin
//
// SIGTERM or SIGINT drains (server/server.h): health turns NOT_SERVING,
// new calls and connections are refused, connections get GOAWAY, running
// streams get up to --drain_seconds to finish, then the process exits 0.
// SIGHUP re-reads --auth_tokens_file. The security flags (TLS, tokens,
// per-client limits, connections, metrics) are server/README.md "Security".
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
#include "model/formats/model_loader.h"
#include "model/kernels/dispatch.h"
#include "server/front_door/auth.h"
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

ABSL_FLAG(std::string, model, "models/shakespeare-char",
          "Checkpoint directory (config.json + model.safetensors + tokenizer) "
          "or a llama2.c .bin file");
ABSL_FLAG(std::string, tokenizer, "",
          "Tokenizer file or directory; default: the one beside the model");
ABSL_FLAG(std::string, host, "127.0.0.1",
          "Address to listen on; loopback by default (0.0.0.0: every "
          "interface, as in the container image)");
ABSL_FLAG(int, port, 50051, "Port to listen on; 0 picks a free one");
ABSL_FLAG(int, threads, 1,
          "Threads of the engine's forward pass, the engine thread included "
          "(model/decoder.h); results do not depend on it");
ABSL_FLAG(std::string, weights_dtype, "f32",
          "How weight matrices are held in memory: f32, bf16 (half the "
          "bytes and memory traffic, f32 arithmetic), int8 (GGUF Q8_0: "
          "blocks of 32 with a scale, 0.28x the bytes; activations quantized "
          "alike on the fly, as llama.cpp), or w8a32 (the same Q8_0 weights "
          "times f32 activations: closer to f32, more arithmetic)");
ABSL_FLAG(std::string, cpu_kernels, "auto",
          "Which build of the kernels runs: auto|generic|avx2|avx512 (auto: "
          "the best this CPU runs; a family the CPU cannot run is refused)");
ABSL_FLAG(int, num_slots, 8,
          "Sequences generated at once, at most (each a KV-cache slot: a "
          "handle on blocks of the pool)");
ABSL_FLAG(int, kv_block_tokens, 16, "Positions per KV-cache block");
ABSL_FLAG(int, kv_cache_tokens, 0,
          "Positions the KV-cache pool holds over all sequences (whole "
          "blocks); 0 = num_slots x the model's context, the memory of "
          "unpaged slots");
ABSL_FLAG(std::string, kv_cache_dtype, "f32",
          "How the KV cache holds keys and values: f32 (exact), or bf16 "
          "(half the memory, so twice the positions per byte, and half the "
          "bytes attention reads per step: faster batched decoding; the "
          "shipped model's top-1 agrees with f32 at 99.9 %). DebugAttention "
          "uses the same");
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
ABSL_FLAG(int, max_attention_tokens, 256,
          "Longest prompt DebugAttention accepts");
ABSL_FLAG(textgen::DebugAttentionMode, debug_attention,
          textgen::DebugAttentionMode::kToken,
          "Who may call DebugAttention and ask for attention taps: off, token "
          "(a debug-role token from --auth_tokens_file; without that file no "
          "call is authenticated and this means everyone), open (everyone "
          "who may generate). The old true/false mean open/off");
ABSL_FLAG(double, drain_seconds, 30,
          "On SIGTERM, how long running streams may take to finish");
ABSL_FLAG(int64_t, max_attention_map_bytes, int64_t{64} << 20,
          "Largest total of attention maps one DebugAttention reply carries "
          "(layers x heads x tokens^2 x 4 bytes, repeats counted once)");
ABSL_FLAG(int, max_concurrent_debug_attention, 2,
          "DebugAttention calls admitted at once (until their reply is "
          "written); beyond, RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, max_tokenize_bytes, 256 << 10,
          "Longest text Tokenize (and a text prompt) accepts, in bytes");
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

int Run() {
  if (absl::GetFlag(FLAGS_threads) < 1) {
    spdlog::error("--threads={}: must be at least 1",
                  absl::GetFlag(FLAGS_threads));
    return 1;
  }
  absl::StatusOr<kernels::KernelFamily> cpu_kernels =
      kernels::SelectKernelFamily(absl::GetFlag(FLAGS_cpu_kernels));
  if (!cpu_kernels.ok()) {
    spdlog::error("--cpu_kernels: {}",
                  std::string(cpu_kernels.status().message()));
    return 1;
  }
  spdlog::info("CPU kernels: {} (--cpu_kernels={})",
               kernels::KernelFamilyName(*cpu_kernels),
               absl::GetFlag(FLAGS_cpu_kernels));
  absl::StatusOr<kernels::WeightType> weight_type =
      ParseWeightType(absl::GetFlag(FLAGS_weights_dtype));
  if (!weight_type.ok()) {
    spdlog::error("--weights_dtype: {}",
                  std::string(weight_type.status().message()));
    return 1;
  }
  LoadOptions load_options;
  load_options.weight_type = *weight_type;
  absl::StatusOr<KvDtype> kv_dtype =
      ParseKvDtype(absl::GetFlag(FLAGS_kv_cache_dtype));
  if (!kv_dtype.ok()) {
    spdlog::error("--kv_cache_dtype: {}",
                  std::string(kv_dtype.status().message()));
    return 1;
  }
  load_options.kv_dtype = *kv_dtype;
  if (absl::GetFlag(FLAGS_memory_budget_mb) < 0) {
    spdlog::error("--memory_budget_mb={}: must be 0 or positive",
                  absl::GetFlag(FLAGS_memory_budget_mb));
    return 1;
  }
  load_options.memory_budget_bytes =
      static_cast<uint64_t>(absl::GetFlag(FLAGS_memory_budget_mb)) << 20;
  // The engine's KV pool (--kv_cache_tokens positions, or by default a full
  // context per slot), and DebugAttention's one slot.
  const int debug_slots =
      absl::GetFlag(FLAGS_debug_attention) != DebugAttentionMode::kOff ? 1 : 0;
  if (absl::GetFlag(FLAGS_kv_cache_tokens) > 0) {
    load_options.kv_cache_slots = debug_slots;
    load_options.kv_cache_tokens = absl::GetFlag(FLAGS_kv_cache_tokens);
    load_options.sequence_slots = absl::GetFlag(FLAGS_num_slots) + debug_slots;
  } else {
    load_options.kv_cache_slots = absl::GetFlag(FLAGS_num_slots) + debug_slots;
  }

  const std::string model_path = absl::GetFlag(FLAGS_model);
  const std::string tokenizer_path = absl::GetFlag(FLAGS_tokenizer);
  const absl::Time start = absl::Now();
  absl::StatusOr<LoadedModel> model =
      LoadModel(model_path, tokenizer_path, load_options);
  if (!model.ok()) {
    spdlog::error("{}", model.status().ToString());
    return 1;
  }

  // Block the signals in every thread (gRPC's and the engine's inherit the
  // mask) so that this thread alone receives them, with sigwait. Only now:
  // while the model loads (no thread yet, nothing to drain) SIGTERM and
  // SIGINT keep their default action and end the process at once.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);  // Reloads --auth_tokens_file.
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  const ModelConfig config = model->checkpoint.config;
  const uint64_t stored_bytes = model->checkpoint.stored_bytes;
  spdlog::info("loaded {} in {:.2f} s: {:.1f} MiB of tensors as stored",
               model_path, absl::ToDoubleSeconds(absl::Now() - start),
               stored_bytes / 1048576.0);
  DecoderOptions decoder_options;
  decoder_options.threads = absl::GetFlag(FLAGS_threads);
  auto decoder =
      std::make_unique<Decoder>(std::move(model->checkpoint), decoder_options);
  const DebugAttentionMode debug_attention =
      absl::GetFlag(FLAGS_debug_attention);
  std::unique_ptr<Decoder> attention_decoder;
  if (debug_attention != DebugAttentionMode::kOff) {
    // DebugAttention's Decoder shares the engine's weights
    // (server/api/debug_attention.h): only its scratch memory is its own. One
    // thread: it runs on gRPC's.
    attention_decoder =
        std::make_unique<Decoder>(config, decoder->shared_weights());
  }
  spdlog::info(
      "model {}: {}; weights {} ({:.1f} MiB); KV cache {}; {} thread(s); "
      "tokenizer {}",
      model_path, DescribeConfig(config), kernels::WeightTypeName(*weight_type),
      decoder->weights().MemoryBytes() / 1048576.0, KvDtypeName(*kv_dtype),
      decoder->threads(),
      model->tokenizer ? model->tokenizer->Describe() : "none");

  TextgenServerOptions options;
  options.address =
      absl::StrCat(absl::GetFlag(FLAGS_host), ":", absl::GetFlag(FLAGS_port));
  options.engine.num_slots = absl::GetFlag(FLAGS_num_slots);
  options.engine.kv_block_tokens = absl::GetFlag(FLAGS_kv_block_tokens);
  options.engine.kv_cache_tokens = absl::GetFlag(FLAGS_kv_cache_tokens);
  options.engine.kv_dtype = *kv_dtype;
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
  options.metrics_port = absl::GetFlag(FLAGS_metrics_port) > 0
                             ? absl::GetFlag(FLAGS_metrics_port)
                             : -1;
  options.metrics_host = absl::GetFlag(FLAGS_metrics_host);
  options.http_port =
      absl::GetFlag(FLAGS_http_port) > 0 ? absl::GetFlag(FLAGS_http_port) : -1;
  options.http_host = absl::GetFlag(FLAGS_host);
  if (const std::string file = absl::GetFlag(FLAGS_metrics_token_file);
      !file.empty()) {
    absl::StatusOr<std::string> token = ReadFileToString(file);
    if (!token.ok()) {
      spdlog::error("--metrics_token_file: {}", token.status().ToString());
      return 1;
    }
    options.metrics_token = std::string(absl::StripAsciiWhitespace(*token));
    if (options.metrics_token.empty()) {
      spdlog::error("--metrics_token_file={}: the file is empty", file);
      return 1;
    }
  }
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
  options.keepalive_time = absl::GetFlag(FLAGS_keepalive_time);
  options.keepalive_timeout = absl::GetFlag(FLAGS_keepalive_timeout);
  options.max_connection_age = absl::GetFlag(FLAGS_max_connection_age);
  options.max_connection_age_grace =
      absl::GetFlag(FLAGS_max_connection_age_grace);
  options.max_receive_message_bytes =
      absl::GetFlag(FLAGS_max_receive_message_bytes);
  // The name only: a path would show the server's directory layout.
  options.service.model_name = ModelBaseName(model_path);
  options.engine.max_prompt_tokens = absl::GetFlag(FLAGS_max_prompt_tokens);
  options.service.max_attention_tokens =
      absl::GetFlag(FLAGS_max_attention_tokens);
  options.service.max_attention_map_bytes = static_cast<size_t>(
      std::max<int64_t>(0, absl::GetFlag(FLAGS_max_attention_map_bytes)));
  options.service.max_concurrent_debug_attention =
      std::max(1, absl::GetFlag(FLAGS_max_concurrent_debug_attention));
  options.service.max_tokenize_bytes = static_cast<size_t>(
      std::max<int64_t>(0, absl::GetFlag(FLAGS_max_tokenize_bytes)));
  options.service.debug_attention = debug_attention != DebugAttentionMode::kOff;

  absl::StatusOr<std::unique_ptr<TextgenServer>> server = TextgenServer::Start(
      options, std::move(decoder), std::move(attention_decoder),
      std::move(model->tokenizer));
  if (!server.ok()) {
    spdlog::error("{}", server.status().ToString());
    return 1;
  }
  // Start-up cost, as bench/README reports it: the time to serving and the
  // resident size then (weights plus whatever the server holds).
  spdlog::info("start-up {:.2f} s; resident {:.1f} MiB",
               absl::ToDoubleSeconds(absl::Now() - start),
               ResidentMemoryBytes() / 1048576.0);

  int signal = 0;
  while (sigwait(&signals, &signal) == 0 && signal == SIGHUP) {
    if (absl::Status s = (*server)->ReloadTokens(); s.ok()) {
      spdlog::info("SIGHUP: tokens reloaded");
    } else {
      spdlog::error("SIGHUP: tokens not reloaded, the old ones stay: {}",
                    s.ToString());
    }
  }
  spdlog::info("signal {}: draining", signal);
  (*server)->Drain(absl::Seconds(absl::GetFlag(FLAGS_drain_seconds)));
  return 0;
}

}  // namespace
}  // namespace textgen

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Serves a model over gRPC: textgen_server --model DIR --port N");
  absl::ParseCommandLine(argc, argv);
  return textgen::Run();
}
