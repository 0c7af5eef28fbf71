// Encoder–decoder models against PyTorch.
//
// tests/golden/seq2seq_<config>/ holds a random-weight encoder–decoder
// checkpoint and what tools/seq2seq_model.py computes for a padded batch of
// three sources and targets of different lengths (written by
// tools/make_golden.py, verified by tools/check_golden.py): logits and every
// attention map — the encoder's self-attention, the decoder's, and
// cross-attention. The C++ side runs the three as one batch, packed without
// padding (a source attends to its own positions only), and must give:
//   - logits within 1e-4 and every map within 1e-5 of PyTorch's, on each
//     sequence's own positions; PyTorch's weights on padded keys are exactly 0
//     (the reference masks them), so nothing is lost by not having them;
//   - the same logits, bit for bit, for each sequence alone, and when its
//     target is decoded token by token from the cache.
// "[parity] ..." lines print the measured max |Δ| per config.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "model/checkpoint.h"
#include "model/decoder.h"
#include "model/formats/hf_checkpoint.h"
#include "model/formats/safetensors.h"
#include "model/kv_cache.h"
#include "tests/testing/test_util.h"

namespace textgen {
namespace {

constexpr float kLogitsVsTorch = 1e-4f;
constexpr float kAttentionVsTorch = 1e-5f;

// One golden batch, padded as PyTorch ran it: B sequences, sources padded to
// S, targets to T.
struct Golden {
  int B = 0, S = 0, T = 0;
  std::vector<std::vector<int>> sources, targets;  // Unpadded.
  std::vector<float> logits;                       // [B, T, V]
  // Per layer: [B, H, S, S], [B, H, T, T], [B, H, T, S].
  std::vector<std::vector<float>> encoder, decoder, cross;
};

class Seq2SeqParityTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string dir = testing::GoldenDir(GetParam());
    auto checkpoint = LoadCheckpoint(dir);
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    decoder_ = std::make_unique<Decoder>(*std::move(checkpoint));
    ASSERT_TRUE(config().is_encoder_decoder());
    LoadGolden(dir + "/golden.safetensors");
  }

  const ModelConfig& config() const { return decoder_->config(); }

  void LoadGolden(const std::string& path) {
    auto file = SafetensorsFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    auto ints = [&](const char* name) {
      auto v = file->ReadInts(name);
      EXPECT_TRUE(v.ok()) << v.status();
      return v.ok() ? *v : std::vector<int64_t>{};
    };
    const std::vector<int64_t> source_lengths = ints("source_lengths");
    const std::vector<int64_t> target_lengths = ints("target_lengths");
    const std::vector<int64_t> source_ids = ints("source_ids");
    const std::vector<int64_t> target_ids = ints("target_ids");
    g_.B = static_cast<int>(source_lengths.size());
    ASSERT_EQ(g_.B, 3);
    g_.S = static_cast<int>(source_ids.size()) / g_.B;
    g_.T = static_cast<int>(target_ids.size()) / g_.B;
    for (int b = 0; b < g_.B; ++b) {
      g_.sources.emplace_back(
          source_ids.begin() + b * g_.S,
          source_ids.begin() + b * g_.S + source_lengths[b]);
      g_.targets.emplace_back(
          target_ids.begin() + b * g_.T,
          target_ids.begin() + b * g_.T + target_lengths[b]);
    }
    const int64_t B = g_.B, S = g_.S, T = g_.T, H = config().n_heads;
    auto floats = [&](const std::string& name,
                      const std::vector<int64_t>& shape) {
      auto v = file->ReadFloats(name, shape);
      EXPECT_TRUE(v.ok()) << v.status();
      return v.ok() ? *v : std::vector<float>{};
    };
    g_.logits = floats("logits", {B, T, config().vocab_size});
    for (int l = 0; l < config().encoder_layers; ++l) {
      g_.encoder.push_back(floats(absl::StrCat("enc_attn.", l), {B, H, S, S}));
    }
    for (int l = 0; l < config().n_layers; ++l) {
      g_.decoder.push_back(floats(absl::StrCat("dec_attn.", l), {B, H, T, T}));
      g_.cross.push_back(floats(absl::StrCat("cross_attn.", l), {B, H, T, S}));
    }
  }

  // Encodes every source into slots 0..B-1 of `cache` and decodes every
  // target, all as one batch each, capturing attention.
  void RunBatch(KvCache& cache, EncodeResult& encoded, ForwardResult& result) {
    std::vector<SourceChunk> sources;
    std::vector<SequenceChunk> targets;
    for (int b = 0; b < g_.B; ++b) {
      sources.push_back({b, g_.sources[b]});
      targets.push_back({b, g_.targets[b]});
    }
    ASSERT_TRUE(
        decoder_
            ->Encode(sources, cache, {LogitsMode::kAllTokens, true}, encoded)
            .ok());
    ASSERT_TRUE(
        decoder_
            ->Forward(targets, cache, {LogitsMode::kAllTokens, true}, result)
            .ok());
  }

  // Max |Δ| between `maps` of sequence b and the golden [B, H, Q, K] tensor
  // of one layer, over the sequence's own queries and keys; checks that the
  // golden weights on padded keys are exactly 0.
  float MapDelta(const AttentionMaps& maps, int layer,
                 const std::vector<float>& golden, int b, int Q, int K) {
    const int H = config().n_heads;
    float delta = 0;
    for (int h = 0; h < H; ++h) {
      for (int q = 0; q < maps.n_queries; ++q) {
        const float* want =
            golden.data() + ((static_cast<size_t>(b) * H + h) * Q + q) * K;
        for (int k = 0; k < K; ++k) {
          if (k >= maps.n_keys) {
            EXPECT_EQ(want[k], 0.0f) << "PyTorch attended to padding: layer "
                                     << layer << " head " << h;
            continue;
          }
          delta = std::max(delta, std::abs(maps.at(layer, h, q, k) - want[k]));
        }
      }
    }
    return delta;
  }

  std::unique_ptr<Decoder> decoder_;
  Golden g_;
};

TEST_P(Seq2SeqParityTest, LogitsAndEveryAttentionMapMatchPyTorch) {
  KvCache cache(config(), g_.B);
  EncodeResult encoded;
  ForwardResult result;
  RunBatch(cache, encoded, result);
  const int V = config().vocab_size;
  float logits = 0, encoder = 0, decoder = 0, cross = 0;
  for (int b = 0; b < g_.B; ++b) {
    for (size_t t = 0; t < g_.targets[b].size(); ++t) {
      const float* got = result.logits.row(result.first_row[b] + t).data();
      const float* want =
          g_.logits.data() + (static_cast<size_t>(b) * g_.T + t) * V;
      for (int v = 0; v < V; ++v) {
        logits = std::max(logits, std::abs(got[v] - want[v]));
      }
    }
    EXPECT_EQ(encoded.attention[b].n_keys,
              static_cast<int>(g_.sources[b].size()));
    EXPECT_EQ(result.cross_attention[b].n_keys,
              static_cast<int>(g_.sources[b].size()));
    for (int l = 0; l < config().encoder_layers; ++l) {
      encoder = std::max(encoder, MapDelta(encoded.attention[b], l,
                                           g_.encoder[l], b, g_.S, g_.S));
    }
    for (int l = 0; l < config().n_layers; ++l) {
      decoder = std::max(decoder, MapDelta(result.attention[b], l,
                                           g_.decoder[l], b, g_.T, g_.T));
      cross = std::max(cross, MapDelta(result.cross_attention[b], l,
                                       g_.cross[l], b, g_.T, g_.S));
    }
  }
  std::printf(
      "[parity] %s: logits %.2e, encoder self %.2e, decoder self %.2e, cross "
      "%.2e\n",
      GetParam().c_str(), logits, encoder, decoder, cross);
  EXPECT_LE(logits, kLogitsVsTorch);
  EXPECT_LE(encoder, kAttentionVsTorch);
  EXPECT_LE(decoder, kAttentionVsTorch);
  EXPECT_LE(cross, kAttentionVsTorch);
}

TEST_P(Seq2SeqParityTest, EachAloneAndTokenByTokenEqualTheBatchBitForBit) {
  KvCache batch_cache(config(), g_.B);
  EncodeResult encoded;
  ForwardResult batched;
  RunBatch(batch_cache, encoded, batched);
  const int V = config().vocab_size;
  for (int b = 0; b < g_.B; ++b) {
    KvCache cache(config(), 1);
    EncodeResult alone_encoded;
    ASSERT_TRUE(
        decoder_->Encode({{0, g_.sources[b]}}, cache, {}, alone_encoded).ok());
    ForwardResult step;
    for (size_t t = 0; t < g_.targets[b].size(); ++t) {
      const SequenceChunk token{0, absl::MakeConstSpan(&g_.targets[b][t], 1)};
      ASSERT_TRUE(decoder_->Forward({token}, cache, {}, step).ok());
      ASSERT_EQ(0,
                std::memcmp(step.logits.data(),
                            batched.logits.row(batched.first_row[b] + t).data(),
                            V * sizeof(float)))
          << "sequence " << b << " position " << t;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, Seq2SeqParityTest,
                         ::testing::Values("seq2seq_sinusoidal",
                                           "seq2seq_learned"));

}  // namespace
}  // namespace textgen
