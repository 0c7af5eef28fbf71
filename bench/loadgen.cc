// The load generator: N concurrent streams, each sending --requests Generate
// requests one after another with a fixed prompt of --prompt_tokens token ids
// and a fixed output of --max_new_tokens tokens (greedy; the length limit
// ends every request, since the ids-only request shape never stops early),
// then one line of results:
//
//   loadgen commit=… date=… mode=grpc model=… threads=1 streams=16 …
//       ttft_p50_ms=… ttft_p99_ms=… tpot_p50_ms=… tpot_p99_ms=…
//       tokens_per_s=… rejections=0 errors=0 rss_mib=… rss_budget_mib=…
//
// Two modes with the same request shape:
//   --target=host:port   over gRPC to a running textgen_server. One channel
//                        (one HTTP/2 connection) per stream, so no stream's
//                        flow-control window holds up another's.
//   --in_process         the same engine (engine/engine.h, textgen_engine)
//                        driven directly: no network, no protobuf.
// Their tokens/s ratio is the cost of the server around the engine.
//
// Request shapes: by default every request sends the same --prompt_tokens
// prompt. --shared_prefix_tokens=N --unique_tokens=M: N tokens shared by every
// request, then M of its own (a system prompt; what the prefix cache serves:
// compare --prefix_cache=true/false in process, or the server's flag).
// --mixed_lengths: each request's prompt and output lengths drawn from 1 ..
// the maxima (with a shared prefix, a prefix of the whole prompt).
//
// Measured at the client: time to first token (TTFT) from sending a request to
// receiving its first generated token; time per output token (TPOT) of a
// request = (last token - first token) / (tokens - 1); aggregate tokens/s =
// generated tokens of every stream / wall time of the timed phase. One
// warm-up request runs first and is not counted. Rejections are requests the
// server refused with RESOURCE_EXHAUSTED (queue full); errors are anything
// else that went wrong, including an output shorter than asked. Exit status 1
// if there was any error. Timings are reported, never asserted.
//
// --soak_seconds=N switches to the soak mode (bench/soak.h): --streams
// streams against --target for N seconds with random prompts (up to
// --prompt_tokens), lengths (up to --max_new_tokens) and sampling settings,
// a share cancelled and a share invalid; with --http_target, a share
// (--soak_http_fraction) over the HTTP API instead (plain, streamed, streams
// abandoned, invalid); every outcome checked, and at the end the server's
// slots, queue and final statuses (--metrics_target) and resident memory
// (--server_pid).
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/resident_memory.h"
#include "bench/soak.h"
#include "engine/engine.h"
#include "model/decoder.h"
#include "model/formats/load_flags.h"
#include "model/formats/memory_budget.h"
#include "model/formats/model_loader.h"
#include "model/kernels/kernels.h"
#include "model/weights.h"
#include "textgen/v1/textgen.grpc.pb.h"

ABSL_FLAG(std::string, target, "",
          "host:port of a textgen_server; empty with --in_process");
ABSL_FLAG(bool, in_process, false,
          "Drive the engine in this process (needs --model) instead of a "
          "server");
ABSL_FLAG(std::string, model, "",
          "--in_process: the checkpoint to load. With --target: the name "
          "printed (default: the server's GetModelInfo name)");
ABSL_FLAG(int, streams, 1, "Concurrent streams (1 … 1024)");
ABSL_FLAG(int, requests, 2, "Requests per stream, one after another");
ABSL_FLAG(int, prompt_tokens, 64, "Prompt length in token ids");
ABSL_FLAG(int, max_new_tokens, 128, "Tokens generated per request");
ABSL_FLAG(int, shared_prefix_tokens, 0,
          "Shared-prefix mode: every prompt is these many tokens shared by "
          "all requests (a system prompt) followed by --unique_tokens of its "
          "own; 0 = the fixed --prompt_tokens prompt");
ABSL_FLAG(int, unique_tokens, 20,
          "Shared-prefix mode: each request's own tokens after the prefix");
ABSL_FLAG(bool, mixed_lengths, false,
          "Mixed lengths: request i's prompt and output lengths drawn "
          "(deterministically) from 1 .. --prompt_tokens and 1 .. "
          "--max_new_tokens");
ABSL_FLAG(int, kv_block_tokens, 16, "--in_process: positions per KV block");
ABSL_FLAG(int, kv_cache_tokens, 0,
          "--in_process: positions of the KV-cache pool (0 = num_slots x "
          "context)");
ABSL_FLAG(bool, prefix_cache, true, "--in_process: the engine's prefix cache");
ABSL_FLAG(int, threads, 1,
          "--in_process: the decoder's threads; with --target: the server's "
          "--threads, printed only");
ABSL_FLAG(
    int, num_slots, 64,
    "--in_process: the engine's KV-cache slots (server: its --num_slots)");
ABSL_FLAG(int, max_queue, 64, "--in_process: the engine's admission queue");
ABSL_FLAG(int, server_pid, 0,
          "With --target: read this process's VmRSS (same machine); 0 = none");
ABSL_FLAG(std::string, commit, "",
          "Commit printed; default: git rev-parse in the source tree");
ABSL_FLAG(double, request_timeout_seconds, 600, "Deadline of each request");
ABSL_FLAG(double, soak_seconds, 0,
          "Soak mode (bench/soak.h) for this long against --target; 0 = off");
ABSL_FLAG(double, soak_cancel_fraction, 0.2,
          "Soak: share of requests the client cancels mid-stream");
ABSL_FLAG(double, soak_invalid_fraction, 0.1,
          "Soak: share of requests made invalid (must get INVALID_ARGUMENT)");
ABSL_FLAG(double, soak_warmup_seconds, 30,
          "Soak: resident memory at the end is compared to its value then");
ABSL_FLAG(double, soak_report_seconds, 60, "Soak: a progress line this often");
ABSL_FLAG(double, soak_rss_growth, 0.10,
          "Soak: allowed growth of the server's resident memory after warm-up");
ABSL_FLAG(uint32_t, soak_seed, 1, "Soak: seed of the random requests");
ABSL_FLAG(std::string, metrics_target, "",
          "Soak: host:port of the server's /metrics, checked at the end for "
          "free slots and an empty queue; empty = not checked");
ABSL_FLAG(std::string, http_target, "",
          "Soak: host:port of the server's HTTP API (its --http_port), for "
          "the HTTP share of the requests; empty = gRPC only");
ABSL_FLAG(double, soak_http_fraction, 0.25,
          "Soak, with --http_target: share of requests sent to POST "
          "/v1/completions instead of gRPC, cancelled and invalid in the same "
          "shares as gRPC's, the rest half plain, half streamed (SSE)");

namespace textgen {
namespace {

using Clock = std::chrono::steady_clock;

// What one request did.
struct RequestResult {
  enum Outcome { kOk, kRejected, kError } outcome = kError;
  std::string error;  // kError, kRejected: why.
  int tokens = 0;
  double ttft_s = 0;  // Valid when tokens ≥ 1.
  double tpot_s = 0;  // Valid when tokens ≥ 2.
};

// The model facts the budget and the prompt need.
struct ModelFacts {
  std::string name;
  int vocab_size = 0;
  int context_length = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int d_model = 0;
  int64_t num_parameters = 0;
  int num_slots = 0;
};

// The fixed prompt: deterministic ids spread over the vocabulary.
std::vector<int> PromptIds(int n, int vocab) {
  std::vector<int> ids(n);
  for (int i = 0; i < n; ++i)
    ids[i] = static_cast<int>((7919ll * (i + 1)) % vocab);
  return ids;
}

// A deterministic pseudo-random number for (a, b, c).
uint64_t Mix(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t h = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull) ^
               (c * 0xbf58476d1ce4e5b9ull);
  h ^= h >> 31;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 29);
}

// What request `r` of stream `s` sends: the fixed prompt; or the shared
// prefix and tokens of its own; or, with --mixed_lengths, a length of its own
// (a prefix of the fixed prompt, so different lengths still share a start).
struct RequestShape {
  std::vector<int> prompt;
  int max_new_tokens = 0;
};
RequestShape ShapeOf(int s, int r, int vocab) {
  RequestShape shape;
  const int shared = absl::GetFlag(FLAGS_shared_prefix_tokens);
  shape.max_new_tokens = absl::GetFlag(FLAGS_max_new_tokens);
  if (shared > 0) {
    shape.prompt = PromptIds(shared, vocab);
    for (int i = 0; i < absl::GetFlag(FLAGS_unique_tokens); ++i) {
      shape.prompt.push_back(static_cast<int>(Mix(s, r, i) % vocab));
    }
  } else {
    shape.prompt = PromptIds(absl::GetFlag(FLAGS_prompt_tokens), vocab);
  }
  if (absl::GetFlag(FLAGS_mixed_lengths)) {
    shape.prompt.resize(1 + Mix(s, r, 1u << 20) % shape.prompt.size());
    shape.max_new_tokens =
        1 + static_cast<int>(Mix(s, r, 1u << 21) % shape.max_new_tokens);
  }
  return shape;
}

// One request's token arrival times → its result.
RequestResult Summarize(Clock::time_point sent,
                        const std::vector<Clock::time_point>& arrivals,
                        int expected) {
  RequestResult r;
  r.tokens = static_cast<int>(arrivals.size());
  if (r.tokens >= 1) {
    r.ttft_s = std::chrono::duration<double>(arrivals.front() - sent).count();
  }
  if (r.tokens >= 2) {
    r.tpot_s = std::chrono::duration<double>(arrivals.back() - arrivals.front())
                   .count() /
               (r.tokens - 1);
  }
  if (r.tokens == expected) {
    r.outcome = RequestResult::kOk;
  } else {
    r.error = absl::StrCat("got ", r.tokens, " tokens, expected ", expected);
  }
  return r;
}

// Sends requests of one shape; one instance per stream (a gRPC channel, or the
// shared in-process engine).
class Client {
 public:
  virtual ~Client() = default;
  virtual RequestResult Generate(const std::vector<int>& prompt,
                                 int max_new_tokens) = 0;
};

class GrpcClient : public Client {
 public:
  explicit GrpcClient(const std::string& target, int index) {
    grpc::ChannelArguments args;
    // A connection of its own: channels with their own subchannel pool do
    // not share one.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("textgen.loadgen.stream", index);
    args.SetMaxReceiveMessageSize(64 << 20);
    channel_ = grpc::CreateCustomChannel(
        target, grpc::InsecureChannelCredentials(), args);
    stub_ = textgen::v1::TextGeneration::NewStub(channel_);
  }

  absl::Status Connect(absl::Duration timeout) {
    if (!channel_->WaitForConnected(
            absl::ToChronoTime(absl::Now() + timeout))) {
      return absl::UnavailableError("could not connect");
    }
    return absl::OkStatus();
  }

  absl::StatusOr<ModelFacts> Info() {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    textgen::v1::ModelInfo info;
    grpc::Status s =
        stub_->GetModelInfo(&ctx, textgen::v1::GetModelInfoRequest(), &info);
    if (!s.ok()) {
      return absl::UnavailableError(
          absl::StrCat("GetModelInfo: ", s.error_message()));
    }
    ModelFacts f;
    f.name = info.name();
    f.vocab_size = info.vocab_size();
    f.context_length = info.context_length();
    f.num_layers = info.num_layers();
    f.num_heads = info.num_heads();
    f.num_kv_heads = info.num_kv_heads();
    f.d_model = info.d_model();
    f.num_parameters = info.num_parameters();
    f.num_slots = info.limits().max_concurrent_streams();
    return f;
  }

  RequestResult Generate(const std::vector<int>& prompt,
                         int max_new_tokens) override {
    textgen::v1::GenerateRequest request;
    for (int id : prompt)
      request.mutable_prompt()->mutable_token_ids()->add_ids(id);
    request.set_max_new_tokens(max_new_tokens);
    request.mutable_sampling()->set_temperature(0);
    request.mutable_sampling()->set_seed(1);
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(
        absl::Now() +
        absl::Seconds(absl::GetFlag(FLAGS_request_timeout_seconds))));

    std::vector<Clock::time_point> arrivals;
    arrivals.reserve(max_new_tokens);
    const Clock::time_point sent = Clock::now();
    std::unique_ptr<grpc::ClientReader<textgen::v1::GenerateResponse>> reader =
        stub_->Generate(&ctx, request);
    textgen::v1::GenerateResponse response;
    while (reader->Read(&response)) {
      if (response.has_token() && !response.token().is_prompt()) {
        arrivals.push_back(Clock::now());
      }
    }
    const grpc::Status status = reader->Finish();
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      RequestResult r;
      r.outcome = RequestResult::kRejected;
      r.error = status.error_message();
      return r;
    }
    if (!status.ok()) {
      RequestResult r;
      r.error = absl::StrCat("gRPC status ", status.error_code(), ": ",
                             status.error_message());
      return r;
    }
    return Summarize(sent, arrivals, max_new_tokens);
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<textgen::v1::TextGeneration::Stub> stub_;
};

class InProcessClient : public Client {
 public:
  explicit InProcessClient(Engine* engine) : engine_(engine) {}

  RequestResult Generate(const std::vector<int>& prompt,
                         int max_new_tokens) override {
    GenerationRequest request;
    request.prompt = prompt;
    request.max_new_tokens = max_new_tokens;
    request.sampling.temperature = 0;
    request.seed = 1;
    request.deadline =
        absl::Now() +
        absl::Seconds(absl::GetFlag(FLAGS_request_timeout_seconds));

    std::vector<Clock::time_point> arrivals;
    arrivals.reserve(max_new_tokens);
    const Clock::time_point sent = Clock::now();
    absl::StatusOr<std::shared_ptr<RequestStream>> stream =
        engine_->Submit(std::move(request));
    if (!stream.ok()) {
      RequestResult r;
      r.outcome = absl::IsResourceExhausted(stream.status())
                      ? RequestResult::kRejected
                      : RequestResult::kError;
      r.error = stream.status().ToString();
      return r;
    }
    for (;;) {
      std::optional<StreamEvent> event = (*stream)->WaitNext(absl::Seconds(60));
      if (!event) continue;  // Still generating: a slow machine, not an error.
      if (const auto* token = std::get_if<TokenEvent>(&*event)) {
        if (!token->is_prompt) arrivals.push_back(Clock::now());
        continue;
      }
      const FinishEvent& finish = std::get<FinishEvent>(*event);
      if (!finish.status.ok()) {
        RequestResult r;
        r.error = finish.status.ToString();
        return r;
      }
      return Summarize(sent, arrivals, max_new_tokens);
    }
  }

 private:
  Engine* engine_;
};

// Nearest-rank percentile of `v` (sorted here); 0 for an empty vector.
double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * v.size()));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

std::string GitCommit() {
  const std::string flag = absl::GetFlag(FLAGS_commit);
  if (!flag.empty()) return flag;
  std::string cmd = absl::StrCat("git -C '", TEXTGEN_SOURCE_DIR,
                                 "' rev-parse --short HEAD 2>/dev/null");
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[64];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r'))
    out.pop_back();
  return out.empty() ? "unknown" : out;
}

std::string BaseName(std::string path) {
  while (!path.empty() && path.back() == '/') path.pop_back();
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Weights + every slot's KV cache + 100 MiB, the resident-memory target.
double BudgetMiB(const ModelFacts& f, const std::string& dtype) {
  const double weight_bytes = (dtype == "f32" ? 4.0 : 2.0) * f.num_parameters;
  const int head_dim = f.num_heads > 0 ? f.d_model / f.num_heads : 0;
  const double kv_bytes = 2.0 * f.num_slots * f.num_layers *
                          static_cast<double>(f.context_length) *
                          f.num_kv_heads * head_dim * sizeof(float);
  return (weight_bytes + kv_bytes) / (1 << 20) + 100;
}

int Soak() {
  SoakOptions o;
  o.target = absl::GetFlag(FLAGS_target);
  o.metrics_target = absl::GetFlag(FLAGS_metrics_target);
  o.http_target = absl::GetFlag(FLAGS_http_target);
  o.http_fraction = absl::GetFlag(FLAGS_soak_http_fraction);
  o.server_pid = absl::GetFlag(FLAGS_server_pid);
  o.streams = absl::GetFlag(FLAGS_streams);
  o.seconds = absl::GetFlag(FLAGS_soak_seconds);
  o.warmup_seconds = absl::GetFlag(FLAGS_soak_warmup_seconds);
  o.report_seconds = absl::GetFlag(FLAGS_soak_report_seconds);
  o.cancel_fraction = absl::GetFlag(FLAGS_soak_cancel_fraction);
  o.invalid_fraction = absl::GetFlag(FLAGS_soak_invalid_fraction);
  o.rss_growth = absl::GetFlag(FLAGS_soak_rss_growth);
  o.max_prompt_tokens = absl::GetFlag(FLAGS_prompt_tokens);
  o.max_new_tokens = absl::GetFlag(FLAGS_max_new_tokens);
  o.seed = absl::GetFlag(FLAGS_soak_seed);
  if (o.target.empty() || o.streams < 1 || o.streams > 1024 ||
      o.max_prompt_tokens < 1 || o.max_new_tokens < 1 ||
      o.cancel_fraction < 0 || o.invalid_fraction < 0 ||
      o.cancel_fraction + o.invalid_fraction > 1 || o.http_fraction < 0 ||
      o.http_fraction > 1 || o.report_seconds <= 0 ||
      o.warmup_seconds >= o.seconds) {
    std::fprintf(stderr,
                 "loadgen: --soak_seconds needs --target, 1 <= --streams <= "
                 "1024, fractions that sum to at most 1, and a warm-up "
                 "shorter than the soak\n");
    return 2;
  }
  return RunSoak(o);
}

int Run() {
  if (absl::GetFlag(FLAGS_soak_seconds) > 0) return Soak();
  const bool in_process = absl::GetFlag(FLAGS_in_process);
  const std::string target = absl::GetFlag(FLAGS_target);
  const int streams = absl::GetFlag(FLAGS_streams);
  const int requests = absl::GetFlag(FLAGS_requests);
  const int prompt_tokens = absl::GetFlag(FLAGS_prompt_tokens);
  const int max_new_tokens = absl::GetFlag(FLAGS_max_new_tokens);
  const int threads = absl::GetFlag(FLAGS_threads);
  if (in_process == !target.empty()) {
    std::fprintf(stderr,
                 "loadgen: give exactly one of --target and --in_process\n");
    return 2;
  }
  if (streams < 1 || streams > 1024 || requests < 1 || prompt_tokens < 1 ||
      max_new_tokens < 1 || threads < 1) {
    std::fprintf(stderr,
                 "loadgen: need 1 <= --streams <= 1024, and --requests, "
                 "--prompt_tokens, --max_new_tokens, --threads >= 1\n");
    return 2;
  }

  ModelFacts facts;
  std::unique_ptr<Engine> engine;
  std::vector<std::unique_ptr<Client>> clients;
  if (in_process) {
    const std::string model_path = absl::GetFlag(FLAGS_model);
    if (model_path.empty()) {
      std::fprintf(stderr, "loadgen: --in_process needs --model\n");
      return 2;
    }
    // --cpu_kernels, --weights_dtype and --kv_cache_dtype, as the server
    // takes them (model/formats/load_flags.h).
    const absl::StatusOr<LoadFlags> flags = ParseLoadFlags();
    if (!flags.ok()) {
      std::fprintf(stderr, "loadgen: %s\n",
                   std::string(flags.status().message()).c_str());
      return 2;
    }
    MemoryBudget budget;  // The weights and one slot: a sanity check only.
    budget.kv_dtype = flags->kv_dtype;
    absl::StatusOr<LoadedModel> model =
        LoadModel(model_path, "", flags->load_options(), budget);
    if (!model.ok()) {
      std::fprintf(stderr, "loadgen: %s\n", model.status().ToString().c_str());
      return 1;
    }
    const ModelConfig config = model->checkpoint.config;
    EngineOptions options;
    options.num_slots = absl::GetFlag(FLAGS_num_slots);
    options.max_queue = absl::GetFlag(FLAGS_max_queue);
    options.kv_block_tokens = absl::GetFlag(FLAGS_kv_block_tokens);
    options.kv_cache_tokens = absl::GetFlag(FLAGS_kv_cache_tokens);
    options.prefix_cache = absl::GetFlag(FLAGS_prefix_cache);
    options.kv_dtype = flags->kv_dtype;
    // As textgen_server's flag defaults, so that both modes run alike.
    options.max_new_tokens_limit = std::max(1024, max_new_tokens);
    DecoderOptions decoder_options;
    decoder_options.threads = threads;
    absl::StatusOr<std::unique_ptr<Engine>> created = Engine::Create(
        options,
        std::make_unique<Decoder>(std::move(model->checkpoint),
                                  decoder_options),
        std::shared_ptr<const Tokenizer>(std::move(model->tokenizer)));
    if (!created.ok()) {
      std::fprintf(stderr, "loadgen: %s\n",
                   created.status().ToString().c_str());
      return 1;
    }
    engine = std::move(*created);
    if (absl::Status s = engine->Start(); !s.ok()) {
      std::fprintf(stderr, "loadgen: %s\n", s.ToString().c_str());
      return 1;
    }
    facts.name = BaseName(model_path);
    facts.vocab_size = config.vocab_size;
    facts.context_length = config.context_length;
    facts.num_layers = config.n_layers;
    facts.num_heads = config.n_heads;
    facts.num_kv_heads = config.n_kv_heads;
    facts.d_model = config.d_model;
    facts.num_slots = options.num_slots;
    facts.num_parameters = 0;
    for (int i = 0; i < streams; ++i) {
      clients.push_back(std::make_unique<InProcessClient>(engine.get()));
    }
  } else {
    for (int i = 0; i < streams; ++i) {
      auto client = std::make_unique<GrpcClient>(target, i);
      if (absl::Status s = client->Connect(absl::Seconds(30)); !s.ok()) {
        std::fprintf(stderr, "loadgen: stream %d: %s to %s\n", i,
                     s.ToString().c_str(), target.c_str());
        return 1;
      }
      clients.push_back(std::move(client));
    }
    absl::StatusOr<ModelFacts> info =
        static_cast<GrpcClient*>(clients[0].get())->Info();
    if (!info.ok()) {
      std::fprintf(stderr, "loadgen: %s\n", info.status().ToString().c_str());
      return 1;
    }
    facts = *info;
    if (!absl::GetFlag(FLAGS_model).empty())
      facts.name = absl::GetFlag(FLAGS_model);
    facts.name = BaseName(facts.name);
  }
  const int shared_prefix = absl::GetFlag(FLAGS_shared_prefix_tokens);
  const int unique = absl::GetFlag(FLAGS_unique_tokens);
  const int longest_prompt =
      shared_prefix > 0 ? shared_prefix + unique : prompt_tokens;
  if (shared_prefix < 0 || unique < 1) {
    std::fprintf(stderr,
                 "loadgen: need --shared_prefix_tokens >= 0, --unique_tokens "
                 ">= 1\n");
    return 2;
  }
  if (longest_prompt + max_new_tokens > facts.context_length) {
    std::fprintf(stderr,
                 "loadgen: prompt (%d) + --max_new_tokens = %d exceeds the "
                 "model's context of %d\n",
                 longest_prompt, longest_prompt + max_new_tokens,
                 facts.context_length);
    return 2;
  }

  // Warm-up, not counted: first-use allocations in the engine and decoder
  // (and, in the shared-prefix mode, the prefix's first computation).
  const RequestShape warm_shape = ShapeOf(-1, 0, facts.vocab_size);
  RequestResult warm =
      clients[0]->Generate(warm_shape.prompt, warm_shape.max_new_tokens);
  if (warm.outcome != RequestResult::kOk) {
    std::fprintf(stderr, "loadgen: warm-up request failed: %s\n",
                 warm.error.c_str());
    return 1;
  }

  std::vector<std::vector<RequestResult>> results(streams);
  // In process: the most requests running at once (admitted into KV blocks),
  // sampled every millisecond.
  std::atomic<bool> timed_phase_done{false};
  std::atomic<int> peak_running{0};
  std::thread peak_watcher;
  if (engine) {
    peak_watcher = std::thread([&] {
      while (!timed_phase_done.load()) {
        peak_running.store(
            std::max(peak_running.load(), engine->stats().slots_in_use));
        absl::SleepFor(absl::Milliseconds(1));
      }
    });
  }
  const Clock::time_point start = Clock::now();
  {
    std::vector<std::thread> workers;
    for (int s = 0; s < streams; ++s) {
      workers.emplace_back([&, s] {
        for (int r = 0; r < requests; ++r) {
          const RequestShape shape = ShapeOf(s, r, facts.vocab_size);
          results[s].push_back(
              clients[s]->Generate(shape.prompt, shape.max_new_tokens));
        }
      });
    }
    for (std::thread& w : workers) w.join();
  }
  const double wall_s =
      std::chrono::duration<double>(Clock::now() - start).count();
  timed_phase_done.store(true);
  if (peak_watcher.joinable()) peak_watcher.join();
  // Resident memory of whatever ran the model: this process, or the server
  // named by --server_pid (0 bytes: not known).
  const int model_pid = in_process ? 0 : absl::GetFlag(FLAGS_server_pid);
  const double rss_mib = in_process || model_pid > 0
                             ? ResidentMemoryBytes(model_pid) / 1048576.0
                             : 0;
  std::string cache_facts;
  if (engine) {
    const EngineStats stats = engine->stats();
    cache_facts = absl::StrFormat(
        " peak_running=%d prefix_cache=%d kv_block_tokens=%d kv_blocks=%d "
        "prefix_hit_tokens=%d prefix_lookup_tokens=%d",
        peak_running.load(), engine->options().prefix_cache ? 1 : 0,
        engine->options().kv_block_tokens, stats.kv_blocks_total,
        stats.prefix_cache_hit_tokens, stats.prefix_cache_lookup_tokens);
    engine->Shutdown();
  }

  std::vector<double> ttft, tpot;
  int ok = 0, rejections = 0, errors = 0;
  int64_t tokens = 0;
  std::string first_error;
  for (const auto& stream : results) {
    for (const RequestResult& r : stream) {
      tokens += r.tokens;
      if (r.outcome == RequestResult::kOk) {
        ++ok;
        ttft.push_back(r.ttft_s * 1e3);
        if (r.tokens >= 2) tpot.push_back(r.tpot_s * 1e3);
      } else if (r.outcome == RequestResult::kRejected) {
        ++rejections;
      } else {
        ++errors;
        if (first_error.empty()) first_error = r.error;
      }
    }
  }
  if (!first_error.empty()) {
    std::fprintf(stderr, "loadgen: %d errors; first: %s\n", errors,
                 first_error.c_str());
  }

  std::string line = absl::StrFormat(
      "loadgen commit=%s date=%s mode=%s model=%s threads=%d streams=%d "
      "requests_total=%d prompt_tokens=%d max_new_tokens=%d num_slots=%d ok=%d "
      "rejections=%d errors=%d generated_tokens=%d wall_s=%.3f "
      "tokens_per_s=%.1f ttft_p50_ms=%.2f ttft_p99_ms=%.2f tpot_p50_ms=%.3f "
      "tpot_p99_ms=%.3f",
      GitCommit(),
      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone()),
      in_process ? "in_process" : "grpc", facts.name, threads, streams,
      streams * requests, prompt_tokens, max_new_tokens, facts.num_slots, ok,
      rejections, errors, tokens, wall_s, tokens / wall_s, Percentile(ttft, 50),
      Percentile(ttft, 99), Percentile(tpot, 50), Percentile(tpot, 99));
  if (shared_prefix > 0) {
    absl::StrAppendFormat(&line, " shared_prefix_tokens=%d unique_tokens=%d",
                          shared_prefix, unique);
  }
  if (absl::GetFlag(FLAGS_mixed_lengths)) line += " mixed_lengths=1";
  line += cache_facts;
  if (rss_mib > 0) {
    absl::StrAppendFormat(&line, " rss_mib=%.1f", rss_mib);
    if (facts.num_parameters > 0) {
      absl::StrAppendFormat(
          &line, " rss_budget_mib=%.1f",
          BudgetMiB(facts, absl::GetFlag(FLAGS_weights_dtype)));
    }
  }
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  return errors > 0 ? 1 : 0;
}

}  // namespace
}  // namespace textgen

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "gRPC load generator: textgen_loadgen --target=HOST:PORT --streams=N "
      "[--requests --prompt_tokens --max_new_tokens] | --in_process "
      "--model=DIR");
  absl::ParseCommandLine(argc, argv);
  return textgen::Run();
}
