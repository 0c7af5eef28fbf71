// How much of this process is in physical memory (VmRSS), for start-up logs
// and the memory tests: weights are mapped and packed so that the resident
// size after loading is close to the weights' own size.
#ifndef TEXTGEN_BASE_RESIDENT_MEMORY_H_
#define TEXTGEN_BASE_RESIDENT_MEMORY_H_

#include <cstdint>

namespace textgen {

// The resident set size in bytes of process `pid` (0: this process), from
// /proc/<pid>/status; 0 where that cannot be read (no such process, not
// Linux). The benchmarks read a server's this way.
uint64_t ResidentMemoryBytes(int pid = 0);

}  // namespace textgen

#endif  // TEXTGEN_BASE_RESIDENT_MEMORY_H_
