// The command-line flags that say which model to load and how, defined once
// (one name, default and help text each) for every binary that loads a model:
// server/main.cc, tools/textgen_generate.cc, bench/model_bench.cc and
// bench/loadgen.cc.
//
//   --weights_dtype, --kv_cache_dtype, --cpu_kernels   load_flags.cc
//   --model, --tokenizer                               load_flags_model.cc
//
// The two files are separate objects of the textgen_load_flags library, so a
// binary links the second only if it calls ModelFlag or TokenizerFlag:
// model_bench takes a list of models (--models) and loadgen's --model names a
// server's model as well as a file to load in process, so both keep their own.
#ifndef TEXTGEN_MODEL_FORMATS_LOAD_FLAGS_H_
#define TEXTGEN_MODEL_FORMATS_LOAD_FLAGS_H_

#include <string>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "model/kernels/dispatch.h"
#include "model/kernels/kernels.h"
#include "model/kv_cache.h"
#include "model/weights.h"

ABSL_DECLARE_FLAG(std::string, weights_dtype);
ABSL_DECLARE_FLAG(std::string, kv_cache_dtype);
ABSL_DECLARE_FLAG(std::string, cpu_kernels);

namespace textgen {

// What --cpu_kernels, --weights_dtype and --kv_cache_dtype say.
struct LoadFlags {
  kernels::KernelFamily cpu_kernels = kernels::KernelFamily::kGeneric;
  kernels::WeightType weight_type = kernels::WeightType::kF32;
  KvDtype kv_dtype = KvDtype::kF32;

  LoadOptions load_options() const { return LoadOptions{weight_type}; }
};

// Reads the three flags in that order and selects the kernel family (for the
// whole process: kernels::SelectKernelFamily), so call it once, at start-up,
// before any model is loaded. INVALID_ARGUMENT naming the flag
// ("--weights_dtype: unknown weight type 'x' ...") for a value it refuses.
absl::StatusOr<LoadFlags> ParseLoadFlags();

// --model: a checkpoint directory, a GGUF file or a llama2.c .bin file.
std::string ModelFlag();
// --tokenizer: a tokenizer file or directory; "" = the one the model brings.
std::string TokenizerFlag();

}  // namespace textgen

#endif  // TEXTGEN_MODEL_FORMATS_LOAD_FLAGS_H_
