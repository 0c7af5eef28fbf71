#include "model/formats/load_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"

ABSL_FLAG(std::string, weights_dtype, "f32",
          "How weight matrices are held in memory, whatever the file stores: "
          "f32, bf16 (half the bytes and memory traffic, f32 arithmetic), "
          "int8 (GGUF Q8_0: blocks of 32 with a scale, 0.28x the bytes; "
          "activations quantized alike on the fly, as llama.cpp; a Q8_0 "
          "file's blocks are kept as stored), or w8a32 (the same Q8_0 "
          "weights times f32 activations: closer to f32, more arithmetic). "
          "A GGUF file's block-quantized matrices (Q4_K, Q6_K, Q4_0, ...) "
          "are kept as stored whatever this says; with int8 their products "
          "also take int8 activations (as llama.cpp's; not IQ4_NL/IQ4_XS), "
          "otherwise f32 ones (the dequantized weights' exact product)");
ABSL_FLAG(std::string, kv_cache_dtype, "f32",
          "How the KV cache holds keys and values: f32 (exact), or bf16 "
          "(half the memory, so twice the positions per byte, and half the "
          "bytes attention reads per step: faster batched decoding; the "
          "shipped model's top-1 agrees with f32 at 99.9 %)");
ABSL_FLAG(std::string, cpu_kernels, "auto",
          "Which build of the kernels runs: auto|generic|avx2|avx512 (auto: "
          "the best this CPU runs; a family the CPU cannot run is refused)");

namespace textgen {
namespace {

absl::Status FlagError(const char* flag, const absl::Status& status) {
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, ": ", status.message()));
}

}  // namespace

absl::StatusOr<LoadFlags> ParseLoadFlags() {
  LoadFlags flags;
  absl::StatusOr<kernels::KernelFamily> family =
      kernels::SelectKernelFamily(absl::GetFlag(FLAGS_cpu_kernels));
  if (!family.ok()) return FlagError("cpu_kernels", family.status());
  flags.cpu_kernels = *family;
  absl::StatusOr<kernels::WeightType> weight_type =
      ParseWeightType(absl::GetFlag(FLAGS_weights_dtype));
  if (!weight_type.ok())
    return FlagError("weights_dtype", weight_type.status());
  flags.weight_type = *weight_type;
  absl::StatusOr<KvDtype> kv_dtype =
      ParseKvDtype(absl::GetFlag(FLAGS_kv_cache_dtype));
  if (!kv_dtype.ok()) return FlagError("kv_cache_dtype", kv_dtype.status());
  flags.kv_dtype = *kv_dtype;
  return flags;
}

}  // namespace textgen
