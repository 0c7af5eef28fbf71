// Encoder–decoder models in the decoder itself: the encoder runs once per
// source, the cross-attention keys and values stay in the slot, and the
// decoder's guarantees hold with them — KV-cached decoding equals full
// recomputation and a sequence's numbers do not depend on its batch, bit for
// bit; errors leave the cache untouched. Parity with PyTorch is in
// parity_test.cc (tests/golden/seq2seq_*).
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "model/checkpoint.h"
#include "model/decoder.h"
#include "model/formats/hf_checkpoint.h"
#include "model/formats/hf_config.h"
#include "model/formats/memory_budget.h"
#include "model/kv_cache.h"
#include "model/text/char_tokenizer.h"
#include "tests/testing/seq2seq_checkpoint.h"
#include "tests/testing/test_util.h"

namespace textgen {
namespace {

class Seq2SeqTest : public ::testing::Test {
 protected:
  static std::unique_ptr<Decoder> Load(const testing::Seq2SeqShape& shape,
                                       int threads = 1) {
    const std::string dir = testing::FreshTempDir(
        absl::StrCat("seq2seq_", shape.seed, shape.learned_positions));
    testing::WriteSeq2SeqCheckpoint(dir, shape);
    auto checkpoint = LoadCheckpoint(dir);
    EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
    if (!checkpoint.ok()) return nullptr;
    DecoderOptions options;
    options.threads = threads;
    options.min_parallel_work = 0;
    return std::make_unique<Decoder>(*std::move(checkpoint), options);
  }

  static std::vector<int> Ids(int n, int seed, int vocab) {
    std::vector<int> ids(n);
    for (int i = 0; i < n; ++i) ids[i] = (seed * 7 + i * 13) % (vocab - 2);
    return ids;
  }
};

// Runs the encoder on `source` into slot 0 of a fresh cache and decodes
// `target` in one pass; returns every row of logits.
Activations OnePass(Decoder& decoder, const std::vector<int>& source,
                    const std::vector<int>& target) {
  KvCache cache(decoder.config(), 1);
  EncodeResult encoded;
  EXPECT_TRUE(decoder.Encode({{0, source}}, cache, {}, encoded).ok());
  ForwardResult result;
  EXPECT_TRUE(decoder
                  .Forward({{0, target}}, cache,
                           {LogitsMode::kAllTokens, false}, result)
                  .ok());
  return result.logits;
}

TEST_F(Seq2SeqTest, ConfigAndWeightsLoad) {
  auto decoder = Load({});
  ASSERT_NE(decoder, nullptr);
  const ModelConfig& c = decoder->config();
  EXPECT_TRUE(c.is_encoder_decoder());
  EXPECT_EQ(c.encoder_layers, 2);
  EXPECT_STREQ(ArchitectureName(c), "encoder-decoder");
  EXPECT_EQ(decoder->weights().encoder_layers.size(), 2u);
  EXPECT_EQ(decoder->weights().layers[0].cross_q.cols(), c.d_model);
}

TEST_F(Seq2SeqTest, MemoryEstimateCountsEncoderAndCrossAttention) {
  testing::Seq2SeqShape shape;
  shape.width = 64;  // Whole panels, so the packed sizes are the raw ones.
  shape.ff = 128;
  shape.vocab = 64;
  auto decoder = Load(shape);
  ASSERT_NE(decoder, nullptr);
  const ModelConfig& c = decoder->config();
  const ModelMemory m = EstimateModelMemory(c, kernels::WeightType::kF32);
  const double held = static_cast<double>(decoder->weights().MemoryBytes());
  EXPECT_NEAR(m.weights + m.positions, held, 0.02 * held);
  // A source as long as the context: every decoder layer's K and V.
  EXPECT_EQ(m.cross_kv_per_slot,
            4.0 * c.context_length * 2 * c.n_layers * c.d_model);
  KvCache cache(c, 1);
  const size_t pool = cache.MemoryBytes();
  EncodeResult encoded;
  const std::vector<int> source(c.context_length, 1);
  ASSERT_TRUE(decoder->Encode({{0, source}}, cache, {}, encoded).ok());
  EXPECT_EQ(static_cast<double>(cache.MemoryBytes() - pool),
            m.cross_kv_per_slot);
}

TEST_F(Seq2SeqTest, CachedDecodingEqualsRecomputationBitForBit) {
  for (bool learned : {false, true}) {
    testing::Seq2SeqShape shape;
    shape.learned_positions = learned;
    shape.seed = learned ? 5 : 4;
    auto decoder = Load(shape);
    ASSERT_NE(decoder, nullptr);
    const std::vector<int> source = Ids(19, 3, shape.vocab);
    const std::vector<int> target = Ids(11, 8, shape.vocab);
    const Activations full = OnePass(*decoder, source, target);

    // Token by token, and in uneven chunks, from the cache.
    for (int chunk : {1, 4}) {
      KvCache cache(decoder->config(), 1);
      EncodeResult encoded;
      ASSERT_TRUE(decoder->Encode({{0, source}}, cache, {}, encoded).ok());
      ForwardResult result;
      for (int t = 0; t < static_cast<int>(target.size()); t += chunk) {
        const int n = std::min<int>(chunk, target.size() - t);
        const SequenceChunk seq{0, absl::MakeConstSpan(target).subspan(t, n)};
        ASSERT_TRUE(
            decoder
                ->Forward({seq}, cache, {LogitsMode::kAllTokens, false}, result)
                .ok());
        for (int r = 0; r < n; ++r) {
          ASSERT_EQ(0, std::memcmp(result.logits.row(r).data(),
                                   full.row(t + r).data(),
                                   full.cols() * sizeof(float)))
              << "learned=" << learned << " chunk " << chunk << " position "
              << t + r;
        }
      }
    }
  }
}

TEST_F(Seq2SeqTest, BatchOfDifferentSourcesEqualsEachAloneBitForBit) {
  auto decoder = Load({});
  ASSERT_NE(decoder, nullptr);
  const int V = decoder->config().vocab_size;
  const std::vector<std::vector<int>> sources = {Ids(23, 1, V), Ids(7, 2, V),
                                                 Ids(40, 3, V)};
  const std::vector<std::vector<int>> targets = {Ids(5, 4, V), Ids(12, 5, V),
                                                 Ids(1, 6, V)};
  std::vector<Activations> alone;
  for (size_t i = 0; i < sources.size(); ++i) {
    alone.push_back(OnePass(*decoder, sources[i], targets[i]));
  }
  // All three encoded in one batch (slots in a shuffled order), then decoded
  // in one batch; maps captured as well.
  KvCache cache(decoder->config(), 4);
  const int slots[] = {2, 0, 3};
  std::vector<SourceChunk> batch;
  for (size_t i = 0; i < sources.size(); ++i) {
    batch.push_back({slots[i], sources[i]});
  }
  EncodeResult encoded;
  ASSERT_TRUE(
      decoder->Encode(batch, cache, {LogitsMode::kAllTokens, true}, encoded)
          .ok());
  std::vector<SequenceChunk> decode;
  for (size_t i = 0; i < targets.size(); ++i) {
    decode.push_back({slots[i], targets[i]});
  }
  ForwardResult result;
  ASSERT_TRUE(
      decoder->Forward(decode, cache, {LogitsMode::kAllTokens, true}, result)
          .ok());
  for (size_t i = 0; i < sources.size(); ++i) {
    for (size_t t = 0; t < targets[i].size(); ++t) {
      ASSERT_EQ(0, std::memcmp(
                       result.logits.row(result.first_row[i] + t).data(),
                       alone[i].row(t).data(), alone[i].cols() * sizeof(float)))
          << "sequence " << i << " position " << t;
    }
    // Every map is a distribution over the sequence's own keys: its source
    // for the encoder and cross-attention, its positions so far (causal) for
    // self-attention.
    const AttentionMaps& enc = encoded.attention[i];
    const AttentionMaps& cross = result.cross_attention[i];
    const AttentionMaps& self = result.attention[i];
    const int S = static_cast<int>(sources[i].size());
    const int T = static_cast<int>(targets[i].size());
    EXPECT_EQ(enc.kind, AttentionKind::kEncoderSelf);
    EXPECT_EQ(cross.kind, AttentionKind::kCross);
    EXPECT_EQ(self.kind, AttentionKind::kDecoderSelf);
    EXPECT_EQ(enc.n_layers, 2);
    EXPECT_EQ(enc.n_queries, S);
    EXPECT_EQ(enc.n_keys, S);
    EXPECT_EQ(cross.n_queries, T);
    EXPECT_EQ(cross.n_keys, S);
    for (int l = 0; l < 2; ++l) {
      for (int h = 0; h < decoder->config().n_heads; ++h) {
        for (int q = 0; q < S; ++q) {
          const float* row = enc.row(l, h, q);
          EXPECT_NEAR(std::accumulate(row, row + S, 0.0), 1.0, 1e-5);
        }
        for (int q = 0; q < T; ++q) {
          const float* row = cross.row(l, h, q);
          EXPECT_NEAR(std::accumulate(row, row + S, 0.0), 1.0, 1e-5);
          for (int k = q + 1; k < T; ++k) EXPECT_EQ(self.at(l, h, q, k), 0.0f);
        }
      }
    }
  }
}

TEST_F(Seq2SeqTest, TwoThreadsEqualOneBitForBit) {
  auto one = Load({}, 1);
  auto two = Load({}, 2);
  ASSERT_NE(one, nullptr);
  ASSERT_NE(two, nullptr);
  const int V = one->config().vocab_size;
  const Activations a = OnePass(*one, Ids(31, 2, V), Ids(9, 3, V));
  const Activations b = OnePass(*two, Ids(31, 2, V), Ids(9, 3, V));
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

TEST_F(Seq2SeqTest, RefusesBadSourcesWithoutTouchingTheCache) {
  auto decoder = Load({});
  ASSERT_NE(decoder, nullptr);
  const ModelConfig& c = decoder->config();
  KvCache cache(c, 2);
  EncodeResult encoded;
  ForwardResult result;
  const std::vector<int> ok = {1, 2, 3};
  const std::vector<int> target = {c.vocab_size - 2};
  // Decoding before encoding: the slot has no source.
  absl::Status s = decoder->Forward({{0, target}}, cache, {}, result);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("no source"), std::string::npos) << s;

  const std::vector<int> empty, outside = {1, c.vocab_size},
                                too_long(c.context_length + 1, 1);
  struct Case {
    std::vector<SourceChunk> batch;
    absl::StatusCode code;
    const char* says;
  } cases[] = {
      {{}, absl::StatusCode::kInvalidArgument, "empty batch"},
      {{{0, empty}}, absl::StatusCode::kInvalidArgument, "no tokens"},
      {{{0, outside}}, absl::StatusCode::kInvalidArgument, "vocabulary"},
      {{{2, ok}}, absl::StatusCode::kInvalidArgument, "outside"},
      {{{0, ok}, {0, ok}}, absl::StatusCode::kInvalidArgument, "twice"},
      {{{0, too_long}}, absl::StatusCode::kOutOfRange, "context length"},
  };
  for (const Case& bad : cases) {
    s = decoder->Encode(bad.batch, cache, {}, encoded);
    EXPECT_EQ(s.code(), bad.code) << s;
    EXPECT_NE(s.message().find(bad.says), std::string::npos) << s;
    EXPECT_EQ(cache.source_length(0), 0);
  }
  // A slot holds one source until cleared.
  ASSERT_TRUE(decoder->Encode({{0, ok}}, cache, {}, encoded).ok());
  EXPECT_EQ(cache.source_length(0), 3);
  s = decoder->Encode({{0, ok}}, cache, {}, encoded);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("not empty"), std::string::npos) << s;
  cache.Clear(0);
  EXPECT_EQ(cache.source_length(0), 0);
  EXPECT_TRUE(decoder->Encode({{0, ok}}, cache, {}, encoded).ok());
}

TEST_F(Seq2SeqTest, DecoderOnlyModelsHaveNoEncoder) {
  auto decoder = testing::LoadDecoder(testing::GoldenDir("gpt2_learned"));
  ASSERT_NE(decoder, nullptr);
  EXPECT_FALSE(decoder->config().is_encoder_decoder());
  EXPECT_STREQ(ArchitectureName(decoder->config()), "gpt2");
  KvCache cache(decoder->config(), 1);
  EncodeResult encoded;
  const std::vector<int> source = {1, 2};
  const absl::Status s = decoder->Encode({{0, source}}, cache, {}, encoded);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
}

TEST(Seq2SeqConfigTest, RefusesWhatItCannotServe) {
  const std::string base =
      R"("model_type": "gpt2", "vocab_size": 10, "n_positions": 8,
         "n_embd": 8, "n_layer": 1, "n_head": 2)";
  struct Case {
    std::string extra;
    const char* says;
  } cases[] = {
      {R"("is_encoder_decoder": true)", "encoder_layers"},
      {R"("is_encoder_decoder": true, "encoder_layers": 0)", "encoder_layers"},
      {R"("is_encoder_decoder": true, "encoder_layers": 1,
          "add_cross_attention": false)",
       "add_cross_attention"},
      {R"("add_cross_attention": true)", "add_cross_attention"},
  };
  for (const Case& bad : cases) {
    auto config =
        ParseModelConfig(absl::StrCat("{", base, ",", bad.extra, "}"), "c");
    ASSERT_FALSE(config.ok()) << bad.extra;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(config.status().message().find(bad.says), std::string::npos)
        << config.status();
  }
  auto good =
      ParseModelConfig(absl::StrCat("{", base, R"(, "is_encoder_decoder": true,
                   "encoder_layers": 3})"),
                       "c");
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->encoder_layers, 3);
  EXPECT_NE(DescribeConfig(*good).find("3 encoder layers"), std::string::npos);
}

TEST(CharTokenizerControlTokensTest, BosAndEosFollowTheCharacters) {
  auto t = CharTokenizer::FromJson(
      R"({"type": "char", "chars": ["a", "b"], "control_tokens": ["<s>", "</s>"],
          "bos_token": "<s>", "eos_token": "</s>"})",
      "v");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->vocab_size(), 4);
  EXPECT_EQ((*t)->bos_id(), 2);
  EXPECT_EQ((*t)->eos_id(), 3);
  EXPECT_TRUE((*t)->EndsSequence(3));
  EXPECT_EQ((*t)->Decode({2, 0, 1, 3}).value(), "ab");
  // "<s>" typed as text is characters, not the control token (and here not
  // in the vocabulary at all).
  EXPECT_FALSE((*t)->Encode("<s>").ok());
  for (const char* bad : {
           R"({"type": "char", "chars": ["a"], "control_tokens": "<s>"})",
           R"({"type": "char", "chars": ["a"], "control_tokens": ["", "x"]})",
           R"({"type": "char", "chars": ["a"], "control_tokens": ["x", "x"]})",
           R"({"type": "char", "chars": ["a"], "bos_token": "<s>"})",
       }) {
    EXPECT_EQ(CharTokenizer::FromJson(bad, "v").status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

}  // namespace
}  // namespace textgen
