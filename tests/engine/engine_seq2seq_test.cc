// The engine with an encoder–decoder model: each request's source is encoded
// when it is admitted, requests with different sources share steps and still
// get exactly what they get alone, the tap sends cross-attention rows, and a
// request without a source (or a source sent to a decoder-only model) is
// refused with the right status.
#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/checkpoint.h"
#include "model/formats/hf_checkpoint.h"
#include "model/generate.h"
#include "model/text/char_tokenizer.h"
#include "tests/testing/engine_streams.h"
#include "tests/testing/seq2seq_checkpoint.h"
#include "tests/testing/test_util.h"

namespace textgen {
namespace {

using testing::Collect;
using testing::Output;

class EngineSeq2SeqTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::FreshTempDir("engine_seq2seq");
    testing::WriteSeq2SeqCheckpoint(dir_);
    auto tokenizer = CharTokenizer::Load(dir_ + "/char_vocab.json");
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = std::shared_ptr<const Tokenizer>(*std::move(tokenizer));
  }

  std::unique_ptr<Engine> Start(
      int num_slots, SpeculativeMode speculative = SpeculativeMode::kOff) {
    auto checkpoint = LoadCheckpoint(dir_);
    EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
    EngineOptions options;
    options.num_slots = num_slots;
    options.speculation.mode = speculative;
    options.speculation.max_batch = num_slots;
    auto engine = Engine::Create(
        options, std::make_unique<Decoder>(*std::move(checkpoint)), tokenizer_);
    EXPECT_TRUE(engine.ok()) << engine.status();
    EXPECT_TRUE((*engine)->Start().ok());
    return *std::move(engine);
  }

  GenerationRequest Request(const std::string& source, int max_new_tokens) {
    GenerationRequest r;
    r.source = tokenizer_->Encode(source).value();
    r.prompt = {tokenizer_->bos_id()};
    r.max_new_tokens = max_new_tokens;
    r.seed = 7;
    return r;
  }

  std::string dir_;
  std::shared_ptr<const Tokenizer> tokenizer_;
};

TEST_F(EngineSeq2SeqTest, RequestsTogetherEqualEachAlone) {
  const std::vector<std::string> sources = {
      "the third of march", "3 3 99", "a much longer source of forty chars"};
  std::vector<Output> alone;
  {
    auto engine = Start(1);
    for (const std::string& s : sources) {
      auto stream = engine->Submit(Request(s, 12));
      ASSERT_TRUE(stream.ok()) << stream.status();
      alone.push_back(Collect(**stream));
      ASSERT_TRUE(alone.back().finish->status.ok());
      EXPECT_EQ(alone.back().finish->usage.source_tokens,
                static_cast<int>(s.size()));
    }
    EXPECT_EQ(engine->stats().source_tokens,
              static_cast<int64_t>(sources[0].size() + sources[1].size() +
                                   sources[2].size()));
  }
  // Different sources must give different continuations, or the comparison
  // below could not see a source mix-up.
  EXPECT_NE(alone[0].ids(), alone[1].ids());
  auto engine = Start(4);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int round = 0; round < 2; ++round) {
    for (const std::string& s : sources) {
      auto stream = engine->Submit(Request(s, 12));
      ASSERT_TRUE(stream.ok()) << stream.status();
      streams.push_back(*stream);
    }
  }
  for (size_t i = 0; i < streams.size(); ++i) {
    const Output out = Collect(*streams[i]);
    EXPECT_EQ(out.ids(), alone[i % 3].ids()) << "request " << i;
    EXPECT_EQ(out.logprobs(), alone[i % 3].logprobs()) << "request " << i;
  }
}

TEST_F(EngineSeq2SeqTest, EngineEqualsTheSingleSequenceLoop) {
  auto engine = Start(2);
  auto checkpoint = LoadCheckpoint(dir_);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  Decoder decoder(*std::move(checkpoint));
  for (const char* source : {"1999-03-03", "march 3rd 99"}) {
    const GenerationRequest r = Request(source, 10);
    auto stream = engine->Submit(r);
    ASSERT_TRUE(stream.ok()) << stream.status();
    const Output out = Collect(**stream);
    GenerateOptions options;
    options.max_new_tokens = 10;
    options.seed = *r.seed;
    options.source = r.source;
    options.is_end_token = [&](int id) { return tokenizer_->EndsSequence(id); };
    std::vector<int> ids;
    ASSERT_TRUE(
        Generate(decoder, r.prompt, options, [&](const GeneratedToken& t) {
          ids.push_back(t.id);
        }).ok());
    EXPECT_EQ(out.ids(), ids) << source;
  }
  // The loop's own checks.
  GenerateOptions no_source;
  const std::vector<int> bos = {tokenizer_->bos_id()};
  EXPECT_EQ(Generate(decoder, bos, no_source, [](const GeneratedToken&) {})
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(EngineSeq2SeqTest, TapSendsCrossAttentionRowsOverTheSource) {
  auto engine = Start(2);
  GenerationRequest r = Request("march 3rd 99", 4);
  r.attention_tap = AttentionTap{{1}, {0, 3}};
  auto stream = engine->Submit(r);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const Output out = Collect(**stream);
  ASSERT_EQ(out.generated.size(), 4u);
  for (const TokenEvent& e : out.generated) {
    // Layer 1, heads 0 and 3: self-attention rows, then cross rows.
    ASSERT_EQ(e.attention.size(), 4u);
    for (int i = 0; i < 4; ++i) {
      const AttentionRow& row = e.attention[i];
      EXPECT_EQ(row.layer, 1);
      EXPECT_EQ(row.head, i % 2 == 0 ? 0 : 3);
      const bool cross = i >= 2;
      EXPECT_EQ(row.kind,
                cross ? AttentionKind::kCross : AttentionKind::kDecoderSelf);
      EXPECT_EQ(row.weights.size(),
                cross ? r.source.size() : static_cast<size_t>(e.position));
      EXPECT_NEAR(std::accumulate(row.weights.begin(), row.weights.end(), 0.0),
                  1.0, 1e-5);
    }
  }
}

// Prompt lookup on an encoder-decoder model (engine/speculation.h): the same
// tokens, logprobs and self- and cross-attention rows as without it.
TEST_F(EngineSeq2SeqTest, SpeculationChangesNothingButTheSteps) {
  const std::vector<std::string> sources = {
      "the third of march", "3 3 99", "a much longer source of forty chars",
      "march march march"};
  auto run = [&](SpeculativeMode mode, EngineStats& stats) {
    auto engine = Start(4, mode);
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const std::string& s : sources) {
      GenerationRequest r = Request(s, 30);
      r.attention_tap = AttentionTap{{1}, {0}};
      streams.push_back(*engine->Submit(r));
    }
    std::vector<Output> outputs;
    for (auto& stream : streams) outputs.push_back(Collect(*stream));
    stats = engine->stats();
    return outputs;
  };
  EngineStats off_stats, spec_stats;
  const std::vector<Output> off = run(SpeculativeMode::kOff, off_stats);
  const std::vector<Output> spec = run(SpeculativeMode::kNgram, spec_stats);
  for (size_t i = 0; i < sources.size(); ++i) {
    ASSERT_TRUE(spec[i].finish && spec[i].finish->status.ok());
    EXPECT_EQ(spec[i].ids(), off[i].ids()) << "request " << i;
    EXPECT_EQ(spec[i].logprobs(), off[i].logprobs()) << "request " << i;
    ASSERT_EQ(spec[i].generated.size(), off[i].generated.size());
    for (size_t t = 0; t < off[i].generated.size(); ++t) {
      const auto& a = off[i].generated[t].attention;
      const auto& b = spec[i].generated[t].attention;
      ASSERT_EQ(a.size(), 2u);  // Self, then cross.
      ASSERT_EQ(b.size(), 2u);
      for (int k = 0; k < 2; ++k) {
        EXPECT_EQ(a[k].kind, b[k].kind);
        EXPECT_EQ(a[k].weights, b[k].weights)
            << "request " << i << " token " << t << " row " << k;
      }
    }
  }
  EXPECT_GT(spec_stats.spec_accepted_tokens, 0);
  // Accepted guesses came in the step of the token before them.
  int shared = 0;
  for (const Output& out : spec) {
    std::set<int64_t> steps;
    for (const TokenEvent& e : out.generated)
      shared += !steps.insert(e.step).second;
  }
  EXPECT_EQ(shared, spec_stats.spec_accepted_tokens);
}

TEST_F(EngineSeq2SeqTest, SourceIsRequiredAndChecked) {
  auto engine = Start(1);
  GenerationRequest r = Request("x", 4);
  r.source.clear();
  auto refused = engine->Submit(r);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("source"), std::string::npos);

  r.source = {1, engine->config().vocab_size};
  refused = engine->Submit(r);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("source[1]"), std::string::npos)
      << refused.status();

  r.source.assign(engine->config().context_length + 1, 1);
  refused = engine->Submit(r);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("--max_prompt_tokens"),
            std::string::npos)
      << refused.status();
  // The whole context is a valid source.
  r.source.assign(engine->config().context_length, 1);
  auto stream = engine->Submit(r);
  ASSERT_TRUE(stream.ok()) << stream.status();
  EXPECT_TRUE(Collect(**stream).finish->status.ok());
}

TEST(EngineDecoderOnlyTest, RefusesASource) {
  auto checkpoint = LoadCheckpoint(testing::GoldenDir("gpt2_learned"));
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  auto engine = Engine::Create(
      {}, std::make_unique<Decoder>(*std::move(checkpoint)), nullptr);
  ASSERT_TRUE(engine.ok()) << engine.status();
  GenerationRequest r;
  r.prompt = {1, 2};
  r.source = {3};
  const auto refused = (*engine)->Submit(r);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("decoder-only"), std::string::npos)
      << refused.status();
}

}  // namespace
}  // namespace textgen
