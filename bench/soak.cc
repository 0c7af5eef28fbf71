#include "bench/soak.h"

#include <grpcpp/grpcpp.h>
#include <httplib.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/resident_memory.h"
#include "textgen/v1/textgen.grpc.pb.h"

namespace textgen {
namespace {

namespace pb = ::textgen::v1;
using Clock = std::chrono::steady_clock;

enum class Kind { kValid, kCancelled, kInvalid };

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kValid:
      return "valid";
    case Kind::kCancelled:
      return "cancelled";
    case Kind::kInvalid:
      return "invalid";
  }
  return "?";
}

// Outcome counts, keyed "<kind> <status code name>", plus the unexpected ones'
// first messages.
class Tally {
 public:
  void Add(Kind kind, grpc::StatusCode code, bool expected,
           const std::string& detail) {
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_[absl::StrCat(KindName(kind), ":", CodeName(code))];
    ++total_;
    if (!expected) {
      ++unexpected_;
      if (examples_.size() < 10) {
        examples_.push_back(
            absl::StrCat(KindName(kind), " -> ", CodeName(code), ": ", detail));
      }
    }
  }
  std::string Summary() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out =
        absl::StrCat("requests=", total_, " unexpected=", unexpected_);
    for (const auto& [key, n] : counts_)
      absl::StrAppend(&out, " ", key, "=", n);
    return out;
  }
  int64_t unexpected() const {
    std::lock_guard<std::mutex> lock(mu_);
    return unexpected_;
  }
  std::vector<std::string> examples() const {
    std::lock_guard<std::mutex> lock(mu_);
    return examples_;
  }

  static std::string CodeName(grpc::StatusCode code) {
    static const std::array<const char*, 17> kNames = {"OK",
                                                       "CANCELLED",
                                                       "UNKNOWN",
                                                       "INVALID_ARGUMENT",
                                                       "DEADLINE_EXCEEDED",
                                                       "NOT_FOUND",
                                                       "ALREADY_EXISTS",
                                                       "PERMISSION_DENIED",
                                                       "RESOURCE_EXHAUSTED",
                                                       "FAILED_PRECONDITION",
                                                       "ABORTED",
                                                       "OUT_OF_RANGE",
                                                       "UNIMPLEMENTED",
                                                       "INTERNAL",
                                                       "UNAVAILABLE",
                                                       "DATA_LOSS",
                                                       "UNAUTHENTICATED"};
    const int i = static_cast<int>(code);
    return i >= 0 && i < static_cast<int>(kNames.size()) ? kNames[i] : "?";
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, int64_t> counts_;
  int64_t total_ = 0;
  int64_t unexpected_ = 0;
  std::vector<std::string> examples_;
};

struct ModelLimits {
  int vocab_size = 0;
  int context_length = 0;
  int max_new_tokens_limit = 0;
};

// One way to make a request invalid; each must get INVALID_ARGUMENT.
void MakeInvalid(int which, const ModelLimits& limits, pb::GenerateRequest& r) {
  switch (which % 7) {
    case 0:
      r.mutable_prompt()->mutable_token_ids()->clear_ids();
      break;
    case 1:
      r.mutable_prompt()->mutable_token_ids()->add_ids(limits.vocab_size);
      break;
    case 2:
      r.mutable_prompt()->mutable_token_ids()->set_ids(0, -1);
      break;
    case 3:
      r.mutable_sampling()->set_temperature(-1);
      break;
    case 4:
      r.mutable_sampling()->set_top_p(1.5f);
      break;
    case 5:
      r.set_max_new_tokens(limits.max_new_tokens_limit + 1);
      break;
    case 6:
      for (int i = 0; i < limits.context_length; ++i) {
        r.mutable_prompt()->mutable_token_ids()->add_ids(0);
      }
      break;
  }
}

// A stream: one channel (its own connection) sending requests back to back.
class SoakStream {
 public:
  SoakStream(const SoakOptions& options, const ModelLimits& limits, int index,
             Tally& tally)
      : options_(options),
        limits_(limits),
        rng_(options.seed * 7919 + index),
        tally_(tally) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("textgen.soak.stream", index);
    stub_ = pb::TextGeneration::NewStub(grpc::CreateCustomChannel(
        options.target, grpc::InsecureChannelCredentials(), args));
  }

  void RunUntil(Clock::time_point end) {
    while (Clock::now() < end) OneRequest();
  }

 private:
  double Uniform() {
    return std::uniform_real_distribution<double>(0, 1)(rng_);
  }
  int Between(int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng_);
  }

  void OneRequest() {
    const double u = Uniform();
    const Kind kind = u < options_.invalid_fraction ? Kind::kInvalid
                      : u < options_.invalid_fraction + options_.cancel_fraction
                          ? Kind::kCancelled
                          : Kind::kValid;
    const int max_prompt = std::max(
        1, std::min(options_.max_prompt_tokens,
                    limits_.context_length - options_.max_new_tokens - 1));
    pb::GenerateRequest request;
    const int prompt_tokens = Between(1, max_prompt);
    for (int i = 0; i < prompt_tokens; ++i) {
      request.mutable_prompt()->mutable_token_ids()->add_ids(
          Between(0, limits_.vocab_size - 1));
    }
    const int max_new = Between(1, options_.max_new_tokens);
    request.set_max_new_tokens(max_new);
    // Random sampling settings, all valid: greedy a quarter of the time.
    pb::SamplingParams& s = *request.mutable_sampling();
    if (Uniform() >= 0.25)
      s.set_temperature(static_cast<float>(0.1 + Uniform()));
    if (Uniform() < 0.5) s.set_top_k(Between(1, 50));
    if (Uniform() < 0.5) s.set_top_p(static_cast<float>(0.5 + 0.5 * Uniform()));
    if (Uniform() < 0.3) {
      s.set_repetition_penalty(static_cast<float>(1.0 + 0.5 * Uniform()));
    }
    if (Uniform() < 0.5) s.set_seed(rng_());
    if (Uniform() < 0.2) request.set_top_logprobs(Between(1, 5));
    if (Uniform() < 0.1) request.set_echo_prompt(true);
    if (kind == Kind::kInvalid) MakeInvalid(Between(0, 6), limits_, request);
    const int cancel_after =
        kind == Kind::kCancelled ? Between(0, max_new) : -1;

    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(300)));
    std::unique_ptr<grpc::ClientReader<pb::GenerateResponse>> reader =
        stub_->Generate(&ctx, request);
    pb::GenerateResponse response;
    int tokens = 0;
    bool cancelled = false;
    if (cancel_after == 0) {
      ctx.TryCancel();
      cancelled = true;
    }
    while (reader->Read(&response)) {
      if (response.has_token() && !response.token().is_prompt()) ++tokens;
      if (!cancelled && cancel_after > 0 && tokens >= cancel_after) {
        ctx.TryCancel();
        cancelled = true;
      }
    }
    const grpc::Status status = reader->Finish();
    bool expected = false;
    switch (kind) {
      case Kind::kValid:
        expected = status.ok() && tokens >= 1 && tokens <= max_new;
        break;
      case Kind::kCancelled:
        // The last token may race the cancellation: OK is fine then.
        expected = status.error_code() == grpc::StatusCode::CANCELLED ||
                   (status.ok() && tokens <= max_new);
        break;
      case Kind::kInvalid:
        expected = status.error_code() == grpc::StatusCode::INVALID_ARGUMENT;
        break;
    }
    tally_.Add(kind, status.error_code(), expected,
               absl::StrCat(status.error_message(), " (", tokens, " tokens)"));
  }

  const SoakOptions& options_;
  const ModelLimits& limits_;
  std::mt19937_64 rng_;
  Tally& tally_;
  std::unique_ptr<pb::TextGeneration::Stub> stub_;
};

// VmRSS of `pid` in MiB; 0 if unreadable.
double ResidentMiB(int pid) { return ResidentMemoryBytes(pid) / 1048576.0; }

// The value of an unlabelled gauge in a Prometheus text page, or -1.
double Gauge(const std::string& page, const std::string& name) {
  for (absl::string_view line : absl::StrSplit(page, '\n')) {
    std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
    double value = 0;
    if (parts.size() == 2 && parts[0] == name &&
        absl::SimpleAtod(parts[1], &value)) {
      return value;
    }
  }
  return -1;
}

}  // namespace

int RunSoak(const SoakOptions& o) {
  std::printf(
      "soak: target=%s streams=%d seconds=%.0f cancel=%.2f invalid=%.2f\n",
      o.target.c_str(), o.streams, o.seconds, o.cancel_fraction,
      o.invalid_fraction);
  ModelLimits limits;
  {
    auto stub = pb::TextGeneration::NewStub(
        grpc::CreateChannel(o.target, grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    ctx.set_wait_for_ready(true);
    pb::ModelInfo info;
    grpc::Status s = stub->GetModelInfo(&ctx, pb::GetModelInfoRequest(), &info);
    if (!s.ok()) {
      std::fprintf(stderr, "soak: GetModelInfo: %s\n",
                   s.error_message().c_str());
      return 1;
    }
    limits.vocab_size = info.vocab_size();
    limits.context_length = info.context_length();
    limits.max_new_tokens_limit = info.limits().max_new_tokens();
  }
  if (limits.max_new_tokens_limit <= 0) limits.max_new_tokens_limit = 1024;

  Tally tally;
  std::vector<std::unique_ptr<SoakStream>> streams;
  for (int i = 0; i < o.streams; ++i) {
    streams.push_back(std::make_unique<SoakStream>(o, limits, i, tally));
  }
  const Clock::time_point start = Clock::now();
  const Clock::time_point end =
      start + std::chrono::milliseconds(static_cast<int64_t>(o.seconds * 1000));
  std::vector<std::thread> workers;
  for (auto& stream : streams) {
    workers.emplace_back([&stream, end] { stream->RunUntil(end); });
  }

  // Progress and resident memory, from this thread.
  double rss_after_warmup = -1;
  Clock::time_point next_report =
      start +
      std::chrono::milliseconds(static_cast<int64_t>(o.report_seconds * 1000));
  const Clock::time_point warmup_end =
      start +
      std::chrono::milliseconds(static_cast<int64_t>(o.warmup_seconds * 1000));
  while (Clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const Clock::time_point now = Clock::now();
    if (rss_after_warmup < 0 && now >= warmup_end && o.server_pid > 0) {
      rss_after_warmup = ResidentMiB(o.server_pid);
      std::printf("soak: t=%.0fs warm-up over: server rss_mib=%.1f\n",
                  std::chrono::duration<double>(now - start).count(),
                  rss_after_warmup);
    }
    if (now >= next_report) {
      std::printf("soak: t=%.0fs rss_mib=%.1f %s\n",
                  std::chrono::duration<double>(now - start).count(),
                  o.server_pid > 0 ? ResidentMiB(o.server_pid) : 0.0,
                  tally.Summary().c_str());
      std::fflush(stdout);
      next_report += std::chrono::milliseconds(
          static_cast<int64_t>(o.report_seconds * 1000));
    }
  }
  for (std::thread& w : workers) w.join();

  bool ok = true;
  std::printf("soak: done after %.0fs: %s\n",
              std::chrono::duration<double>(Clock::now() - start).count(),
              tally.Summary().c_str());
  if (tally.unexpected() > 0) {
    ok = false;
    for (const std::string& e : tally.examples()) {
      std::printf("soak: FAIL unexpected outcome: %s\n", e.c_str());
    }
  }
  if (!o.metrics_target.empty()) {
    // Every stream has finished (or been cancelled) on the client; the server
    // frees a cancelled request's slot at its next step: allow it a moment.
    double in_use = -1, queue = -1;
    for (int attempt = 0; attempt < 50; ++attempt) {
      httplib::Client http("http://" + o.metrics_target);
      http.set_connection_timeout(5);
      auto page = http.Get("/metrics");
      if (page && page->status == 200) {
        in_use = Gauge(page->body, "textgen_kv_slots_in_use");
        queue = Gauge(page->body, "textgen_queue_depth");
        if (in_use == 0 && queue == 0) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::printf("soak: at the end kv_slots_in_use=%.0f queue_depth=%.0f\n",
                in_use, queue);
    if (in_use != 0 || queue != 0) {
      ok = false;
      std::printf("soak: FAIL slots or queue not free at the end\n");
    }
  }
  if (o.server_pid > 0) {
    const double rss_end = ResidentMiB(o.server_pid);
    std::printf(
        "soak: server rss_mib after warm-up=%.1f at end=%.1f (allowed "
        "growth %.0f%%)\n",
        rss_after_warmup, rss_end, 100 * o.rss_growth);
    if (rss_after_warmup <= 0 ||
        rss_end > rss_after_warmup * (1 + o.rss_growth)) {
      ok = false;
      std::printf("soak: FAIL resident memory grew past the allowance\n");
    }
  }
  std::printf("soak: %s\n", ok ? "PASS" : "FAIL");
  std::fflush(stdout);
  return ok ? 0 : 1;
}

}  // namespace textgen
