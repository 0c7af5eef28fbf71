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

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/resident_memory.h"
#include "bench/soak_http.h"
#include "nlohmann/json.hpp"
#include "textgen/v1/textgen.grpc.pb.h"

namespace textgen {
namespace {

namespace pb = ::textgen::v1;
using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;
using soak::CompletionProblem;
using soak::ErrorBodyProblem;
using soak::Field;
using soak::HttpInvalid;
using soak::HttpModelName;
using soak::kPassage;
using soak::MakeHttpInvalid;
using soak::SseReader;

// The gRPC kinds keep their names from before the HTTP share (the report's
// keys, e.g. "valid:OK", stay comparable across runs).
enum class Kind {
  kValid,
  kCancelled,
  kInvalid,
  kHttpPlain,
  kHttpSse,
  kHttpAbortedSse,
  kHttpInvalid,
};
constexpr int kNumKinds = 7;

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kValid:
      return "valid";
    case Kind::kCancelled:
      return "cancelled";
    case Kind::kInvalid:
      return "invalid";
    case Kind::kHttpPlain:
      return "http_plain";
    case Kind::kHttpSse:
      return "http_sse";
    case Kind::kHttpAbortedSse:
      return "http_aborted_sse";
    case Kind::kHttpInvalid:
      return "http_invalid";
  }
  return "?";
}

// Outcome counts, keyed "<kind>:<status>" (a gRPC code name; an HTTP status,
// "aborted" or a transport error), plus the unexpected ones' first messages.
class Tally {
 public:
  void Add(Kind kind, const std::string& status, bool expected,
           const std::string& detail) {
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_[absl::StrCat(KindName(kind), ":", status)];
    ++sent_[static_cast<int>(kind)];
    ++total_;
    if (!expected) {
      ++unexpected_;
      if (examples_.size() < 10) {
        examples_.push_back(
            absl::StrCat(KindName(kind), " -> ", status, ": ", detail));
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
  int64_t sent(Kind kind) const {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_[static_cast<int>(kind)];
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
  std::array<int64_t, kNumKinds> sent_{};
  int64_t total_ = 0;
  int64_t unexpected_ = 0;
  std::vector<std::string> examples_;
};

struct ModelLimits {
  int vocab_size = 0;
  int context_length = 0;
  int max_new_tokens_limit = 0;
  std::string http_model;  // The id GET /v1/models gives (HTTP share only).
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

// A stream: one channel (its own connection) sending requests back to back,
// and with an HTTP target a share of them over HTTP instead.
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
    if (!options.http_target.empty()) {
      // A connection per request (httplib's default, no keep-alive): the
      // server closes a connection idle for a second, which a gRPC request in
      // between can outlast, and a POST sent as it closes would fail in a way
      // no client retries: an unexpected status that is the soak's own.
      http_ =
          std::make_unique<httplib::Client>("http://" + options.http_target);
      http_->set_connection_timeout(30);
      http_->set_write_timeout(30);
      // As the gRPC deadline: a non-streamed completion is written only when
      // it ends, after any time in the queue.
      http_->set_read_timeout(300);
    }
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
  int MaxPromptTokens() const {
    return std::max(
        1, std::min(options_.max_prompt_tokens,
                    limits_.context_length - options_.max_new_tokens - 1));
  }

  void OneRequest() {
    // Drawn only with an HTTP target, so that a gRPC-only soak sends the
    // same requests for the same seed as before there was an HTTP share.
    const bool http = http_ != nullptr && Uniform() < options_.http_fraction;
    const double u = Uniform();
    Kind kind;
    if (u < options_.invalid_fraction) {
      kind = http ? Kind::kHttpInvalid : Kind::kInvalid;
    } else if (u < options_.invalid_fraction + options_.cancel_fraction) {
      kind = http ? Kind::kHttpAbortedSse : Kind::kCancelled;
    } else if (!http) {
      kind = Kind::kValid;
    } else {
      kind = Uniform() < 0.5 ? Kind::kHttpPlain : Kind::kHttpSse;
    }
    if (http) {
      HttpRequest(kind);
    } else {
      GrpcRequest(kind);
    }
  }

  void GrpcRequest(Kind kind) {
    pb::GenerateRequest request;
    const int prompt_tokens = Between(1, MaxPromptTokens());
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
      default:  // HttpRequest's.
        break;
    }
    tally_.Add(kind, Tally::CodeName(status.error_code()), expected,
               absl::StrCat(status.error_message(), " (", tokens, " tokens)"));
  }

  // POST /v1/completions as an OpenAI client sends it.
  void HttpRequest(Kind kind) {
    const int max_new = Between(1, options_.max_new_tokens);
    Json body = {{"model", limits_.http_model}, {"max_tokens", max_new}};
    const int prompt_tokens = Between(1, MaxPromptTokens());
    if (Uniform() < 0.5) {  // Text, through the server's tokenizer.
      const int length =
          std::min(prompt_tokens, static_cast<int>(kPassage.size()));
      const int start = Between(0, static_cast<int>(kPassage.size()) - length);
      body["prompt"] = std::string(kPassage.substr(start, length));
    } else {
      Json ids = Json::array();
      for (int i = 0; i < prompt_tokens; ++i) {
        ids.push_back(Between(0, limits_.vocab_size - 1));
      }
      body["prompt"] = std::move(ids);
    }
    // Random sampling settings, all valid, as the gRPC share's. OpenAI's
    // temperature defaults to 1, so greedy (a quarter) is asked for.
    body["temperature"] = Uniform() < 0.25 ? 0.0 : 0.1 + Uniform();
    if (Uniform() < 0.5) body["top_k"] = Between(1, 50);
    if (Uniform() < 0.5) body["top_p"] = 0.5 + 0.5 * Uniform();
    if (Uniform() < 0.3) body["repetition_penalty"] = 1.0 + 0.5 * Uniform();
    if (Uniform() < 0.5) body["seed"] = Between(0, 1 << 30);
    if (Uniform() < 0.2) body["logprobs"] = Between(1, 5);
    const bool stream = kind == Kind::kHttpSse ||
                        kind == Kind::kHttpAbortedSse ||
                        (kind == Kind::kHttpInvalid && Uniform() < 0.5);
    if (stream) {
      body["stream"] = true;
      if (Uniform() < 0.3) body["stream_options"] = {{"include_usage", true}};
    } else if (Uniform() < 0.1) {
      // Not when streamed: the echoed prompt's chunks would read as tokens.
      body["echo"] = true;
    }
    int want_status = 200;
    std::string text;
    if (kind == Kind::kHttpInvalid) {
      HttpInvalid invalid =
          MakeHttpInvalid(Between(0, 6), limits_.vocab_size,
                          limits_.max_new_tokens_limit, std::move(body));
      text = std::move(invalid.body);
      want_status = invalid.status;
    } else {
      text = body.dump();
    }
    const int abort_after = kind == Kind::kHttpAbortedSse ? Between(1, 2) : 0;

    httplib::Request request;
    request.method = "POST";
    request.path = "/v1/completions";
    request.set_header("Content-Type", "application/json");
    request.body = std::move(text);
    SseReader sse;
    const bool read_events = stream && kind != Kind::kHttpInvalid;
    if (read_events) {
      request.content_receiver = [&sse, abort_after](
                                     const char* data, size_t size,
                                     uint64_t /*offset*/, uint64_t /*total*/) {
        sse.Feed(absl::string_view(data, size));
        // false: httplib stops reading and closes the connection, as a
        // closed browser tab or a killed client does.
        return abort_after == 0 || sse.done() || sse.events() < abort_after;
      };
    }
    httplib::Response response;
    httplib::Error error = httplib::Error::Success;
    const bool completed = http_->send(request, response, error);
    const bool aborted = kind == Kind::kHttpAbortedSse && !completed &&
                         error == httplib::Error::Canceled;

    std::string status = aborted     ? "aborted"
                         : completed ? absl::StrCat(response.status)
                                     : httplib::to_string(error);
    std::string problem;
    if (!completed && !aborted) {
      problem = "no response";
    } else if (completed && response.status != want_status) {
      problem = absl::StrCat("HTTP status ", response.status, ", expected ",
                             want_status);
    } else if (kind == Kind::kHttpPlain) {
      problem = CompletionProblem(response.body, max_new);
    } else if (kind == Kind::kHttpInvalid) {
      problem = ErrorBodyProblem(response.body);
    } else if (completed &&
               !absl::StartsWith(response.get_header_value("Content-Type"),
                                 "text/event-stream")) {
      problem = "not text/event-stream";
    } else {
      // Aborted: the events read until then must have been right.
      problem = sse.Problem(/*complete=*/completed, max_new);
    }
    const std::string& shown = read_events ? sse.head() : response.body;
    tally_.Add(kind, status, problem.empty(),
               absl::StrCat(problem, " (", max_new,
                            " max_tokens; body: ", shown.substr(0, 200), ")"));
  }

  const SoakOptions& options_;
  const ModelLimits& limits_;
  std::mt19937_64 rng_;
  Tally& tally_;
  std::unique_ptr<pb::TextGeneration::Stub> stub_;
  std::unique_ptr<httplib::Client> http_;  // With an HTTP target only.
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

// The server's Generate calls by final status, gRPC and HTTP alike
// (textgen_requests_total{code="..."} in a Prometheus text page).
std::map<std::string, double> RequestsByCode(const std::string& page) {
  constexpr absl::string_view kPrefix = "textgen_requests_total{code=\"";
  std::map<std::string, double> counts;
  for (absl::string_view line : absl::StrSplit(page, '\n')) {
    if (!absl::ConsumePrefix(&line, kPrefix)) continue;
    const size_t quote = line.find('"');
    const size_t space = line.rfind(' ');
    double value = 0;
    if (quote == absl::string_view::npos || space == absl::string_view::npos ||
        !absl::SimpleAtod(line.substr(space + 1), &value)) {
      continue;
    }
    counts[std::string(line.substr(0, quote))] += value;
  }
  return counts;
}

}  // namespace

int RunSoak(const SoakOptions& o) {
  const double http_fraction = o.http_target.empty() ? 0 : o.http_fraction;
  std::printf(
      "soak: target=%s streams=%d seconds=%.0f cancel=%.2f invalid=%.2f\n",
      o.target.c_str(), o.streams, o.seconds, o.cancel_fraction,
      o.invalid_fraction);
  if (!o.http_target.empty()) {
    std::printf("soak: http_target=%s http=%.2f of the requests\n",
                o.http_target.c_str(), http_fraction);
  }
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
  if (!o.http_target.empty()) {
    limits.http_model = HttpModelName(o.http_target);
    if (limits.http_model.empty()) {
      std::fprintf(stderr, "soak: no model from http://%s/v1/models\n",
                   o.http_target.c_str());
      return 1;
    }
  }

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
  // A kind that had a share but was never sent is a soak that did not test
  // it (an HTTP target nobody reached, fractions that left no room). Only
  // when its share of the requests made was at least 20: then a kind never
  // drawn by chance is less likely than e^-20.
  {
    const double rest = 1 - o.cancel_fraction - o.invalid_fraction;
    const std::array<std::pair<Kind, double>, kNumKinds> shares = {{
        {Kind::kValid, (1 - http_fraction) * rest},
        {Kind::kCancelled, (1 - http_fraction) * o.cancel_fraction},
        {Kind::kInvalid, (1 - http_fraction) * o.invalid_fraction},
        {Kind::kHttpPlain, http_fraction * rest / 2},
        {Kind::kHttpSse, http_fraction * rest / 2},
        {Kind::kHttpAbortedSse, http_fraction * o.cancel_fraction},
        {Kind::kHttpInvalid, http_fraction * o.invalid_fraction},
    }};
    int64_t total = 0;
    for (const auto& [kind, share] : shares) total += tally.sent(kind);
    for (const auto& [kind, share] : shares) {
      if (share * total >= 20 && tally.sent(kind) == 0) {
        ok = false;
        std::printf("soak: FAIL no %s request was sent\n", KindName(kind));
      }
    }
  }
  if (!o.metrics_target.empty()) {
    // Every stream has finished (or been cancelled) on the client; the server
    // frees a cancelled request's slot at its next step: allow it a moment.
    double in_use = -1, queue = -1;
    std::string last_page;
    for (int attempt = 0; attempt < 50; ++attempt) {
      httplib::Client http("http://" + o.metrics_target);
      http.set_connection_timeout(5);
      auto page = http.Get("/metrics");
      if (page && page->status == 200) {
        last_page = page->body;
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
    // What the server says it ended its calls with: only what the soak
    // sends for (an abandoned HTTP stream is CANCELLED there, as a cancelled
    // gRPC call; an unknown model NOT_FOUND). Anything else is an error on
    // the server's side, even one no client saw (a stream already closed).
    std::string codes;
    std::vector<std::string> bad;
    for (const auto& [code, n] : RequestsByCode(last_page)) {
      absl::StrAppend(&codes, " ", code, "=", static_cast<int64_t>(n));
      if (n > 0 && code != "OK" && code != "CANCELLED" &&
          code != "INVALID_ARGUMENT" && code != "NOT_FOUND") {
        bad.push_back(code);
      }
    }
    std::printf("soak: server requests_total by code:%s\n", codes.c_str());
    for (const std::string& code : bad) {
      ok = false;
      std::printf("soak: FAIL the server ended calls with %s\n", code.c_str());
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
