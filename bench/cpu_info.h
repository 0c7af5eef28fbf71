// What the benchmarks print about the machine they ran on: figures are only
// comparable within one CPU model (bench/README.md).
#ifndef TEXTGEN_BENCH_CPU_INFO_H_
#define TEXTGEN_BENCH_CPU_INFO_H_

#include <fstream>
#include <string>

namespace textgen {

// The named field of /proc/cpuinfo's first processor ("model name", "flags",
// "cpu MHz"), or "".
inline std::string CpuInfo(const std::string& field) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, field.size(), field) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t start = line.find_first_not_of(' ', colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

}  // namespace textgen

#endif  // TEXTGEN_BENCH_CPU_INFO_H_
