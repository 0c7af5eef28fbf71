// Fuzzes the GGUF reader (model/formats/gguf.h) and, for files it accepts, what
// is built on it: every metadata value decoded through the typed getters, every
// tensor widened to float, the model config and checkpoint (under a small
// memory budget) and the tokenizer of the `tokenizer.ggml.*` keys, which is
// then run as tokenizer_fuzz.h does on a fixed text and a fixed id stream.
// Any bytes must give a status, never a crash, a read out of bounds, a huge
// allocation or undefined behaviour.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "fuzz/tokenizer_fuzz.h"
#include "model/formats/gguf.h"
#include "model/formats/gguf_checkpoint.h"
#include "model/formats/gguf_tokenizer.h"
#include "model/formats/memory_budget.h"

namespace {

using textgen::GgufValueType;

bool IsInteger(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
      return true;
    default:
      return false;
  }
}

bool IsFloat(GgufValueType type) {
  return type == GgufValueType::kFloat32 || type == GgufValueType::kFloat64;
}

// Every value the reader accepted decodes with the getter of its type.
void ReadEveryValue(const textgen::GgufFile& file) {
  for (const textgen::GgufKeyValue& kv : file.metadata()) {
    FUZZ_CHECK(file.FindKey(kv.key) == &kv);
    if (kv.type == GgufValueType::kArray) {
      const GgufValueType e = kv.element_type;
      if (e == GgufValueType::kString) {
        auto v = file.GetStringArray(kv.key);
        FUZZ_CHECK(v.ok() && v->size() == kv.count);
      } else if (IsInteger(e)) {
        auto v = file.GetIntArray(kv.key);
        FUZZ_CHECK(v.ok() && v->size() == kv.count);
      } else if (IsFloat(e)) {
        auto v = file.GetFloatArray(kv.key);
        FUZZ_CHECK(v.ok() && v->size() == kv.count);
      } else if (e == GgufValueType::kBool) {
        auto v = file.GetBoolArray(kv.key);
        FUZZ_CHECK(v.ok() && v->size() == kv.count);
      } else {  // Arrays of arrays: no getter; the wrong-type error instead.
        FUZZ_CHECK(!file.GetIntArray(kv.key).ok());
      }
      continue;
    }
    if (kv.type == GgufValueType::kString) {
      FUZZ_CHECK(file.GetString(kv.key).ok());
      FUZZ_CHECK(!file.GetUint(kv.key).ok());
    } else if (IsInteger(kv.type)) {
      // GetInt refuses a UINT64 above INT64_MAX and GetUint a negative
      // value, so every integer reads through one of the two.
      const bool as_int = file.GetInt(kv.key).ok();
      const bool as_uint = file.GetUint(kv.key).ok();
      FUZZ_CHECK(as_int || as_uint);
      if (kv.type != GgufValueType::kUint64) FUZZ_CHECK(as_int);
      FUZZ_CHECK(!file.GetString(kv.key).ok());
    } else if (IsFloat(kv.type)) {
      FUZZ_CHECK(file.GetFloat(kv.key).ok());
    } else {
      FUZZ_CHECK(kv.type == GgufValueType::kBool);
      FUZZ_CHECK(file.GetBool(kv.key).ok());
    }
  }
  FUZZ_CHECK(file.GetString("fuzz.no such key").status().code() ==
             absl::StatusCode::kNotFound);
}

void ReadEveryTensor(const textgen::GgufFile& file) {
  for (const textgen::GgufTensorInfo& tensor : file.tensors()) {
    FUZZ_CHECK(file.FindTensor(tensor.name) == &tensor);
    FUZZ_CHECK(file.RawData(tensor).size() == tensor.bytes);
    FUZZ_CHECK(file.ReadFloats(tensor).size() == tensor.num_elements);
  }
}

// Fixed inputs for FuzzTokenizer: a text to encode (first byte even) and a
// stream of 16-bit ids to decode (first byte odd).
const std::string& EncodeInput() {
  static const std::string input =
      std::string(1, '\0') +
      "Hello wor\xC3\xB6ld, the \xE4\xB8\xAD <s> 12 \xFF";
  return input;
}
const std::string& DecodeInput() {
  static const std::string input = [] {
    std::string s(1, '\1');
    for (int id : {1, 0, 3, 4, 5, 35, 36, 37, 38, 39, 2, 200, 7}) {
      s += static_cast<char>(id & 0xFF);
      s += static_cast<char>(id >> 8);
    }
    return s;
  }();
  return input;
}

void RunTokenizer(const textgen::Tokenizer& tokenizer) {
  for (const std::string* input : {&EncodeInput(), &DecodeInput()}) {
    textgen::FuzzTokenizer(tokenizer, /*lossless=*/false,
                           reinterpret_cast<const uint8_t*>(input->data()),
                           input->size());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<textgen::GgufFile> file = textgen::GgufFile::FromBytes(
      std::string(reinterpret_cast<const char*>(data), size), "fuzz.gguf");
  if (!file.ok()) {
    FUZZ_CHECK(file.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  ReadEveryValue(*file);
  ReadEveryTensor(*file);
  // Loaded as the model loader would, within a 64 MiB budget.
  absl::StatusOr<textgen::ModelConfig> config = textgen::GgufModelConfig(*file);
  textgen::MemoryBudget budget;
  budget.bytes = 64 << 20;
  if (config.ok() &&
      textgen::CheckMemoryBudget(*config, textgen::kernels::WeightType::kF32,
                                 budget, file->source())
          .ok()) {
    (void)textgen::LoadGgufCheckpoint(*file);
  }
  absl::StatusOr<std::unique_ptr<textgen::Tokenizer>> tokenizer =
      textgen::LoadGgufTokenizer(*file);
  if (!tokenizer.ok()) {
    // A required key that is absent (e.g. tokenizer.ggml.merges of a "gpt2"
    // tokenizer) is the getters' NOT_FOUND; anything else INVALID_ARGUMENT.
    const absl::StatusCode code = tokenizer.status().code();
    if (code != absl::StatusCode::kInvalidArgument &&
        code != absl::StatusCode::kNotFound) {
      std::fprintf(stderr, "%s\n", tokenizer.status().ToString().c_str());
    }
    FUZZ_CHECK(code == absl::StatusCode::kInvalidArgument ||
               code == absl::StatusCode::kNotFound);
  } else if (*tokenizer != nullptr) {
    RunTokenizer(**tokenizer);
  }
  return 0;
}
