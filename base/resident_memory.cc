#include "base/resident_memory.h"

#include <cstdio>
#include <fstream>
#include <string>

namespace textgen {

uint64_t ResidentMemoryBytes(int pid) {
  std::ifstream status(pid == 0 ? std::string("/proc/self/status")
                                : "/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str(), "VmRSS: %llu kB", &kib) == 1) {
      return static_cast<uint64_t>(kib) * 1024;
    }
  }
  return 0;
}

}  // namespace textgen
