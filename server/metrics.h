// The server's Prometheus metrics: what the service records per request, and
// the engine's own counters and gauges, rendered in Prometheus' text
// exposition format (version 0.0.4) for server/metrics_http.h to serve.
//
//   textgen_requests_total{code="OK"}         Generate calls by final status
//   textgen_generated_tokens_total            tokens sampled (engine)
//   textgen_prompt_tokens_total               prompt tokens fed (engine)
//   textgen_queue_depth                       requests waiting for a slot
//   textgen_kv_slots_in_use / _total          KV-cache slots
//   textgen_batch_size                        sequences in the last step
//   textgen_num_requests_waiting, _running    the Gateway API Inference
//   textgen_kv_cache_usage_perc (0-1)         Extension's model-server gauges
//   textgen_cpu_kernels_info{family="avx512"} 1: the kernels in use
//   textgen_time_to_first_token_seconds       histogram, finished requests
//   textgen_time_per_output_token_seconds     histogram, finished requests
//
// Thread-safe.
#ifndef TEXTGEN_SERVER_METRICS_H_
#define TEXTGEN_SERVER_METRICS_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/engine_stats.h"
#include "server/request.h"

namespace textgen {

// A cumulative histogram with fixed upper bounds (plus +Inf).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);

  void Observe(double value);
  // The _bucket, _sum and _count lines of metric `name`.
  void Render(const std::string& name, std::string& out) const;

 private:
  const std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // Per bound, then +Inf; not cumulative.
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();

  // A Generate call ended with `code` (refused ones too).
  void RecordRequest(absl::StatusCode code);
  // A Generate call's FinishEvent: its timings feed the histograms.
  void RecordFinish(const FinishEvent& finish);

  // Everything, with `stats` for the engine's part.
  std::string Render(const EngineStats& stats) const;

 private:
  mutable std::mutex mu_;
  std::map<absl::StatusCode, uint64_t> requests_;
  Histogram time_to_first_token_;
  Histogram time_per_output_token_;
};

}  // namespace textgen

#endif  // TEXTGEN_SERVER_METRICS_H_
