#include "server/api/metrics.h"

#include <sstream>
#include <vector>

#include "absl/time/time.h"
#include "model/kernels/dispatch.h"
#include "prometheus/metric_family.h"
#include "prometheus/text_serializer.h"

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

// One unlabelled counter or gauge holding `value`.
prometheus::MetricFamily Scalar(const char* name, prometheus::MetricType type,
                                const char* help, double value) {
  prometheus::ClientMetric metric;
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  return {name, help, type, {metric}};
}

prometheus::Histogram& RegisterHistogram(
    prometheus::Registry& registry, const char* name, const char* help,
    const prometheus::Histogram::BucketBoundaries& bounds) {
  return prometheus::BuildHistogram()
      .Name(name)
      .Help(help)
      .Register(registry)
      .Add({}, bounds);
}

}  // namespace

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      requests_(prometheus::BuildCounter()
                    .Name("textgen_requests_total")
                    .Help("Generate calls by final status.")
                    .Register(*registry_)),
      time_to_first_token_(RegisterHistogram(
          *registry_, "textgen_time_to_first_token_seconds",
          "From arrival to the first generated token.",
          {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30})),
      time_per_output_token_(RegisterHistogram(
          *registry_, "textgen_time_per_output_token_seconds",
          "Mean time between a request's generated tokens after the first.",
          {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
           1})) {}

void Metrics::RecordRequest(absl::StatusCode code) {
  requests_.Add({{"code", CodeName(code)}}).Increment();
}

void Metrics::RecordFinish(const FinishEvent& finish) {
  const int generated = finish.usage.generated_tokens;
  if (generated == 0) return;  // No first token: nothing to time.
  const absl::Duration first = finish.timings.time_to_first_token;
  time_to_first_token_.Observe(absl::ToDoubleSeconds(first));
  if (generated > 1) {
    time_per_output_token_.Observe(
        absl::ToDoubleSeconds(finish.timings.total - first) / (generated - 1));
  }
}

std::string Metrics::Render(const EngineStats& stats) const {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  families.push_back(Scalar("textgen_generated_tokens_total",
                            MetricType::Counter, "Tokens generated.",
                            stats.generated_tokens));
  families.push_back(Scalar("textgen_prompt_tokens_total", MetricType::Counter,
                            "Prompt tokens fed to the model.",
                            stats.prompt_tokens));
  families.push_back(
      Scalar("textgen_source_tokens_total", MetricType::Counter,
             "Source tokens read by the encoder (encoder-decoder models).",
             stats.source_tokens));
  families.push_back(Scalar("textgen_queue_depth", MetricType::Gauge,
                            "Requests waiting for a KV slot.",
                            stats.queue_depth));
  families.push_back(Scalar("textgen_kv_slots_in_use", MetricType::Gauge,
                            "KV-cache slots in use.", stats.slots_in_use));
  families.push_back(Scalar("textgen_kv_slots_total", MetricType::Gauge,
                            "KV-cache slots.", stats.num_slots));
  families.push_back(Scalar("textgen_batch_size", MetricType::Gauge,
                            "Sequences in the last engine step.",
                            stats.last_batch_size));
  // The Gateway API Inference Extension's model-server protocol: queued
  // requests, running requests and KV-cache utilisation (0-1), which its
  // endpoint picker scrapes to choose a replica (deploy/README.md). The same
  // numbers as above under names with those semantics, so the picker's
  // flags name them directly.
  families.push_back(Scalar("textgen_num_requests_waiting", MetricType::Gauge,
                            "Requests queued for a KV slot (inference "
                            "extension: TotalQueuedRequests).",
                            stats.queue_depth));
  families.push_back(
      Scalar("textgen_num_requests_running", MetricType::Gauge,
             "Requests generating (inference extension: TotalRunningRequests).",
             stats.slots_in_use));
  families.push_back(Scalar(
      "textgen_kv_cache_usage_perc", MetricType::Gauge,
      "KV-cache utilisation, 0 to 1: blocks used / total (inference "
      "extension: KVCacheUtilization).",
      stats.kv_blocks_total > 0
          ? static_cast<double>(stats.kv_blocks_used) / stats.kv_blocks_total
          : 0.0));
  // Paged KV cache and prefix cache (server/README.md).
  prometheus::MetricFamily blocks =
      Scalar("textgen_kv_blocks", MetricType::Gauge,
             "KV-cache blocks by state: used (held by a request), cached "
             "(a published prefix no request holds, evicted when needed), "
             "free.",
             stats.kv_blocks_used);
  blocks.metric[0].label.push_back({"state", "used"});
  for (auto [state, value] :
       {std::pair<const char*, int>{"cached", stats.kv_blocks_cached},
        {"free", stats.kv_blocks_free}}) {
    prometheus::ClientMetric m = blocks.metric[0];
    m.label[0].value = state;
    m.gauge.value = value;
    blocks.metric.push_back(std::move(m));
  }
  families.push_back(std::move(blocks));
  families.push_back(
      Scalar("textgen_prefix_cache_hit_tokens_total", MetricType::Counter,
             "Prompt tokens found in the prefix cache rather than computed.",
             stats.prefix_cache_hit_tokens));
  families.push_back(
      Scalar("textgen_prefix_cache_lookup_tokens_total", MetricType::Counter,
             "Prompt tokens of requests that looked up the prefix cache.",
             stats.prefix_cache_lookup_tokens));
  families.push_back(
      Scalar("textgen_prefix_cache_hit_ratio", MetricType::Gauge,
             "textgen_prefix_cache_hit_tokens_total / "
             "textgen_prefix_cache_lookup_tokens_total (0 before any lookup).",
             stats.prefix_cache_lookup_tokens > 0
                 ? static_cast<double>(stats.prefix_cache_hit_tokens) /
                       stats.prefix_cache_lookup_tokens
                 : 0.0));
  families.push_back(Scalar(
      "textgen_spec_proposed_tokens_total", MetricType::Counter,
      "Tokens proposed by speculative decoding (--speculative) and verified.",
      stats.spec_proposed_tokens));
  families.push_back(
      Scalar("textgen_spec_accepted_tokens_total", MetricType::Counter,
             "Proposed tokens accepted: sampled as proposed, so they took no "
             "forward pass of their own.",
             stats.spec_accepted_tokens));
  // Prometheus' info-metric idiom: the value is 1, the label is the fact.
  prometheus::MetricFamily kernels_info =
      Scalar("textgen_cpu_kernels_info", MetricType::Gauge,
             "The build of the kernels in use (model/kernels/dispatch.h).", 1);
  kernels_info.metric[0].label.push_back(
      {"family", kernels::KernelFamilyName(kernels::ActiveKernelFamily())});
  families.push_back(std::move(kernels_info));

  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

}  // namespace textgen
