// The CPU's sustained compute peak for each instruction family the kernels use
// (issue 34): how many operations a second one and two cores retire when
// nothing but the arithmetic runs, so that a compute-bound benchmark row can be
// stated as a share of what its instructions can do on this machine.
//
//   build/bench/textgen_peak --threads=1,2 --seconds=0.5
//
// One line of CPU flags, then one line per family and thread count:
//
//   peak cpu="Intel(R) Xeon(R) Processor" flags=avx2,fma,avx512f,...
//   peak family=f32_fma512 threads=1 gops=.. per_cycle_at_nominal=..
//     ops_per_instruction=32 instruction=vfmadd231ps_zmm
//   peak family=amx_int8 threads=1 skipped=no_amx_int8
//
// Families (each only where CPUID has it; otherwise a `skipped` line naming
// the missing flag):
//   f32_fma256   vfmadd231ps ymm: 8 lanes x (multiply + add) = 16 ops
//   f32_fma512   vfmadd231ps zmm: 16 lanes x 2 = 32 ops       (MatMulF32)
//   int8_vnni512 vpdpbusd zmm: 16 lanes x 4 u8·s8 products, each a multiply
//                and an add = 128 ops                           (MatMulInt8)
//   bf16_dp512   vdpbf16ps zmm: 16 lanes x 2 bf16 pairs x 2 = 64 ops
//   amx_int8, amx_bf16: tile multiplies; not measured yet (the machines this
//                was written on expose no AMX to try it on), so always skipped.
// An "op" is a multiply or an add, so a multiply-add counts 2, as GFLOPS and
// the usual int8 TOPS figures count them. gops is the median of --repetitions
// timed runs of --seconds each; per_cycle_at_nominal divides by the nominal
// clock /proc/cpuinfo states (turbo makes it read high, never low).
//
// Each thread runs 16 independent accumulator chains per family (12 for ymm):
// more than the latency × throughput any x86 core needs (4 cycles × 2 ports),
// so the loop is bound by the execution ports, not by a dependency. The
// functions are compiled for their instructions with target attributes, so the
// binary runs on any x86-64 and calls only what the CPU has. Timings are
// printed, never asserted.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/cpu_info.h"
#include "bench/thread_counts.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

ABSL_FLAG(std::string, threads, "1,2", "Comma-separated thread counts");
ABSL_FLAG(double, seconds, 0.5, "Length of one timed run, per thread count");
ABSL_FLAG(int, repetitions, 5, "Timed runs per family and thread count");

namespace textgen {
namespace {

// Iterations of a family's inner loop between clock reads (each does 16
// instructions).
constexpr int64_t kBatch = 1 << 16;

#if defined(__x86_64__)
// Each returns a value built from every accumulator, so that none of the
// chains can be dropped; `iterations` × 16 instructions are retired.
// 12 chains, not 16: without AVX-512 there are 16 ymm registers, and 16
// accumulators beside the two operands would spill. Its count of
// instructions is scaled to the 16 a batch is reckoned with.
__attribute__((target("avx2,fma"))) float F32Fma256(int64_t iterations) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(0.001f * i);
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-6f);
  for (int64_t n = 0; n < iterations * 4 / 3; ++n) {
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(a, acc[i], b);
  }
  __m256 sum = acc[0];
  for (int i = 1; i < 12; ++i) sum = _mm256_add_ps(sum, acc[i]);
  return _mm256_cvtss_f32(sum);
}

// The lanes' sum (not _mm512_reduce_add_ps: GCC 12's expansion, like that of
// _mm512_cvtepi32_ps, warns of an uninitialized _mm512_undefined_ps).
__attribute__((target("avx512f"))) float FoldLanes512(__m512 v) {
  float lanes[16];
  _mm512_storeu_ps(lanes, v);
  float sum = 0;
  for (float x : lanes) sum += x;
  return sum;
}

__attribute__((target("avx512f"))) float F32Fma512(int64_t iterations) {
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_ps(0.001f * i);
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-6f);
  for (int64_t n = 0; n < iterations; ++n) {
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_fmadd_ps(a, acc[i], b);
  }
  __m512 sum = acc[0];
  for (int i = 1; i < 16; ++i) sum = _mm512_add_ps(sum, acc[i]);
  return FoldLanes512(sum);
}

__attribute__((target("avx512f,avx512vnni"))) float Int8Vnni512(
    int64_t iterations) {
  __m512i acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_epi32(i);
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  for (int64_t n = 0; n < iterations; ++n) {
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
  }
  __m512i sum = acc[0];
  for (int i = 1; i < 16; ++i) sum = _mm512_add_epi32(sum, acc[i]);
  int32_t lanes[16];
  _mm512_storeu_si512(lanes, sum);
  float total = 0;
  for (int32_t x : lanes) total += static_cast<float>(x);
  return total;
}

__attribute__((target("avx512f,avx512bf16"))) float Bf16Dp512(
    int64_t iterations) {
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_ps(0.001f * i);
  const __m512bh a =
      _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.5f), _mm512_set1_ps(0.25f));
  const __m512bh b =
      _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-6f), _mm512_set1_ps(2e-6f));
  for (int64_t n = 0; n < iterations; ++n) {
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  }
  __m512 sum = acc[0];
  for (int i = 1; i < 16; ++i) sum = _mm512_add_ps(sum, acc[i]);
  return FoldLanes512(sum);
}
#endif

struct Family {
  const char* name;
  const char* instruction;
  const char* flag;  // CPUID's name for what it needs (lscpu's spelling).
  bool supported;
  int ops_per_instruction;
  float (*run)(int64_t iterations);
};

std::vector<Family> Families() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return {
      {"f32_fma256", "vfmadd231ps_ymm", "fma",
       __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"), 16,
       F32Fma256},
      {"f32_fma512", "vfmadd231ps_zmm", "avx512f",
       static_cast<bool>(__builtin_cpu_supports("avx512f")), 32, F32Fma512},
      {"int8_vnni512", "vpdpbusd_zmm", "avx512_vnni",
       __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512vnni"),
       128, Int8Vnni512},
      {"bf16_dp512", "vdpbf16ps_zmm", "avx512_bf16",
       __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bf16"),
       64, Bf16Dp512},
      {"amx_int8", "tdpbssd", "amx_int8", false, 0, nullptr},
      {"amx_bf16", "tdpbf16ps", "amx_bf16", false, 0, nullptr},
  };
#else
  return {};
#endif
}

// The flags a reader of this output wants to see, of those /proc/cpuinfo has.
std::string RelevantFlags() {
  const std::vector<std::string> wanted = {
      "avx2",        "fma",      "avx512f",     "avx512bw",
      "avx512_vnni", "avx_vnni", "avx512_bf16", "avx512_fp16",
      "amx_tile",    "amx_int8", "amx_bf16"};
  const std::vector<std::string> have =
      absl::StrSplit(CpuInfo("flags"), ' ', absl::SkipEmpty());
  std::vector<std::string> out;
  for (const std::string& flag : wanted) {
    if (std::find(have.begin(), have.end(), flag) != have.end()) {
      out.push_back(flag);
    }
  }
  return absl::StrJoin(out, ",");
}

// Instructions a second on `threads` threads running `family` for about
// `seconds`: each thread runs batches until the time is up; the total is what
// all of them retired over the slowest one's time.
double Rate(const Family& family, int threads, double seconds) {
  std::vector<int64_t> done(threads);
  std::vector<float> sinks(threads);
  std::vector<double> elapsed(threads);
  auto work = [&](int t) {
    const auto start = std::chrono::steady_clock::now();
    int64_t batches = 0;
    float sink = 0;
    double s = 0;
    do {
      sink += family.run(kBatch);
      ++batches;
      s = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                        start)
              .count();
    } while (s < seconds);
    done[t] = batches * kBatch * 16;
    sinks[t] = sink;
    elapsed[t] = s;
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (std::thread& th : pool) th.join();
  int64_t total = 0;
  float sink = 0;
  for (int t = 0; t < threads; ++t) {
    total += done[t];
    sink += sinks[t];
  }
  // Printed so that no family's work can be optimized away.
  std::fprintf(stderr, "peak %s sink %g\n", family.name, sink);
  return total / *std::max_element(elapsed.begin(), elapsed.end());
}

int Run(const std::vector<int>& thread_counts, double seconds,
        int repetitions) {
  double mhz = 0;
  if (!absl::SimpleAtod(CpuInfo("cpu MHz"), &mhz)) mhz = 0;
  std::printf("peak cpu=\"%s\" nominal_mhz=%.0f flags=%s\n",
              CpuInfo("model name").c_str(), mhz, RelevantFlags().c_str());
  for (const Family& family : Families()) {
    for (int threads : thread_counts) {
      if (!family.supported) {
        std::printf("peak family=%s threads=%d skipped=no_%s\n", family.name,
                    threads, family.flag);
        continue;
      }
      Rate(family, threads, seconds / 4);  // Warm-up: clocks and caches.
      std::vector<double> rates;
      for (int r = 0; r < repetitions; ++r) {
        rates.push_back(Rate(family, threads, seconds));
      }
      std::sort(rates.begin(), rates.end());
      const double gops =
          rates[rates.size() / 2] * family.ops_per_instruction / 1e9;
      std::printf(
          "peak family=%s threads=%d gops=%.1f per_cycle_at_nominal=%.1f "
          "ops_per_instruction=%d instruction=%s\n",
          family.name, threads, gops,
          mhz > 0 ? gops * 1e3 / mhz / threads : 0.0,
          family.ops_per_instruction, family.instruction);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace textgen

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "The compute peak of each instruction family: textgen_peak "
      "--threads=1,2 --seconds=0.5");
  absl::ParseCommandLine(argc, argv);
  const std::optional<std::vector<int>> parsed =
      textgen::ParseThreadCounts(absl::GetFlag(FLAGS_threads), "peak");
  if (!parsed) return 2;
  const std::vector<int>& thread_counts = *parsed;
  const double seconds = absl::GetFlag(FLAGS_seconds);
  const int repetitions = absl::GetFlag(FLAGS_repetitions);
  if (thread_counts.empty() || !(seconds > 0) || repetitions < 1) {
    std::fprintf(
        stderr, "peak: need --threads, --seconds > 0 and --repetitions >= 1\n");
    return 2;
  }
  return textgen::Run(thread_counts, seconds, repetitions);
}
