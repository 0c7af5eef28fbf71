// Fuzzes the config.json parser (model/config.h) and the memory estimate of
// what it accepts (model/formats/memory_budget.h): any text gives a config that
// validates or an INVALID_ARGUMENT, and the estimate of an accepted config is
// finite and non-negative, so the budget check can be trusted with it.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_check.h"
#include "model/config.h"
#include "model/formats/hf_config.h"
#include "model/formats/memory_budget.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<textgen::ModelConfig> config =
      textgen::ParseModelConfig(text, "config.json");
  if (!config.ok()) {
    FUZZ_CHECK(config.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  FUZZ_CHECK(config->Validate().ok());
  (void)textgen::DescribeConfig(*config);
  for (auto type :
       {textgen::kernels::WeightType::kF32, textgen::kernels::WeightType::kBF16,
        textgen::kernels::WeightType::kInt8}) {
    // f32 keys and values for f32 weights, bf16 ones otherwise.
    const textgen::KvDtype kv = type == textgen::kernels::WeightType::kF32
                                    ? textgen::KvDtype::kF32
                                    : textgen::KvDtype::kBf16;
    const textgen::ModelMemory m =
        textgen::EstimateModelMemory(*config, type, kv);
    const double total =
        m.Total(/*kv_slots=*/9, /*kv_tokens=*/4096, /*sequences=*/9);
    FUZZ_CHECK(std::isfinite(total) && total > 0);
    textgen::MemoryBudget budget;
    budget.bytes = 1 << 30;
    budget.kv_cache_slots = 1;
    budget.kv_cache_tokens = 4096;
    budget.kv_dtype = kv;
    budget.sequence_slots = 9;
    const absl::Status s =
        textgen::CheckMemoryBudget(*config, type, budget, "fuzz");
    FUZZ_CHECK(s.ok() || s.code() == absl::StatusCode::kResourceExhausted);
  }
  return 0;
}
