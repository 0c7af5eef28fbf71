// Google Benchmark micro-benchmarks of the per-token work beside the forward
// pass (model/sampler.h), over one row of GPT-2's 50,257 logits:
//
//   norm/libm       the log-softmax normaliser as it was: one libm exp in
//                   double per entry, summed one after another, and a log
//   norm/textgen    LogSoftmaxNormOf: the vector kernel's exponentials
//                   (kernels::SumExp) and log1p of the others' sum
//
// A served step forms one normaliser per sequence that picks a token (16 at
// 16 streams), so a microsecond here is 16 a step. Items are logits.
// --cpu_kernels picks the family. Timings are never asserted: tests/bench
// only checks that this runs.
//
//   build/bench/textgen_sampler_bench
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <vector>

#include "absl/flags/parse.h"
#include "bench/cpu_kernels.h"
#include "model/sampler.h"

namespace textgen {
namespace {

std::vector<float> Logits() {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::vector<float> logits(50257);
  for (float& l : logits) l = normal(rng);
  return logits;
}

void BM_NormLibm(benchmark::State& state) {
  const std::vector<float> logits = Logits();
  for (auto _ : state) {
    float max = logits[0];
    for (float l : logits) max = l > max ? l : max;
    double sum = 0.0;
    for (float l : logits) sum += std::exp(static_cast<double>(l - max));
    benchmark::DoNotOptimize(static_cast<float>(std::log(sum)));
  }
  state.SetItemsProcessed(state.iterations() * logits.size());
}
BENCHMARK(BM_NormLibm)->Name("norm/libm");

void BM_NormTextgen(benchmark::State& state) {
  const std::vector<float> logits = Logits();
  for (auto _ : state) {
    benchmark::DoNotOptimize(LogSoftmaxNormOf(logits));
  }
  state.SetItemsProcessed(state.iterations() * logits.size());
}
BENCHMARK(BM_NormTextgen)->Name("norm/textgen");

}  // namespace
}  // namespace textgen

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  absl::ParseCommandLine(argc, argv);
  if (textgen::UseCpuKernelsFlag("sampler_bench") == nullptr) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
