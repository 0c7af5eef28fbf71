#include "model/kernels/dispatch.h"

#include <atomic>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/kernels/table.h"

namespace textgen::kernels {
namespace {

constexpr KernelFamily kFamilies[] = {
    KernelFamily::kGeneric, KernelFamily::kAvx2, KernelFamily::kAvx512};

std::vector<std::string>& HiddenFeatures() {
  static std::vector<std::string> hidden;
  return hidden;
}

// The CPU features a family's build is compiled for (model/CMakeLists.txt):
// each must be present, as __builtin_cpu_supports names it.
std::vector<const char*> MissingFeatures(KernelFamily family) {
  std::vector<const char*> missing;
  auto need = [&](bool present, const char* name) {
    for (const std::string& hidden : HiddenFeatures()) {
      if (hidden == name) present = false;
    }
    if (!present) missing.push_back(name);
  };
  __builtin_cpu_init();
  // x86-64-v2, which every family's build assumes.
  need(__builtin_cpu_supports("popcnt"), "popcnt");
  need(__builtin_cpu_supports("ssse3"), "ssse3");
  need(__builtin_cpu_supports("sse4.1"), "sse4.1");
  need(__builtin_cpu_supports("sse4.2"), "sse4.2");
  if (family == KernelFamily::kGeneric) return missing;
  // x86-64-v3.
  need(__builtin_cpu_supports("avx"), "avx");
  need(__builtin_cpu_supports("avx2"), "avx2");
  need(__builtin_cpu_supports("fma"), "fma");
  need(__builtin_cpu_supports("bmi"), "bmi");
  need(__builtin_cpu_supports("bmi2"), "bmi2");
  if (family == KernelFamily::kAvx2) return missing;
  // x86-64-v4 + VNNI.
  need(__builtin_cpu_supports("avx512f"), "avx512f");
  need(__builtin_cpu_supports("avx512bw"), "avx512bw");
  need(__builtin_cpu_supports("avx512dq"), "avx512dq");
  need(__builtin_cpu_supports("avx512vl"), "avx512vl");
  need(__builtin_cpu_supports("avx512cd"), "avx512cd");
  need(__builtin_cpu_supports("avx512vnni"), "avx512vnni");
  return missing;
}

const KernelTable& TableOf(KernelFamily family) {
  switch (family) {
    case KernelFamily::kGeneric:
      return generic::kTable;
    case KernelFamily::kAvx2:
      return avx2::kTable;
    case KernelFamily::kAvx512:
      return avx512::kTable;
  }
  return generic::kTable;
}

struct Active {
  std::atomic<KernelFamily> family;
  std::atomic<const KernelTable*> table;
};

// Chosen on first use: the best family, until UseKernelFamily.
Active& ActiveState() {
  // Built in place (C++17 guaranteed elision: atomics do not move).
  static Active active = [] {
    const KernelFamily best = BestKernelFamily();
    return Active{{best}, {&TableOf(best)}};
  }();
  return active;
}

}  // namespace

const char* KernelFamilyName(KernelFamily family) {
  return TableOf(family).name;
}

bool CpuRuns(KernelFamily family) { return MissingFeatures(family).empty(); }

std::vector<KernelFamily> RunnableKernelFamilies() {
  std::vector<KernelFamily> families;
  for (KernelFamily f : kFamilies) {
    if (CpuRuns(f)) families.push_back(f);
  }
  return families;
}

KernelFamily BestKernelFamily() {
  KernelFamily best = KernelFamily::kGeneric;
  for (KernelFamily f : kFamilies) {
    if (CpuRuns(f)) best = f;
  }
  return best;
}

absl::Status UseKernelFamily(KernelFamily family) {
  const std::vector<const char*> missing = MissingFeatures(family);
  if (!missing.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this CPU cannot run the ", KernelFamilyName(family),
        " kernels: it lacks ", absl::StrJoin(missing, ", "), " (it runs: ",
        [] {
          std::vector<std::string> names;
          for (KernelFamily f : RunnableKernelFamilies()) {
            names.push_back(KernelFamilyName(f));
          }
          return absl::StrJoin(names, ", ");
        }(),
        ")"));
  }
  Active& active = ActiveState();
  active.family.store(family, std::memory_order_relaxed);
  active.table.store(&TableOf(family), std::memory_order_release);
  return absl::OkStatus();
}

KernelFamily ActiveKernelFamily() {
  return ActiveState().family.load(std::memory_order_relaxed);
}

absl::StatusOr<KernelFamily> SelectKernelFamily(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  KernelFamily family;
  if (lower == "auto") {
    family = BestKernelFamily();
  } else if (lower == "generic") {
    family = KernelFamily::kGeneric;
  } else if (lower == "avx2") {
    family = KernelFamily::kAvx2;
  } else if (lower == "avx512") {
    family = KernelFamily::kAvx512;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown CPU kernel family '", name, "' (expected one of ",
                     kKernelFamilyFlagValues, ")"));
  }
  if (absl::Status s = UseKernelFamily(family); !s.ok()) return s;
  return family;
}

void PretendCpuLacksForTesting(absl::string_view feature) {
  if (feature.empty()) {
    HiddenFeatures().clear();
  } else {
    HiddenFeatures().emplace_back(feature);
  }
}

const KernelTable& ActiveKernelTable() {
  return *ActiveState().table.load(std::memory_order_acquire);
}

}  // namespace textgen::kernels
