// Google Benchmark micro-benchmarks of the block-quantized products alone
// (model/kernels/block_panels.h), without a model around them:
//
//   block/<type>/<act>/rows:R/<where>   y = x · W, W of `type` (Q4_0 .. Q8_0,
//                                       Q4_K .. Q6_K), x of R rows, act f32
//                                       (the exact kernel) or int8 (int8
//                                       activations), where hot (W, 768 ×
//                                       768, stays in L2) or cold (W streamed
//                                       from memory, 768 × 196,608:
//                                       more than any L3 here)
//
// Each reports the weight bytes read per second (bytes_per_second) and rows
// × columns per second (items_per_second). `hot` is the kernel's own speed:
// where it is below textgen_stream_read's bandwidth, batch-1 decode of that
// type is bound by arithmetic, not by memory. --cpu_kernels picks the family.
// The weights are random codes with unit scales: the time does not depend on
// them. Timings are never asserted: tests/bench only checks that this runs.
//
//   build/bench/textgen_block_kernel_bench --benchmark_filter=rows:1/
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "bench/cpu_kernels.h"
#include "model/kernels/ggml_blocks.h"
#include "model/kernels/kernels.h"

namespace textgen {
namespace {

constexpr int kDepth = 768;

// `rows` × kDepth blocks of `type`: random bytes, each block's fp16 scales
// (its first 2 or 4 bytes) set to 1/64 so every value is finite.
std::vector<uint8_t> RandomBlocks(kernels::BlockType type, int rows) {
  const kernels::BlockLayout& l = kernels::LayoutOf(type);
  const size_t per_row = static_cast<size_t>(kDepth / l.values) * l.bytes;
  std::vector<uint8_t> bytes(per_row * rows);
  std::mt19937 rng(7);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  const uint16_t scale = 0x2400;  // 1/64 as fp16.
  // Q6_K keeps its d last (ggml's block_q6_K); the others first.
  const bool d_last = type == kernels::BlockType::kQ6_K;
  const bool has_m = l.bias != kernels::BlockBias::kNone;
  for (size_t at = 0; at < bytes.size(); at += l.bytes) {
    const size_t d = d_last ? at + l.bytes - 2 : at;
    std::memcpy(&bytes[d], &scale, 2);
    if (has_m && !d_last) std::memcpy(&bytes[d + 2], &scale, 2);
  }
  return bytes;
}

void BM_Block(benchmark::State& state, kernels::BlockType type, bool int8,
              int rows, int cols) {
  const std::vector<uint8_t> blocks = RandomBlocks(type, cols);
  const kernels::PackedWeights w = kernels::PackedWeights::FromBlockRows(
      {{type, blocks.data(), cols}}, kDepth, int8);
  std::vector<float> x(static_cast<size_t>(rows) * kDepth);
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  for (float& v : x) v = normal(rng);
  std::vector<float> y(static_cast<size_t>(rows) * cols);
  for (auto _ : state) {
    kernels::MatMulPanels(x.data(), rows, kDepth, w, 0, w.panels(), y.data(),
                          cols, /*accumulate=*/false);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(w.MemoryBytes()));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * rows *
                          cols);
}

void Register() {
  const kernels::BlockType types[] = {
      kernels::BlockType::kQ4_0, kernels::BlockType::kQ5_0,
      kernels::BlockType::kQ8_0, kernels::BlockType::kQ4_K,
      kernels::BlockType::kQ5_K, kernels::BlockType::kQ6_K};
  for (kernels::BlockType type : types) {
    for (bool int8 : {false, true}) {
      for (int rows : {1, 4, 64}) {
        for (bool hot : {true, false}) {
          if (!hot && rows > 4) continue;  // Many rows are never memory-bound.
          const int cols = hot ? 768 : 196608;
          benchmark::RegisterBenchmark(
              absl::StrCat("block/", kernels::LayoutOf(type).name, "/",
                           int8 ? "int8" : "f32", "/rows:", rows, "/",
                           hot ? "hot" : "cold")
                  .c_str(),
              BM_Block, type, int8, rows, cols)
              ->UseRealTime();
        }
      }
    }
  }
}

}  // namespace
}  // namespace textgen

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  absl::ParseCommandLine(argc, argv);
  if (textgen::UseCpuKernelsFlag("block_kernel_bench") == nullptr) return 2;
  textgen::Register();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
