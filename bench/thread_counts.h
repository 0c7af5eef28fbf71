// The benchmarks' --threads=1,2 lists (textgen_stream_read, textgen_peak).
#ifndef TEXTGEN_BENCH_THREAD_COUNTS_H_
#define TEXTGEN_BENCH_THREAD_COUNTS_H_

#include <cstdio>
#include <optional>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace textgen {

// The comma-separated counts of `list`, each 1 .. 256; nullopt after printing
// "<program>: bad --threads entry '...'" to stderr for anything else. An empty
// list gives an empty vector (the caller says what it needs).
inline std::optional<std::vector<int>> ParseThreadCounts(absl::string_view list,
                                                         const char* program) {
  std::vector<int> counts;
  for (absl::string_view s : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    int n = 0;
    if (!absl::SimpleAtoi(s, &n) || n < 1 || n > 256) {
      std::fprintf(stderr, "%s: bad --threads entry '%.*s'\n", program,
                   static_cast<int>(s.size()), s.data());
      return std::nullopt;
    }
    counts.push_back(n);
  }
  return counts;
}

}  // namespace textgen

#endif  // TEXTGEN_BENCH_THREAD_COUNTS_H_
