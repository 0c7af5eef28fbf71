// textgen_server: serves a model over gRPC (textgen.v1.TextGeneration, plus
// grpc.health.v1 and server reflection).
//
//   build/server/textgen_server --model models/shakespeare-char --port 50051
//   build/server/textgen_server --model stories260K.bin --tokenizer tok512.bin
//
// SIGTERM or SIGINT drains: health turns NOT_SERVING, new requests are
// refused, running streams get up to --drain_seconds to finish, then the
// process exits.
#include <signal.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "model/model_loader.h"
#include "model/resident_memory.h"
#include "server/grpc_server.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(std::string, model, "models/shakespeare-char",
          "Checkpoint directory (config.json + model.safetensors + tokenizer) "
          "or a llama2.c .bin file");
ABSL_FLAG(std::string, tokenizer, "",
          "Tokenizer file or directory; default: the one beside the model");
ABSL_FLAG(std::string, host, "0.0.0.0", "Address to listen on");
ABSL_FLAG(int, port, 50051, "Port to listen on; 0 picks a free one");
ABSL_FLAG(int, threads, 1,
          "Threads of the engine's forward pass, the engine thread included "
          "(model/decoder.h); results do not depend on it");
ABSL_FLAG(std::string, weights_dtype, "f32",
          "How weight matrices are held in memory: f32, or bf16 (half the "
          "bytes and memory traffic, f32 arithmetic)");
ABSL_FLAG(int, num_slots, 8, "Sequences generated at once (KV-cache slots)");
ABSL_FLAG(int, max_queue, 64,
          "Requests that may wait for a slot; beyond, RESOURCE_EXHAUSTED");
ABSL_FLAG(int, max_new_tokens_limit, 1024, "Largest max_new_tokens accepted");
ABSL_FLAG(int, default_max_new_tokens, 256, "What max_new_tokens = 0 means");
ABSL_FLAG(int, max_prompt_tokens, 0,
          "Longest prompt in tokens; 0 = the model's context less one");
ABSL_FLAG(int, prefill_chunk_tokens, 256, "Prompt tokens fed per engine step");
ABSL_FLAG(int, max_attention_tokens, 256,
          "Longest prompt DebugAttention accepts");
ABSL_FLAG(bool, debug_attention, true, "Serve DebugAttention");
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
ABSL_FLAG(int, metrics_port, 0,
          "Port for Prometheus metrics over HTTP (GET /metrics); 0 = off");

namespace textgen {
namespace {

int Run() {
  if (absl::GetFlag(FLAGS_threads) < 1) {
    spdlog::error("--threads={}: must be at least 1",
                  absl::GetFlag(FLAGS_threads));
    return 1;
  }
  absl::StatusOr<kernels::WeightType> weight_type =
      ParseWeightType(absl::GetFlag(FLAGS_weights_dtype));
  if (!weight_type.ok()) {
    spdlog::error("--weights_dtype: {}",
                  std::string(weight_type.status().message()));
    return 1;
  }
  LoadOptions load_options;
  load_options.weight_type = *weight_type;
  if (absl::GetFlag(FLAGS_memory_budget_mb) < 0) {
    spdlog::error("--memory_budget_mb={}: must be 0 or positive",
                  absl::GetFlag(FLAGS_memory_budget_mb));
    return 1;
  }
  load_options.memory_budget_bytes =
      static_cast<uint64_t>(absl::GetFlag(FLAGS_memory_budget_mb)) << 20;
  // The engine's slots, and DebugAttention's one.
  load_options.kv_cache_slots = absl::GetFlag(FLAGS_num_slots) +
                                (absl::GetFlag(FLAGS_debug_attention) ? 1 : 0);

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
  std::unique_ptr<Decoder> attention_decoder;
  if (absl::GetFlag(FLAGS_debug_attention)) {
    // DebugAttention's Decoder shares the engine's weights
    // (server/debug_attention.h): only its scratch memory is its own. One
    // thread: it runs on gRPC's.
    attention_decoder =
        std::make_unique<Decoder>(config, decoder->shared_weights());
  }
  spdlog::info(
      "model {}: {}; weights {} ({:.1f} MiB); {} thread(s); tokenizer {}",
      model_path, DescribeConfig(config), kernels::WeightTypeName(*weight_type),
      decoder->weights().MemoryBytes() / 1048576.0, decoder->threads(),
      model->tokenizer ? model->tokenizer->Describe() : "none");

  GrpcServerOptions options;
  options.address =
      absl::StrCat(absl::GetFlag(FLAGS_host), ":", absl::GetFlag(FLAGS_port));
  options.engine.num_slots = absl::GetFlag(FLAGS_num_slots);
  options.engine.max_queue = absl::GetFlag(FLAGS_max_queue);
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
  options.service.model_name = model_path;
  options.engine.max_prompt_tokens = absl::GetFlag(FLAGS_max_prompt_tokens);
  options.service.max_attention_tokens =
      absl::GetFlag(FLAGS_max_attention_tokens);
  options.service.max_attention_map_bytes = static_cast<size_t>(
      std::max<int64_t>(0, absl::GetFlag(FLAGS_max_attention_map_bytes)));
  options.service.max_concurrent_debug_attention =
      std::max(1, absl::GetFlag(FLAGS_max_concurrent_debug_attention));
  options.service.max_tokenize_bytes = static_cast<size_t>(
      std::max<int64_t>(0, absl::GetFlag(FLAGS_max_tokenize_bytes)));
  options.service.debug_attention = absl::GetFlag(FLAGS_debug_attention);

  absl::StatusOr<std::unique_ptr<GrpcServer>> server = GrpcServer::Start(
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
  sigwait(&signals, &signal);
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
