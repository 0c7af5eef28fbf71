// The server's Prometheus metrics: what the service records per request, and
// the engine's own counters and gauges, rendered in Prometheus' text
// exposition format (version 0.0.4) for server/http/metrics_http.h to serve.
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
// Built on prometheus-cpp (Debian's prometheus-cpp-dev, core library only):
// a registry holds what the service records (requests, the two histograms);
// the engine's values, read from EngineStats at each scrape, are added as
// metric families of their own; the library's TextSerializer writes the page.
// Thread-safe.
#ifndef TEXTGEN_SERVER_API_METRICS_H_
#define TEXTGEN_SERVER_API_METRICS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "engine/engine_stats.h"
#include "engine/request.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace textgen {

class Metrics {
 public:
  Metrics();

  // A Generate call ended with `code` (refused ones too).
  void RecordRequest(absl::StatusCode code);
  // A Generate call's FinishEvent: its timings feed the histograms.
  void RecordFinish(const FinishEvent& finish);

  // Everything, with `stats` for the engine's part, in Prometheus' text
  // exposition format.
  std::string Render(const EngineStats& stats) const;

 private:
  const std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;  // By code.
  prometheus::Histogram& time_to_first_token_;
  prometheus::Histogram& time_per_output_token_;
};

}  // namespace textgen

#endif  // TEXTGEN_SERVER_API_METRICS_H_
