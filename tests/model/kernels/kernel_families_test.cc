// Batch invariance holds for every build of the kernels this CPU runs
// (model/kernels/dispatch.h) and every weight type: within one family, a
// sequence's logits are bit for bit the same alone or batched, KV-cached or
// recomputed, on one thread or two. Families may differ from one another in
// the last bits of f32 and bf16 results, so each is held only to itself.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "model/checkpoint.h"
#include "model/decoder.h"
#include "model/formats/hf_checkpoint.h"
#include "model/kernels/dispatch.h"
#include "model/kv_cache.h"
#include "tests/testing/test_util.h"

namespace textgen {
namespace {

using Param = std::tuple<kernels::KernelFamily, kernels::WeightType,
                         std::string /*golden config*/>;

class KernelFamiliesTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    const auto& [family, type, config] = GetParam();
    if (!kernels::CpuRuns(family)) {
      GTEST_SKIP() << "this CPU cannot run the "
                   << kernels::KernelFamilyName(family) << " kernels";
    }
    ASSERT_TRUE(kernels::UseKernelFamily(family).ok());
    LoadOptions load;
    load.weight_type = type;
    auto checkpoint = LoadCheckpoint(testing::GoldenDir(config), load);
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    ASSERT_EQ(checkpoint->weights.head.type(), type);
    one_ = std::make_unique<Decoder>(*std::move(checkpoint));
    DecoderOptions two;
    two.threads = 2;
    two.min_parallel_work = 0;  // Split even these small models' steps.
    two_ =
        std::make_unique<Decoder>(one_->config(), one_->shared_weights(), two);
  }
  void TearDown() override {
    ASSERT_TRUE(kernels::UseKernelFamily(kernels::BestKernelFamily()).ok());
  }

  // Every token's logits of `ids` in one pass from an empty cache.
  Activations FullPass(Decoder& decoder, const std::vector<int>& ids) {
    KvCache cache(decoder.config(), 1);
    ForwardResult result;
    EXPECT_TRUE(
        decoder.Forward({{0, ids}}, cache, {LogitsMode::kAllTokens}, result)
            .ok());
    return result.logits;
  }

  std::vector<int> Prompt(int n, int salt) const {
    std::vector<int> ids(n);
    for (int i = 0; i < n; ++i) {
      ids[i] = (7919 * (i + 1) + 104729 * salt) % one_->config().vocab_size;
    }
    return ids;
  }

  std::unique_ptr<Decoder> one_, two_;
};

TEST_P(KernelFamiliesTest, KvCachedDecodingEqualsRecomputation) {
  const std::vector<int> ids = Prompt(24, 1);
  const Activations full = FullPass(*one_, ids);
  KvCache cache(one_->config(), 1);
  // A prefill chunk of 5, then one token at a time.
  int pos = 0;
  for (int n : {5, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}) {
    ForwardResult step;
    ASSERT_TRUE(one_->Forward({{0, absl::MakeConstSpan(&ids[pos], n)}}, cache,
                              {LogitsMode::kAllTokens}, step)
                    .ok());
    ASSERT_EQ(step.logits, full.middleRows(pos, n)) << "position " << pos;
    pos += n;
  }
}

TEST_P(KernelFamiliesTest, BatchedEqualsAloneOnOneThreadAndTwo) {
  const std::vector<std::vector<int>> seqs = {Prompt(19, 2), Prompt(6, 3),
                                              Prompt(11, 4), Prompt(1, 5)};
  std::vector<Activations> alone;
  for (const auto& s : seqs) alone.push_back(FullPass(*one_, s));
  for (Decoder* decoder : {one_.get(), two_.get()}) {
    SCOPED_TRACE(decoder->threads());
    KvCache cache(decoder->config(), 4);
    // Prefill chunks of different lengths, then decode steps of all four.
    std::vector<int> pos(4, 0);
    for (const std::vector<int>& sizes :
         {std::vector<int>{7, 6, 2, 1}, std::vector<int>{1, 0, 5, 0},
          std::vector<int>{11, 0, 4, 0}}) {
      std::vector<SequenceChunk> batch;
      std::vector<int> which;
      for (int i = 3; i >= 0; --i) {  // Slot order need not be batch order.
        if (sizes[i] == 0) continue;
        batch.push_back({i, absl::MakeConstSpan(&seqs[i][pos[i]], sizes[i])});
        which.push_back(i);
      }
      ForwardResult result;
      ASSERT_TRUE(
          decoder->Forward(batch, cache, {LogitsMode::kAllTokens}, result)
              .ok());
      for (size_t b = 0; b < which.size(); ++b) {
        const int i = which[b];
        ASSERT_EQ(result.logits.middleRows(result.first_row[b], sizes[i]),
                  alone[i].middleRows(pos[i], sizes[i]))
            << "sequence " << i << " at " << pos[i];
        pos[i] += sizes[i];
      }
    }
    // And whole sequences through a two-thread decoder, alone.
    for (size_t i = 0; i < seqs.size(); ++i) {
      ASSERT_EQ(FullPass(*decoder, seqs[i]), alone[i]);
    }
  }
}

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [family, type, config] = info.param;
  return std::string(kernels::KernelFamilyName(family)) + "_" +
         kernels::WeightTypeName(type) + "_" + config;
}

INSTANTIATE_TEST_SUITE_P(
    Families, KernelFamiliesTest,
    ::testing::Combine(::testing::Values(kernels::KernelFamily::kGeneric,
                                         kernels::KernelFamily::kAvx2,
                                         kernels::KernelFamily::kAvx512),
                       ::testing::Values(kernels::WeightType::kF32,
                                         kernels::WeightType::kBF16,
                                         kernels::WeightType::kInt8,
                                         kernels::WeightType::kW8A32),
                       ::testing::Values("gpt2_learned", "llama_gqa")),
    Name);

}  // namespace
}  // namespace textgen
