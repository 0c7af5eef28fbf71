// How much of this process is in physical memory (VmRSS), for start-up logs
// and the memory tests: weights are mapped and packed so that the resident
// size after loading is close to the weights' own size.
#ifndef TEXTGEN_MODEL_RESIDENT_MEMORY_H_
#define TEXTGEN_MODEL_RESIDENT_MEMORY_H_

#include <cstdint>

namespace textgen {

// This process's resident set size in bytes, from /proc/self/status; 0 where
// that cannot be read (not Linux).
uint64_t ResidentMemoryBytes();

}  // namespace textgen

#endif  // TEXTGEN_MODEL_RESIDENT_MEMORY_H_
