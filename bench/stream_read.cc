// STREAM-style read bandwidth: how fast this machine streams a large buffer
// from memory into the cores, with 1 and 2 threads. Decoding one token reads
// every weight once, so weight bytes / this bandwidth bounds decode tokens/s
// from above (bench/README.md, "bandwidth bound").
//
//   build/bench/textgen_stream_read --threads=1,2 --size_mib=1024
//
// Each thread sums its contiguous share of the buffer with independent 64-bit
// integer accumulators, which the compiler vectorizes, so the loop is limited
// by memory, not by an add chain. One line per thread count:
//
//   stream_read threads=1 size_mib=1024 repetitions=5 best_gbps=..
//   median_gbps=..
//
// (GB/s = 1e9 bytes per second.) Timings are reported, never asserted.
//
// The buffer lives where the weights do (base/huge_pages.h: 2 MiB huge pages
// where the kernel allows them), so the bound is measured with the weights'
// page size: with 4 KiB pages one core read ~15 % less on the Xeon of
// bench/README.md, and decode beat a "bound" it was not held to.
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
#include "absl/strings/str_split.h"
#include "base/huge_pages.h"
#include "bench/thread_counts.h"
#include "model/kernels/kernels.h"

ABSL_FLAG(std::string, threads, "1,2", "Comma-separated thread counts");
ABSL_FLAG(int, size_mib, 1024,
          "Buffer size in MiB (the STREAM rule: far "
          "larger than the last-level cache)");
ABSL_FLAG(int, repetitions, 5, "Timed passes per thread count");

namespace textgen {
namespace {

// Sums [begin, end) with 8 independent accumulators (one AVX-512 vector, or
// two AVX2 vectors, of 64-bit lanes), one cache line per iteration, asking
// for lines ahead as the decode kernels do (model/kernels/kernels.h's prefetch
// distances): without the hints one core read ~20 % less than the f32 decode
// step streams.
uint64_t SumRange(const uint64_t* begin, const uint64_t* end) {
  constexpr int kNear = kernels::kPrefetchNearBytes / sizeof(uint64_t);
  constexpr int kFar = kernels::kPrefetchFarBytes / sizeof(uint64_t);
  uint64_t acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const uint64_t* p = begin;
  for (; p + 8 <= end; p += 8) {
    __builtin_prefetch(p + kNear, 0, 3);
    __builtin_prefetch(p + kFar, 0, 2);
    for (int j = 0; j < 8; ++j) acc[j] += p[j];
  }
  uint64_t sum = 0;
  for (; p < end; ++p) sum += *p;
  for (uint64_t a : acc) sum += a;
  return sum;
}

// Runs `fn(t)` on `threads` threads (t = 0 .. threads - 1) and waits.
template <typename Fn>
void Parallel(int threads, Fn fn) {
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(fn, t);
  fn(0);
  for (std::thread& th : pool) th.join();
}

int Run(const std::vector<int>& thread_counts, size_t bytes, int repetitions) {
  const size_t words = bytes / sizeof(uint64_t);
  // Written in parallel with values the compiler cannot fold (one socket
  // here, so page placement does not matter).
  StreamedVector<uint64_t> buffer(words);
  const int max_threads =
      *std::max_element(thread_counts.begin(), thread_counts.end());
  Parallel(max_threads, [&](int t) {
    const size_t b = words * t / max_threads, e = words * (t + 1) / max_threads;
    for (size_t i = b; i < e; ++i) buffer[i] = i * 0x9E3779B97F4A7C15ull;
  });

  uint64_t checksum = 0;
  for (int threads : thread_counts) {
    std::vector<double> gbps;
    for (int r = 0; r < repetitions + 1; ++r) {  // The first pass warms up.
      std::vector<uint64_t> sums(threads);
      const auto start = std::chrono::steady_clock::now();
      Parallel(threads, [&](int t) {
        const size_t b = words * t / threads, e = words * (t + 1) / threads;
        sums[t] = SumRange(buffer.data() + b, buffer.data() + e);
      });
      const double seconds = std::chrono::duration<double>(
                                 std::chrono::steady_clock::now() - start)
                                 .count();
      for (uint64_t s : sums) checksum += s;
      if (r > 0) gbps.push_back(words * sizeof(uint64_t) / seconds / 1e9);
    }
    std::sort(gbps.begin(), gbps.end());
    std::printf(
        "stream_read threads=%d size_mib=%zu repetitions=%d best_gbps=%.2f "
        "median_gbps=%.2f\n",
        threads, bytes >> 20, repetitions, gbps.back(), gbps[gbps.size() / 2]);
    std::fflush(stdout);
  }
  // Printed so the sums cannot be optimized away.
  std::fprintf(stderr, "stream_read checksum %llu\n",
               static_cast<unsigned long long>(checksum));
  return 0;
}

}  // namespace
}  // namespace textgen

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "STREAM-style read bandwidth: textgen_stream_read --threads=1,2 "
      "--size_mib=1024");
  absl::ParseCommandLine(argc, argv);
  const std::optional<std::vector<int>> parsed =
      textgen::ParseThreadCounts(absl::GetFlag(FLAGS_threads), "stream_read");
  if (!parsed) return 2;
  const std::vector<int>& thread_counts = *parsed;
  const int size_mib = absl::GetFlag(FLAGS_size_mib);
  const int repetitions = absl::GetFlag(FLAGS_repetitions);
  if (thread_counts.empty() || size_mib < 1 || repetitions < 1) {
    std::fprintf(stderr,
                 "stream_read: need --threads, --size_mib >= 1 and "
                 "--repetitions >= 1\n");
    return 2;
  }
  return textgen::Run(thread_counts, static_cast<size_t>(size_mib) << 20,
                      repetitions);
}
