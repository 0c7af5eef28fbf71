// The benchmarks' --cpu_kernels (model/formats/load_flags.h): which build of
// the kernels textgen_model_bench and textgen_block_kernel_bench time.
#ifndef TEXTGEN_BENCH_CPU_KERNELS_H_
#define TEXTGEN_BENCH_CPU_KERNELS_H_

#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "model/formats/load_flags.h"
#include "model/kernels/dispatch.h"

namespace textgen {

// Uses the family --cpu_kernels names and records it in the benchmark context
// ("cpu_kernels"). Returns its name, or null after printing "<program>:
// --cpu_kernels: <why>" to stderr (an unknown name, or a family this CPU
// cannot run).
inline const char* UseCpuKernelsFlag(const char* program) {
  const absl::StatusOr<kernels::KernelFamily> family =
      kernels::SelectKernelFamily(absl::GetFlag(FLAGS_cpu_kernels));
  if (!family.ok()) {
    std::fprintf(stderr, "%s: --cpu_kernels: %s\n", program,
                 std::string(family.status().message()).c_str());
    return nullptr;
  }
  const char* name = kernels::KernelFamilyName(*family);
  benchmark::AddCustomContext("cpu_kernels", name);
  return name;
}

}  // namespace textgen

#endif  // TEXTGEN_BENCH_CPU_KERNELS_H_
