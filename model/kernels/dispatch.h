// Which build of the kernels (model/kernels/kernels.h) runs: one binary carries
// several, compiled for different CPU targets, and picks one when it starts.
//
//   generic  x86-64-v2 (SSE4.2): runs anywhere the binary does
//   avx2     x86-64-v3: AVX2, FMA, F16C, BMI2
//   avx512   x86-64-v4 (AVX-512 F/BW/DQ/VL/CD) + VNNI
//
// By default the best family this CPU runs (CPUID) is used. A binary calls
// SelectKernelFamily once at start-up, before any Decoder runs, with its
// --cpu_kernels flag; tests switch between families the same way, between
// forward passes. The choice is process-wide and the same for every batch
// size, so a sequence's logits never depend on what else is in its batch.
#ifndef TEXTGEN_MODEL_KERNELS_DISPATCH_H_
#define TEXTGEN_MODEL_KERNELS_DISPATCH_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace textgen::kernels {

enum class KernelFamily { kGeneric, kAvx2, kAvx512 };

// The values --cpu_kernels takes, for --help.
inline constexpr char kKernelFamilyFlagValues[] = "auto|generic|avx2|avx512";

// "generic", "avx2" or "avx512".
const char* KernelFamilyName(KernelFamily family);

// Whether this CPU has every instruction the family's build may use.
bool CpuRuns(KernelFamily family);

// The families this CPU runs, most capable last.
std::vector<KernelFamily> RunnableKernelFamilies();

// The most capable family this CPU runs: what "auto" picks.
KernelFamily BestKernelFamily();

// Makes `family` the one every kernel call uses from now on.
// FAILED_PRECONDITION if this CPU cannot run it (naming the missing
// features).
absl::Status UseKernelFamily(KernelFamily family);

// The family in use.
KernelFamily ActiveKernelFamily();

// Parses a --cpu_kernels value ("auto" or a family name, any case) and uses
// it; INVALID_ARGUMENT for an unknown name, FAILED_PRECONDITION for a family
// this CPU cannot run. Returns the family now in use.
absl::StatusOr<KernelFamily> SelectKernelFamily(absl::string_view name);

// Tests only: from now on, CpuRuns and UseKernelFamily treat `feature` (a
// __builtin_cpu_supports name, e.g. "avx512vnni") as absent, so the refusal of
// a family this CPU cannot run can be tested on any CPU. Not thread-safe; ""
// clears the list.
void PretendCpuLacksForTesting(absl::string_view feature);

}  // namespace textgen::kernels

#endif  // TEXTGEN_MODEL_KERNELS_DISPATCH_H_
