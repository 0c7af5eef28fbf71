#include "server/metrics.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "model/kernel_dispatch.h"

namespace textgen {
namespace {

// Names as gRPC spells them ("OK", "RESOURCE_EXHAUSTED"), which is how
// dashboards already group gRPC codes.
std::string CodeName(absl::StatusCode code) {
  std::string name = absl::StatusCodeToString(code);
  for (char& c : name) {
    if (c == ' ') c = '_';
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return name;
}

void Scalar(const char* name, const char* type, const char* help, int64_t value,
            std::string& out) {
  absl::StrAppend(&out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ",
                  type, "\n", name, " ", value, "\n");
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::Render(const std::string& name, std::string& out) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    absl::StrAppend(&out, name, "_bucket{le=\"", bounds_[i], "\"} ", cumulative,
                    "\n");
  }
  absl::StrAppend(&out, name, "_bucket{le=\"+Inf\"} ", count_, "\n", name,
                  "_sum ", sum_, "\n", name, "_count ", count_, "\n");
}

Metrics::Metrics()
    : time_to_first_token_(
          {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      time_per_output_token_({0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                              0.1, 0.25, 0.5, 1}) {}

void Metrics::RecordRequest(absl::StatusCode code) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[code];
}

void Metrics::RecordFinish(const FinishEvent& finish) {
  const int generated = finish.usage.generated_tokens;
  if (generated == 0) return;  // No first token: nothing to time.
  std::lock_guard<std::mutex> lock(mu_);
  const absl::Duration first = finish.timings.time_to_first_token;
  time_to_first_token_.Observe(absl::ToDoubleSeconds(first));
  if (generated > 1) {
    time_per_output_token_.Observe(
        absl::ToDoubleSeconds(finish.timings.total - first) / (generated - 1));
  }
}

std::string Metrics::Render(const EngineStats& stats) const {
  std::string out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    absl::StrAppend(&out,
                    "# HELP textgen_requests_total Generate calls by final "
                    "status.\n# TYPE textgen_requests_total counter\n");
    for (const auto& [code, count] : requests_) {
      absl::StrAppend(&out, "textgen_requests_total{code=\"", CodeName(code),
                      "\"} ", count, "\n");
    }
    absl::StrAppend(&out,
                    "# HELP textgen_time_to_first_token_seconds From arrival "
                    "to the first generated token.\n# TYPE "
                    "textgen_time_to_first_token_seconds histogram\n");
    time_to_first_token_.Render("textgen_time_to_first_token_seconds", out);
    absl::StrAppend(&out,
                    "# HELP textgen_time_per_output_token_seconds Mean time "
                    "between a request's generated tokens after the "
                    "first.\n# TYPE textgen_time_per_output_token_seconds "
                    "histogram\n");
    time_per_output_token_.Render("textgen_time_per_output_token_seconds", out);
  }
  Scalar("textgen_generated_tokens_total", "counter", "Tokens generated.",
         stats.generated_tokens, out);
  Scalar("textgen_prompt_tokens_total", "counter",
         "Prompt tokens fed to the model.", stats.prompt_tokens, out);
  Scalar("textgen_queue_depth", "gauge", "Requests waiting for a KV slot.",
         stats.queue_depth, out);
  Scalar("textgen_kv_slots_in_use", "gauge", "KV-cache slots in use.",
         stats.slots_in_use, out);
  Scalar("textgen_kv_slots_total", "gauge", "KV-cache slots.", stats.num_slots,
         out);
  Scalar("textgen_batch_size", "gauge", "Sequences in the last engine step.",
         stats.last_batch_size, out);
  // The Gateway API Inference Extension's model-server protocol: queued
  // requests, running requests and KV-cache utilisation (0-1), which its
  // endpoint picker scrapes to choose a replica (deploy/README.md). The same
  // numbers as above under names with those semantics, so the picker's
  // flags name them directly.
  Scalar("textgen_num_requests_waiting", "gauge",
         "Requests queued for a KV slot (inference extension: "
         "TotalQueuedRequests).",
         stats.queue_depth, out);
  Scalar("textgen_num_requests_running", "gauge",
         "Requests generating (inference extension: TotalRunningRequests).",
         stats.slots_in_use, out);
  absl::StrAppend(
      &out,
      "# HELP textgen_kv_cache_usage_perc KV-cache utilisation, 0 to 1 "
      "(inference extension: KVCacheUtilization).\n"
      "# TYPE textgen_kv_cache_usage_perc gauge\ntextgen_kv_cache_usage_perc ",
      stats.num_slots > 0
          ? static_cast<double>(stats.slots_in_use) / stats.num_slots
          : 0.0,
      "\n");
  // Prometheus' info-metric idiom: the value is 1, the label is the fact.
  absl::StrAppend(&out,
                  "# HELP textgen_cpu_kernels_info The build of the kernels "
                  "in use (model/kernel_dispatch.h).\n# TYPE "
                  "textgen_cpu_kernels_info gauge\ntextgen_cpu_kernels_info{"
                  "family=\"",
                  kernels::KernelFamilyName(kernels::ActiveKernelFamily()),
                  "\"} 1\n");
  return out;
}

}  // namespace textgen
