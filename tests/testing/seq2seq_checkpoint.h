// A small random encoder–decoder checkpoint for tests that need one but not
// its quality: config.json + model.safetensors in the layout model/weights.h
// documents (Hugging Face GPT-2 names, add_cross_attention's for the
// cross-attention, "encoder." for the encoder), and a char_vocab.json whose
// characters and control tokens <s> and </s> fill the vocabulary.
// Deterministic for a seed. The PyTorch parity data are tests/golden/seq2seq_*
// (tools/make_golden.py); this one is for self-consistency (cached ==
// recomputed, batched == alone) and for the engine and service tests.
#ifndef TEXTGEN_TESTS_TESTING_SEQ2SEQ_CHECKPOINT_H_
#define TEXTGEN_TESTS_TESTING_SEQ2SEQ_CHECKPOINT_H_

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/testing/test_util.h"

namespace textgen::testing {

struct Seq2SeqShape {
  int vocab = 40;  // 38 characters + <s> + </s>.
  int context = 48;
  int width = 32;
  int heads = 4;
  int ff = 64;
  int encoder_layers = 2;
  int decoder_layers = 2;
  bool learned_positions = false;
  uint32_t seed = 1;
};

// The characters of the vocabulary: " 0-9a-z" and "-", then <s>, </s>.
inline std::string Seq2SeqChars() {
  return " -0123456789abcdefghijklmnopqrstuvwxyz";
}

// Writes the checkpoint into `dir` (which must exist).
inline void WriteSeq2SeqCheckpoint(const std::string& dir,
                                   const Seq2SeqShape& s = {}) {
  const std::string chars = Seq2SeqChars();
  std::string list;
  for (char c : chars)
    absl::StrAppend(&list, list.empty() ? "" : ",", "\"", std::string(1, c),
                    "\"");
  std::ofstream(dir + "/char_vocab.json")
      << "{\"type\": \"char\", \"chars\": [" << list
      << "], \"control_tokens\": [\"<s>\", \"</s>\"], \"bos_token\": \"<s>\", "
         "\"eos_token\": \"</s>\"}";
  std::ofstream(dir + "/config.json") << absl::StrCat(
      "{\"model_type\": \"gpt2\", \"is_encoder_decoder\": true, "
      "\"add_cross_attention\": true, \"encoder_layers\": ",
      s.encoder_layers, ", \"n_layer\": ", s.decoder_layers,
      ", \"vocab_size\": ", s.vocab, ", \"n_positions\": ", s.context,
      ", \"n_embd\": ", s.width, ", \"n_head\": ", s.heads,
      ", \"n_inner\": ", s.ff, ", \"position_embedding_type\": \"",
      s.learned_positions ? "learned" : "sinusoidal", "\"}");

  std::mt19937 rng(s.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  SafetensorsBuilder b;
  auto tensor = [&](const std::string& name, std::vector<int64_t> shape,
                    float scale, float offset = 0.0f) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(n);
    for (float& x : v) x = offset + scale * normal(rng);
    b.AddF32(name, shape, v);
  };
  const int C = s.width, I = s.ff;
  auto block = [&](const std::string& h) {
    tensor(h + "ln_1.weight", {C}, 0.1f, 1.0f);
    tensor(h + "ln_1.bias", {C}, 0.1f);
    tensor(h + "attn.c_attn.weight", {C, 3 * C}, 0.4f);
    tensor(h + "attn.c_attn.bias", {3 * C}, 0.05f);
    tensor(h + "attn.c_proj.weight", {C, C}, 0.2f);
    tensor(h + "attn.c_proj.bias", {C}, 0.05f);
    tensor(h + "ln_2.weight", {C}, 0.1f, 1.0f);
    tensor(h + "ln_2.bias", {C}, 0.1f);
    tensor(h + "mlp.c_fc.weight", {C, I}, 0.2f);
    tensor(h + "mlp.c_fc.bias", {I}, 0.05f);
    tensor(h + "mlp.c_proj.weight", {I, C}, 0.2f);
    tensor(h + "mlp.c_proj.bias", {C}, 0.05f);
  };
  tensor("wte.weight", {s.vocab, C}, 0.5f);
  if (s.learned_positions) {
    tensor("wpe.weight", {s.context, C}, 0.3f);
    tensor("encoder.wpe.weight", {s.context, C}, 0.3f);
  }
  for (int i = 0; i < s.encoder_layers; ++i) {
    block(absl::StrCat("encoder.h.", i, "."));
  }
  tensor("encoder.ln_f.weight", {C}, 0.1f, 1.0f);
  tensor("encoder.ln_f.bias", {C}, 0.1f);
  for (int i = 0; i < s.decoder_layers; ++i) {
    const std::string h = absl::StrCat("h.", i, ".");
    block(h);
    tensor(h + "ln_cross_attn.weight", {C}, 0.1f, 1.0f);
    tensor(h + "ln_cross_attn.bias", {C}, 0.1f);
    tensor(h + "crossattention.q_attn.weight", {C, C}, 0.4f);
    tensor(h + "crossattention.q_attn.bias", {C}, 0.05f);
    tensor(h + "crossattention.c_attn.weight", {C, 2 * C}, 0.4f);
    tensor(h + "crossattention.c_attn.bias", {2 * C}, 0.05f);
    tensor(h + "crossattention.c_proj.weight", {C, C}, 0.2f);
    tensor(h + "crossattention.c_proj.bias", {C}, 0.05f);
  }
  tensor("ln_f.weight", {C}, 0.1f, 1.0f);
  tensor("ln_f.bias", {C}, 0.1f);
  WriteFile(dir + "/model.safetensors", b.Build());
}

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_TESTING_SEQ2SEQ_CHECKPOINT_H_
