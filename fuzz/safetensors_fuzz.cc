// Fuzzes the safetensors reader (model/formats/safetensors.h) and, for files it
// accepts, the weight loader on a small GPT-2 config: any bytes must give a
// status, never a crash, a read out of bounds or undefined behaviour, and
// every tensor the reader accepts must be readable.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_check.h"
#include "model/config.h"
#include "model/formats/hf_config.h"
#include "model/formats/safetensors.h"
#include "model/weights.h"

namespace {

// The shape of tests/golden/gpt2_learned, so that well-formed inputs reach
// every step of loading; the budget keeps a hostile config from allocating.
const textgen::ModelConfig& SmallGpt2() {
  static const textgen::ModelConfig config = [] {
    absl::StatusOr<textgen::ModelConfig> c = textgen::ParseModelConfig(
        R"({"model_type": "gpt2", "vocab_size": 4, "n_positions": 4,
            "n_embd": 4, "n_layer": 1, "n_head": 2, "n_inner": 8})",
        "fuzz config");
    FUZZ_CHECK(c.ok());
    return *c;
  }();
  return config;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<textgen::SafetensorsFile> file =
      textgen::SafetensorsFile::FromBytes(
          std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  if (!file.ok()) {
    FUZZ_CHECK(file.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  for (const auto& [name, info] : file->tensors()) {
    FUZZ_CHECK(info.end - info.begin ==
               static_cast<uint64_t>(info.num_elements) *
                   textgen::DTypeSize(info.dtype));
    absl::StatusOr<std::vector<float>> floats = file->ReadFloats(name);
    absl::StatusOr<std::vector<int64_t>> ints = file->ReadInts(name);
    // Every dtype reads as exactly one of the two (BOOL as neither).
    FUZZ_CHECK(!(floats.ok() && ints.ok()));
    if (floats.ok()) {
      FUZZ_CHECK(floats->size() == static_cast<size_t>(info.num_elements));
    }
    if (ints.ok()) {
      FUZZ_CHECK(ints->size() == static_cast<size_t>(info.num_elements));
    }
  }
  // SmallGpt2's config is small: no memory budget to check.
  (void)textgen::LoadWeights(SmallGpt2(), *file);
  return 0;
}
