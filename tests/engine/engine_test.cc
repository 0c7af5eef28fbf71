// The engine against the decoder's own generation loop, under concurrency.
//
// Every test runs a real model: the random-weight golden checkpoints in
// tests/golden/ (tiny, so the tests are fast). They ship no tokenizer, so text
// tests build one: a char_vocab.json written beside the test (the real
// loading path), or PieceTokenizer (tests/testing/piece_tokenizer.h), whose
// tokens can be parts of a UTF-8 character or several characters.
//
// What they show:
//   - temperature 0 gives exactly the tokens, logprobs, top alternatives and
//     attention rows of a plain Decoder + KvCache + Sampler loop (all four
//     configs), with the prompt chunked;
//   - 32 concurrent requests (8 slots, so they queue, join and leave) each get
//     exactly what they get alone, greedy or seeded sampling;
//   - same seed, same tokens; different seeds, different tokens;
//   - cancel, dropped streams and deadlines free their slots; the engine
//     keeps serving;
//   - past max_queue, RESOURCE_EXHAUSTED at once while admitted streams go on;
//   - bad requests are refused naming the field;
//   - a consumer that never reads stalls only its own stream;
//   - stop strings across token boundaries are cut and never sent; text never
//     splits a UTF-8 character;
//   - a long prompt is prefilled over several steps while another stream
//     decodes in each of them (seen through event step numbers, not clocks).
// Waits are bounded (kWait) only so that a bug fails instead of hanging.
#include "engine/engine.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/utf8.h"
#include "model/checkpoint.h"
#include "model/formats/safetensors.h"
#include "model/generate.h"
#include "model/sampler.h"
#include "model/text/tokenizer.h"
#include "model/text/tokenizer_factory.h"
#include "tests/testing/engine_reference.h"
#include "tests/testing/engine_streams.h"
#include "tests/testing/piece_tokenizer.h"
#include "tests/testing/test_util.h"

namespace textgen {
namespace {

using ::testing::HasSubstr;

// Generous: only there so that a bug fails the test instead of hanging it.
constexpr absl::Duration kWait = absl::Seconds(60);

using testing::PieceTokenizer;

SamplingParams Greedy() {
  SamplingParams p;
  p.temperature = 0;
  return p;
}

SamplingParams Sampled(float temperature = 1.0f, int top_k = 0,
                       float top_p = 1.0f) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  return p;
}

using testing::Collect;
using testing::CollectCompletions;
using testing::MakeEngine;
using testing::Output;
using testing::Prompt;
using testing::Reference;
using testing::RunAlone;

// Polls `done` until it holds or kWait passes.
template <typename F>
bool Eventually(F done) {
  const absl::Time give_up = absl::Now() + kWait;
  while (!done()) {
    if (absl::Now() > give_up) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

std::shared_ptr<RequestStream> MustSubmit(Engine& engine,
                                          GenerationRequest request) {
  auto stream = engine.Submit(std::move(request));
  EXPECT_TRUE(stream.ok()) << stream.status();
  return stream.ok() ? *stream : nullptr;
}

GenerationRequest Request(std::vector<int> prompt, int max_new_tokens,
                          SamplingParams sampling = Greedy(),
                          std::optional<uint64_t> seed = 0) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_new_tokens = max_new_tokens;
  r.sampling = sampling;
  r.seed = seed;
  return r;
}

// ---------------------------------------------------------------------------

class EngineParityTest : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineParityTest, GreedyIsTheDecodersOwnLoopTokenForToken) {
  EngineOptions options;
  options.prefill_chunk_tokens = 5;  // The 23-token prompt takes 5 steps.
  std::unique_ptr<Engine> engine =
      MakeEngine(options, nullptr, GetParam(), /*start=*/true);
  ASSERT_NE(engine, nullptr);
  const ModelConfig config = engine->config();
  std::unique_ptr<Decoder> reference_decoder =
      testing::LoadDecoder(testing::GoldenDir(GetParam()));

  const std::vector<int> prompt = Prompt(23, config.vocab_size, 1);
  GenerationRequest request = Request(prompt, 40);
  request.top_logprobs = 3;
  request.attention_tap = AttentionTap{{0, config.n_layers - 1}, {1}};
  std::shared_ptr<RequestStream> stream = MustSubmit(*engine, request);
  const Output out = Collect(*stream);
  const Reference ref = RunAlone(*reference_decoder, prompt, Greedy(), 0, 40, 3,
                                 /*capture=*/true);

  ASSERT_TRUE(out.finish);
  EXPECT_TRUE(out.finish->status.ok()) << out.finish->status;
  EXPECT_EQ(out.finish->reason, FinishReason::kLength);
  EXPECT_EQ(out.finish->usage.prompt_tokens, 23);
  EXPECT_EQ(out.finish->usage.generated_tokens, 40);
  ASSERT_EQ(out.ids(), ref.ids);
  for (size_t i = 0; i < out.generated.size(); ++i) {
    const TokenEvent& e = out.generated[i];
    EXPECT_EQ(e.position, 23 + static_cast<int>(i));
    EXPECT_FALSE(e.is_prompt);
    // Bit for bit: the kernels are batch-invariant, chunking changes nothing.
    EXPECT_EQ(e.logprob, ref.logprobs[i]) << "token " << i;
    ASSERT_EQ(e.top_logprobs.size(), 3u);
    for (int k = 0; k < 3; ++k) {
      EXPECT_EQ(e.top_logprobs[k].id, ref.top[i][k].first);
      EXPECT_EQ(e.top_logprobs[k].logprob, ref.top[i][k].second);
    }
    EXPECT_EQ(e.top_logprobs[0].logprob, e.logprob);  // Greedy took the top.
    // Attention: the query that chose the token, over keys 0..position-1.
    ASSERT_EQ(e.attention.size(), 2u);
    const AttentionMaps& maps = ref.attention[i];
    for (const AttentionRow& row : e.attention) {
      EXPECT_EQ(row.head, 1);
      ASSERT_EQ(static_cast<int>(row.weights.size()), e.position);
      for (int k = 0; k < e.position; ++k) {
        ASSERT_EQ(row.weights[k],
                  maps.at(row.layer, row.head, maps.n_queries - 1, k))
            << "token " << i << " layer " << row.layer << " key " << k;
      }
    }
    EXPECT_EQ(e.attention[0].layer, 0);
    EXPECT_EQ(e.attention[1].layer, config.n_layers - 1);
  }
  const EngineStats stats = engine->stats();
  EXPECT_EQ(stats.prompt_tokens, 23);
  EXPECT_EQ(stats.generated_tokens, 40);
  EXPECT_EQ(stats.steps, 5 + 39);  // 5 prefill steps, then one per token.
}

// The golden prompt and PyTorch's log P(ids[t + 1] | ids[..t]) for it
// (tools/make_golden.py, float64 reference).
struct GoldenPromptScores {
  std::vector<int> ids;
  std::vector<float> logprobs;  // [T - 1]
};

GoldenPromptScores LoadGoldenPromptScores(const std::string& config) {
  GoldenPromptScores g;
  auto file =
      SafetensorsFile::Open(testing::GoldenDir(config) + "/golden.safetensors");
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return g;
  auto ids = file->ReadInts("input_ids");
  EXPECT_TRUE(ids.ok()) << ids.status();
  if (!ids.ok()) return g;
  g.ids.assign(ids->begin(), ids->end());
  auto logprobs =
      file->ReadFloats("prompt_logprobs", {static_cast<int>(g.ids.size()) - 1});
  EXPECT_TRUE(logprobs.ok()) << logprobs.status();
  if (logprobs.ok()) g.logprobs = *std::move(logprobs);
  return g;
}

// Every committed golden config: each family's prompt scores against PyTorch.
class PromptLogprobsTest : public ::testing::TestWithParam<std::string> {};

INSTANTIATE_TEST_SUITE_P(
    AllGoldenConfigs, PromptLogprobsTest,
    ::testing::Values("gpt2_learned", "gpt2_sinusoidal", "llama_gqa",
                      "llama_tied_mha", "llama_bias_head_dim", "llama3_scaled",
                      "qwen2_bias", "qwen3_qk_norm", "mistral_no_window"));

// A request that only scores its prompt, prefilled `chunk` tokens a step.
Output ScorePrompt(const std::string& config, const std::vector<int>& prompt,
                   int chunk, int top_n, int max_new_tokens = 0) {
  EngineOptions options;
  options.prefill_chunk_tokens = chunk;
  std::unique_ptr<Engine> engine = MakeEngine(options, nullptr, config);
  if (engine == nullptr) return {};
  GenerationRequest request = Request(prompt, max_new_tokens);
  request.prompt_logprobs = top_n;
  std::shared_ptr<RequestStream> stream = MustSubmit(*engine, request);
  return stream != nullptr ? Collect(*stream) : Output{};
}

TEST_P(PromptLogprobsTest, AreTorchsLogSoftmaxWhateverTheChunking) {
  const GoldenPromptScores golden = LoadGoldenPromptScores(GetParam());
  const int T = static_cast<int>(golden.ids.size());
  ASSERT_EQ(static_cast<int>(golden.logprobs.size()), T - 1);

  // Seven tokens a step: the chunks' last rows score the next chunk's first
  // token.
  const Output out = ScorePrompt(GetParam(), golden.ids, 7, 3);
  ASSERT_TRUE(out.finish);
  EXPECT_TRUE(out.finish->status.ok()) << out.finish->status;
  EXPECT_EQ(out.finish->usage.generated_tokens, 0);  // max_new_tokens = 0
  EXPECT_TRUE(out.generated.empty());
  ASSERT_EQ(static_cast<int>(out.prompt.size()), T);
  EXPECT_EQ(out.prompt[0].logprob, 0.0f);  // Nothing precedes it.
  EXPECT_TRUE(out.prompt[0].top_logprobs.empty());
  float worst = 0;
  for (int t = 1; t < T; ++t) {
    const TokenEvent& e = out.prompt[t];
    EXPECT_EQ(e.id, golden.ids[t]);
    EXPECT_EQ(e.position, t);
    EXPECT_TRUE(e.is_prompt);
    worst = std::max(worst, std::abs(e.logprob - golden.logprobs[t - 1]));
    ASSERT_EQ(e.top_logprobs.size(), 3u) << "position " << t;
    EXPECT_GE(e.top_logprobs[0].logprob, e.logprob);
    EXPECT_GE(e.top_logprobs[0].logprob, e.top_logprobs[2].logprob);
  }
  EXPECT_LE(worst, 1e-4f) << "largest |logprob - PyTorch's| over the prompt";
  std::printf("%s: prompt logprobs within %.2g of PyTorch's\n",
              GetParam().c_str(), worst);

  // One chunk, or a token a step: bit for bit the same scores.
  for (int chunk : {1, T}) {
    const Output other = ScorePrompt(GetParam(), golden.ids, chunk, 3);
    ASSERT_EQ(other.prompt.size(), out.prompt.size()) << "chunk " << chunk;
    for (int t = 0; t < T; ++t) {
      EXPECT_EQ(other.prompt[t].logprob, out.prompt[t].logprob)
          << "chunk " << chunk << " position " << t;
      ASSERT_EQ(other.prompt[t].top_logprobs.size(),
                out.prompt[t].top_logprobs.size());
      for (size_t k = 0; k < out.prompt[t].top_logprobs.size(); ++k) {
        EXPECT_EQ(other.prompt[t].top_logprobs[k].id,
                  out.prompt[t].top_logprobs[k].id);
        EXPECT_EQ(other.prompt[t].top_logprobs[k].logprob,
                  out.prompt[t].top_logprobs[k].logprob);
      }
    }
  }
}

TEST_P(PromptLogprobsTest, ScoringThePromptDoesNotChangeWhatIsGenerated) {
  const GoldenPromptScores golden = LoadGoldenPromptScores(GetParam());
  const std::vector<int> prompt(golden.ids.begin(), golden.ids.begin() + 20);
  const Output scored = ScorePrompt(GetParam(), prompt, 6, 1, 12);
  std::unique_ptr<Engine> engine = MakeEngine({}, nullptr, GetParam());
  ASSERT_NE(engine, nullptr);
  const Output plain = Collect(*MustSubmit(*engine, Request(prompt, 12)));
  ASSERT_TRUE(scored.finish && plain.finish);
  EXPECT_EQ(scored.prompt.size(), prompt.size());
  EXPECT_TRUE(plain.prompt.empty());
  EXPECT_EQ(scored.ids(), plain.ids());
  ASSERT_EQ(scored.generated.size(), 12u);
  for (size_t i = 0; i < scored.generated.size(); ++i) {
    EXPECT_EQ(scored.generated[i].logprob, plain.generated[i].logprob);
    EXPECT_EQ(scored.generated[i].position, 20 + static_cast<int>(i));
  }
}

// A request that only scores its prompt generates nothing, so its prompt may
// fill the whole context; the scores of its first tokens are those of a
// shorter prompt's (causal: no position sees a later one).
TEST_P(EngineParityTest, AScoredPromptMayFillTheContext) {
  std::unique_ptr<Engine> engine = MakeEngine({}, nullptr, GetParam());
  ASSERT_NE(engine, nullptr);
  const int context = engine->config().context_length;
  const std::vector<int> prompt =
      Prompt(context, engine->config().vocab_size, 3);
  const Output full = ScorePrompt(GetParam(), prompt, 16, 1);
  ASSERT_TRUE(full.finish);
  ASSERT_TRUE(full.finish->status.ok()) << full.finish->status;
  ASSERT_EQ(static_cast<int>(full.prompt.size()), context);
  const std::vector<int> shorter(prompt.begin(), prompt.end() - 1);
  const Output part = ScorePrompt(GetParam(), shorter, 16, 1);
  ASSERT_EQ(static_cast<int>(part.prompt.size()), context - 1);
  for (int i = 0; i < context - 1; ++i) {
    EXPECT_EQ(full.prompt[i].logprob, part.prompt[i].logprob) << i;
  }
  // With a token to generate, the same prompt leaves it no room.
  GenerationRequest request = Request(prompt, 1);
  EXPECT_EQ(engine->Submit(request).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(EngineParityTest, StopsWhenTheContextIsFull) {
  std::unique_ptr<Engine> engine = MakeEngine({}, nullptr, GetParam());
  ASSERT_NE(engine, nullptr);
  const int context = engine->config().context_length;
  const std::vector<int> prompt =
      Prompt(context - 5, engine->config().vocab_size, 2);
  std::shared_ptr<RequestStream> stream =
      MustSubmit(*engine, Request(prompt, 100));
  const Output out = Collect(*stream);
  ASSERT_TRUE(out.finish);
  EXPECT_EQ(out.finish->reason, FinishReason::kContextFull);
  ASSERT_EQ(out.generated.size(), 5u);
  EXPECT_EQ(out.generated.back().position, context - 1);
  std::unique_ptr<Decoder> reference_decoder =
      testing::LoadDecoder(testing::GoldenDir(GetParam()));
  EXPECT_EQ(out.ids(),
            RunAlone(*reference_decoder, prompt, Greedy(), 0, 100).ids);
}

INSTANTIATE_TEST_SUITE_P(AllGoldenConfigs, EngineParityTest,
                         ::testing::Values("gpt2_learned", "gpt2_sinusoidal",
                                           "llama_gqa", "llama_tied_mha"));

TEST(EngineTest, ThirtyTwoConcurrentRequestsEachGetWhatTheyGetAlone) {
  EngineOptions options;
  options.num_slots = 8;  // So requests queue, join and leave mid-batch.
  options.max_queue = 32;
  options.prefill_chunk_tokens = 16;
  options.stream_buffer_events = 8;
  std::unique_ptr<Engine> engine = MakeEngine(options);
  ASSERT_NE(engine, nullptr);
  const int vocab = engine->config().vocab_size;

  constexpr int kRequests = 32;
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < kRequests; ++i) {
    // Prompts of 1..63 tokens, 5..59 new tokens; odd ones sample.
    GenerationRequest r =
        Request(Prompt(1 + (i * 13) % 63, vocab, 100 + i), 5 + (i * 7) % 55,
                i % 2 ? Sampled(0.8f, 20, 0.95f) : Greedy(), 1000 + i);
    if (i % 4 == 1) r.sampling.repetition_penalty = 1.3f;
    requests.push_back(r);
  }

  // Four submitting threads; each request read by its own thread.
  std::vector<Output> outputs(kRequests);
  std::vector<std::thread> consumers(kRequests);
  std::vector<std::thread> submitters;
  for (int t = 0; t < 4; ++t) {
    submitters.emplace_back([&, t] {
      for (int i = t; i < kRequests; i += 4) {
        std::shared_ptr<RequestStream> stream =
            MustSubmit(*engine, requests[i]);
        if (stream == nullptr) continue;
        consumers[i] = std::thread(
            [&outputs, i, stream] { outputs[i] = Collect(*stream); });
      }
    });
  }
  for (std::thread& t : submitters) t.join();
  for (std::thread& t : consumers) {
    if (t.joinable()) t.join();
  }

  std::unique_ptr<Decoder> reference_decoder =
      testing::LoadDecoder(testing::GoldenDir("gpt2_learned"));
  int total_tokens = 0;
  std::set<int64_t> steps;
  std::map<int64_t, int> requests_per_step;
  for (int i = 0; i < kRequests; ++i) {
    const GenerationRequest& r = requests[i];
    const Output& out = outputs[i];
    ASSERT_TRUE(out.finish) << "request " << i;
    EXPECT_TRUE(out.finish->status.ok()) << out.finish->status;
    EXPECT_EQ(out.finish->reason, FinishReason::kLength);
    EXPECT_EQ(out.finish->seed, *r.seed);
    const Reference ref = RunAlone(*reference_decoder, r.prompt, r.sampling,
                                   *r.seed, r.max_new_tokens);
    EXPECT_EQ(out.ids(), ref.ids) << "request " << i;
    for (size_t k = 0; k < out.generated.size() && k < ref.ids.size(); ++k) {
      EXPECT_EQ(out.generated[k].logprob, ref.logprobs[k]);
      ++requests_per_step[out.generated[k].step];
    }
    total_tokens += static_cast<int>(out.generated.size());
  }
  // They really ran together: batches of up to 8.
  int max_batch = 0;
  for (const auto& [step, n] : requests_per_step)
    max_batch = std::max(max_batch, n);
  std::printf(
      "[engine] 32 requests, %d tokens in %zu decode steps, up to %d "
      "per step\n",
      total_tokens, requests_per_step.size(), max_batch);
  EXPECT_GT(max_batch, 1);
  EXPECT_LE(max_batch, 8);

  const EngineStats stats = engine->stats();
  EXPECT_EQ(stats.slots_in_use, 0);
  EXPECT_EQ(stats.queue_depth, 0);
  EXPECT_EQ(stats.finished_length, kRequests);
  EXPECT_EQ(stats.generated_tokens, total_tokens);
}

TEST(EngineTest, NCompletionsEqualNSingleRequestsEvenWithFewerSlots) {
  EngineOptions options;
  options.num_slots = 2;  // Four completions take turns.
  options.prefill_chunk_tokens = 4;
  std::unique_ptr<Engine> engine = MakeEngine(options);
  ASSERT_NE(engine, nullptr);
  const std::vector<int> prompt = Prompt(9, engine->config().vocab_size, 8);
  GenerationRequest request = Request(prompt, 25, Sampled(0.9f), 1000);
  request.n = 4;
  request.echo_prompt = true;
  request.top_logprobs = 2;
  std::shared_ptr<RequestStream> stream = MustSubmit(*engine, request);
  const std::vector<Output> together = CollectCompletions(*stream, 4);

  for (int i = 0; i < 4; ++i) {
    const Output& mine = together[i];
    ASSERT_TRUE(mine.finish) << "completion " << i;
    EXPECT_TRUE(mine.finish->status.ok()) << mine.finish->status;
    EXPECT_EQ(mine.finish->seed, 1000u + i);
    EXPECT_EQ(mine.prompt.size(), i == 0 ? prompt.size() : 0u);
    GenerationRequest single = Request(prompt, 25, Sampled(0.9f), 1000 + i);
    single.top_logprobs = 2;
    const Output alone = Collect(*MustSubmit(*engine, single));
    EXPECT_EQ(mine.ids(), alone.ids()) << "completion " << i;
    ASSERT_EQ(mine.generated.size(), alone.generated.size());
    for (size_t k = 0; k < alone.generated.size(); ++k) {
      EXPECT_EQ(mine.generated[k].logprob, alone.generated[k].logprob);
      EXPECT_EQ(mine.generated[k].completion_index, i);
    }
  }
  EXPECT_NE(together[0].ids(), together[1].ids());
  const EngineStats stats = engine->stats();
  EXPECT_EQ(stats.slots_in_use, 0);
  EXPECT_EQ(stats.queue_depth, 0);
}

TEST(EngineTest, CancellingARequestEndsAllItsCompletions) {
  EngineOptions options;
  options.num_slots = 2;
  std::unique_ptr<Engine> engine = MakeEngine(options);
  ASSERT_NE(engine, nullptr);
  GenerationRequest request =
      Request(Prompt(5, engine->config().vocab_size, 9), 200);
  request.n = 3;
  std::shared_ptr<RequestStream> stream = MustSubmit(*engine, request);
  stream->Cancel();
  const std::vector<Output> out = CollectCompletions(*stream, 3);
  for (const Output& o : out) {
    ASSERT_TRUE(o.finish);
    EXPECT_EQ(o.finish->status.code(), absl::StatusCode::kCancelled);
  }
  EXPECT_TRUE(Eventually([&] {
    const EngineStats s = engine->stats();
    return s.slots_in_use == 0 && s.queue_depth == 0;
  }));
}

// A request that waits for slots gets them when a request holding them all is
// cancelled while nothing else runs: the engine admits it after reaping the
// cancelled one instead of sleeping (it once slept, the request queued with
// every slot free, until something else woke the engine).
TEST(EngineTest, ARequestQueuedBehindACancelledOneRunsOnAnIdleEngine) {
  EngineOptions options;
  options.num_slots = 2;
  options.stream_buffer_events = 4;
  std::unique_ptr<Engine> engine = MakeEngine(options);
  ASSERT_NE(engine, nullptr);
  const int vocab = engine->config().vocab_size;
  // Both slots, held: nobody reads its two completions.
  GenerationRequest holder_request = Request(Prompt(5, vocab, 1), 100);
  holder_request.n = 2;
  std::shared_ptr<RequestStream> holder = MustSubmit(*engine, holder_request);
  ASSERT_TRUE(Eventually([&] { return holder->buffered() >= 4; }));
  std::shared_ptr<RequestStream> queued =
      MustSubmit(*engine, Request(Prompt(5, vocab, 2), 3));
  ASSERT_TRUE(Eventually([&] { return engine->stats().queue_depth == 1; }));
  holder->Cancel();
  const Output out = Collect(*queued);
  ASSERT_TRUE(out.finish);
  EXPECT_TRUE(out.finish->status.ok()) << out.finish->status;
  EXPECT_EQ(out.generated.size(), 3u);
}

TEST(EngineTest, SameSeedSameTokensDifferentSeedsDiffer) {
  std::unique_ptr<Engine> engine = MakeEngine({});
  ASSERT_NE(engine, nullptr);
  const std::vector<int> prompt = Prompt(10, engine->config().vocab_size, 3);
  auto a = MustSubmit(*engine, Request(prompt, 30, Sampled(), 7));
  auto b = MustSubmit(*engine, Request(prompt, 30, Sampled(), 7));
  auto c = MustSubmit(*engine, Request(prompt, 30, Sampled(), 8));
  auto unseeded = MustSubmit(*engine, Request(prompt, 30, Sampled(), {}));
  const Output oa = Collect(*a), ob = Collect(*b), oc = Collect(*c),
               ou = Collect(*unseeded);
  EXPECT_EQ(oa.ids(), ob.ids());
  EXPECT_NE(oa.ids(), oc.ids());
  ASSERT_TRUE(oa.finish && ou.finish);
  EXPECT_EQ(oa.finish->seed, 7u);

  // Without a seed the engine picks one, and says which: it reproduces.
  auto again =
      MustSubmit(*engine, Request(prompt, 30, Sampled(), ou.finish->seed));
  EXPECT_EQ(Collect(*again).ids(), ou.ids());
}

TEST(EngineTest, CancelDropAndDeadlineFreeTheirSlotsAndTheEngineGoesOn) {
  EngineOptions options;
  options.num_slots = 3;
  options.stream_buffer_events = 4;
  std::unique_ptr<Engine> engine = MakeEngine(options);
  ASSERT_NE(engine, nullptr);
  const int vocab = engine->config().vocab_size;

  // Three requests fill the slots; nobody reads, so each stops after 4 tokens
  // with its slot held.
  auto cancelled = MustSubmit(*engine, Request(Prompt(5, vocab, 1), 100));
  auto dropped = MustSubmit(*engine, Request(Prompt(5, vocab, 2), 100));
  auto filler = MustSubmit(*engine, Request(Prompt(5, vocab, 3), 100));
  ASSERT_TRUE(cancelled && dropped && filler);
  ASSERT_TRUE(Eventually([&] {
    return cancelled->buffered() == 4 && dropped->buffered() == 4 &&
           filler->buffered() == 4;
  }));
  EXPECT_EQ(engine->stats().slots_in_use, 3);

  // A fourth waits in the queue; cancelled there, it never gets a slot.
  auto queued = MustSubmit(*engine, Request(Prompt(5, vocab, 4), 100));
  EXPECT_EQ(engine->stats().queue_depth, 1);
  queued->Cancel();
  const Output queued_out = Collect(*queued);
  ASSERT_TRUE(queued_out.finish);
  EXPECT_EQ(queued_out.finish->status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(queued_out.finish->usage.generated_tokens, 0);
  EXPECT_TRUE(queued_out.generated.empty());

  // Cancelled mid-generation, after reading two tokens.
  ASSERT_TRUE(cancelled->Poll() && cancelled->Poll());
  cancelled->Cancel();
  const Output cancelled_out = Collect(*cancelled);
  ASSERT_TRUE(cancelled_out.finish);
  EXPECT_EQ(cancelled_out.finish->status.code(), absl::StatusCode::kCancelled);
  EXPECT_GE(cancelled_out.finish->usage.generated_tokens, 4);
  EXPECT_LT(cancelled_out.finish->usage.generated_tokens, 100);

  // Dropped by its consumer without a word: the same as cancelled.
  dropped.reset();
  ASSERT_TRUE(Eventually([&] { return engine->stats().slots_in_use == 1; }));

  // A deadline that passes while the stream waits for its reader: the engine
  // wakes for it although nothing else happens. (One second is only so that
  // the first tokens come before it even on a loaded machine.)
  GenerationRequest expiring_request = Request(Prompt(5, vocab, 5), 100);
  expiring_request.deadline = absl::Now() + absl::Seconds(1);
  auto expiring = MustSubmit(*engine, expiring_request);
  ASSERT_TRUE(
      Eventually([&] { return engine->stats().deadline_exceeded == 1; }));
  const Output expired = Collect(*expiring);
  ASSERT_TRUE(expired.finish);
  EXPECT_EQ(expired.finish->status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(expired.finish->status.message(),
              HasSubstr(absl::StrCat("after ", expired.generated.size(),
                                     " generated tokens")));
  EXPECT_LE(expired.generated.size(), 4u);

  filler->Cancel();
  ASSERT_TRUE(Collect(*filler).finish);
  const EngineStats stats = engine->stats();
  EXPECT_EQ(stats.slots_in_use, 0);
  EXPECT_EQ(stats.queue_depth, 0);
  EXPECT_EQ(stats.cancelled, 4);  // queued, cancelled, dropped, filler.
  EXPECT_EQ(stats.deadline_exceeded, 1);

  // Still serving, and correctly.
  const std::vector<int> prompt = Prompt(7, vocab, 6);
  auto fresh = MustSubmit(*engine, Request(prompt, 20));
  std::unique_ptr<Decoder> reference_decoder =
      testing::LoadDecoder(testing::GoldenDir("gpt2_learned"));
  EXPECT_EQ(Collect(*fresh).ids(),
            RunAlone(*reference_decoder, prompt, Greedy(), 0, 20).ids);
  EXPECT_EQ(engine->stats().slots_in_use, 0);
}

TEST(EngineTest, OverAdmissionIsRejectedAtOnceWhileAdmittedStreamsGoOn) {
  EngineOptions options;
  options.num_slots = 2;
  options.max_queue = 3;
  options.stream_buffer_events = 2;
  std::unique_ptr<Engine> engine = MakeEngine(options);
  ASSERT_NE(engine, nullptr);
  const int vocab = engine->config().vocab_size;

  std::vector<std::shared_ptr<RequestStream>> admitted;
  for (int i = 0; i < 2; ++i) {
    admitted.push_back(MustSubmit(*engine, Request(Prompt(4, vocab, i), 30)));
  }
  // Both in slots (each has made its 2 tokens and waits for its reader).
  ASSERT_TRUE(Eventually([&] {
    return admitted[0]->buffered() == 2 && admitted[1]->buffered() == 2;
  }));
  for (int i = 0; i < 3; ++i) {
    admitted.push_back(
        MustSubmit(*engine, Request(Prompt(4, vocab, 10 + i), 30)));
  }
  auto rejected = engine->Submit(Request(Prompt(4, vocab, 20), 30));
  ASSERT_FALSE(rejected.ok());
  EXPECT_EQ(rejected.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(rejected.status().message(),
            "queue is full: 3 requests waiting (--max_queue=3)");
  EXPECT_EQ(engine->stats().rejected_queue_full, 1);
  EXPECT_EQ(engine->stats().queue_depth, 3);

  // Everything admitted before still completes, in full.
  for (auto& stream : admitted) {
    const Output out = Collect(*stream);
    ASSERT_TRUE(out.finish);
    EXPECT_TRUE(out.finish->status.ok());
    EXPECT_EQ(out.generated.size(), 30u);
  }
  EXPECT_EQ(engine->stats().finished_length, 5);
}

TEST(EngineTest, BadRequestsAreRefusedNamingTheField) {
  auto tokenizer =
      std::make_shared<PieceTokenizer>(std::vector<std::string>(97, "x"));
  std::unique_ptr<Engine> engine = MakeEngine({}, tokenizer);
  std::unique_ptr<Engine> no_tokenizer = MakeEngine({});
  ASSERT_TRUE(engine && no_tokenizer);
  // gpt2_learned: vocabulary 97, context 128, 3 layers, 4 heads.
  struct Case {
    const char* name;
    std::function<void(GenerationRequest&)> edit;
    absl::StatusCode code;
    const char* message;
  };
  const absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;
  const std::vector<Case> cases = {
      {"empty prompt", [](auto& r) { r.prompt.clear(); }, kInvalid,
       "prompt is empty"},
      {"id too large", [](auto& r) { r.prompt[1] = 97; }, kInvalid,
       "prompt[1] = 97 is outside the model's vocabulary 0..96"},
      {"negative id", [](auto& r) { r.prompt[0] = -1; }, kInvalid,
       "prompt[0] = -1 is outside"},
      {"prompt fills the context", [](auto& r) { r.prompt.assign(128, 5); },
       kInvalid, "at most 127 prompt tokens"},
      {"scored prompt over the context",
       [](auto& r) {
         r.prompt.assign(129, 5);
         r.prompt_logprobs = 1;
         r.max_new_tokens = 0;
       },
       kInvalid, "only scores its prompt takes at most 128"},
      {"max_new_tokens that must fit and does not",
       [](auto& r) {
         r.prompt.assign(100, 5);
         r.max_new_tokens = 29;
         r.max_new_tokens_must_fit = true;
       },
       kInvalid,
       "max_new_tokens: this model's maximum context length is 128 tokens; "
       "the request asks for 129 (100 in the prompt, 29 for the completion): "
       "ask for at most 28 new tokens"},
      {"stop_token_ids outside the vocabulary",
       [](auto& r) {
         r.stop_token_ids = {3, 97};
       },
       kInvalid, "stop_token_ids[1] = 97 is outside"},
      {"negative max_new_tokens", [](auto& r) { r.max_new_tokens = -1; },
       kInvalid, "max_new_tokens must be in 0..4096"},
      {"max_new_tokens over the limit",
       [](auto& r) { r.max_new_tokens = 4097; }, kInvalid,
       "max_new_tokens must be in 0..4096 (--max_new_tokens_limit; 0 means "
       "the default, 256), got 4097"},
      {"negative temperature", [](auto& r) { r.sampling.temperature = -1; },
       kInvalid, "sampling.temperature"},
      {"NaN top_p", [](auto& r) { r.sampling.top_p = std::nanf(""); }, kInvalid,
       "sampling.top_p"},
      {"negative top_k", [](auto& r) { r.sampling.top_k = -3; }, kInvalid,
       "sampling.top_k"},
      {"zero repetition_penalty",
       [](auto& r) { r.sampling.repetition_penalty = 0; }, kInvalid,
       "sampling.repetition_penalty"},
      {"top_logprobs too many", [](auto& r) { r.top_logprobs = 21; }, kInvalid,
       "top_logprobs must be in 0..20, got 21"},
      {"negative top_logprobs", [](auto& r) { r.top_logprobs = -1; }, kInvalid,
       "top_logprobs"},
      {"n zero", [](auto& r) { r.n = 0; }, kInvalid,
       "n must be in 1..8 (--max_completions), got 0"},
      {"n too many", [](auto& r) { r.n = 9; }, kInvalid, "got 9"},
      {"prompt_logprobs too many", [](auto& r) { r.prompt_logprobs = 21; },
       kInvalid, "prompt_logprobs must be in 0..20 (0 = off), got 21"},
      {"negative prompt_logprobs", [](auto& r) { r.prompt_logprobs = -1; },
       kInvalid, "prompt_logprobs"},
      {"empty stop",
       [](auto& r) {
         r.stop = {"a", ""};
       },
       kInvalid, "stop[1] is empty"},
      {"stop not UTF-8", [](auto& r) { r.stop = {"\xC3"}; }, kInvalid,
       "stop[0] is not valid UTF-8"},
      {"stop too long", [](auto& r) { r.stop = {std::string(257, 'a')}; },
       kInvalid, "stop[0] is 257 bytes"},
      {"too many stops",
       [](auto& r) { r.stop = std::vector<std::string>(17, "a"); }, kInvalid,
       "stop: at most 16"},
      {"tap layer",
       [](auto& r) {
         r.attention_tap = AttentionTap{{3}, {}};
       },
       kInvalid,
       "attention_tap.layers[0] = 3 is outside the model's layers 0..2"},
      {"tap head",
       [](auto& r) {
         r.attention_tap = AttentionTap{{}, {0, 4}};
       },
       kInvalid,
       "attention_tap.heads[1] = 4 is outside the model's heads 0..3"},
      {"deadline passed",
       [](auto& r) { r.deadline = absl::Now() - absl::Seconds(1); },
       absl::StatusCode::kDeadlineExceeded, "deadline has passed"},
  };
  for (const Case& c : cases) {
    GenerationRequest r = Request({1, 2, 3}, 10);
    c.edit(r);
    auto result = engine->Submit(r);
    ASSERT_FALSE(result.ok()) << c.name;
    EXPECT_EQ(result.status().code(), c.code) << c.name;
    EXPECT_THAT(result.status().message(), HasSubstr(c.message)) << c.name;
  }
  EXPECT_EQ(engine->stats().rejected_invalid,
            static_cast<int64_t>(cases.size()) - 1);

  // Edges that are fine.
  GenerationRequest edge = Request(std::vector<int>(127, 96), 0);
  edge.top_logprobs = 20;
  edge.attention_tap = AttentionTap{{2}, {3}};
  auto ok = engine->Submit(edge);
  ASSERT_TRUE(ok.ok()) << ok.status();
  const Output out = Collect(**ok);
  ASSERT_TRUE(out.finish);
  EXPECT_EQ(out.finish->reason, FinishReason::kContextFull);
  EXPECT_EQ(out.generated.size(), 1u);

  // Stop strings need text, hence a tokenizer.
  GenerationRequest with_stop = Request({1, 2, 3}, 10);
  with_stop.stop = {"x"};
  auto refused = no_tokenizer->Submit(with_stop);
  EXPECT_EQ(refused.status().code(), kInvalid);
  EXPECT_THAT(refused.status().message(), HasSubstr("no tokenizer"));

  // Bad options and an oversized tokenizer are refused by Create.
  EngineOptions bad;
  bad.num_slots = 0;
  auto no_slots = Engine::Create(
      bad, testing::LoadDecoder(testing::GoldenDir("gpt2_learned")), nullptr);
  EXPECT_THAT(no_slots.status().message(), HasSubstr("num_slots must be >= 1"));
  auto too_big = Engine::Create(
      {}, testing::LoadDecoder(testing::GoldenDir("gpt2_learned")),
      std::make_shared<PieceTokenizer>(std::vector<std::string>(98, "x")));
  EXPECT_THAT(too_big.status().message(), HasSubstr("98 tokens"));
}

TEST(EngineTest, SlowConsumerStallsOnlyItsOwnStream) {
  EngineOptions options;
  options.stream_buffer_events = 4;
  std::unique_ptr<Engine> engine = MakeEngine(options);
  ASSERT_NE(engine, nullptr);
  const int vocab = engine->config().vocab_size;
  const std::vector<int> slow_prompt = Prompt(6, vocab, 1);
  const std::vector<int> fast_prompt = Prompt(9, vocab, 2);

  auto slow = MustSubmit(*engine, Request(slow_prompt, 60));
  auto fast = MustSubmit(*engine, Request(fast_prompt, 60));
  // Nobody reads `slow`; `fast` runs to the end regardless.
  const Output fast_out = Collect(*fast);
  ASSERT_TRUE(fast_out.finish);
  EXPECT_EQ(fast_out.generated.size(), 60u);
  EXPECT_EQ(slow->buffered(), 4u);  // Full, and nothing was lost beyond it.
  EXPECT_EQ(engine->stats().slots_in_use, 1);  // It keeps its slot meanwhile.

  // Reading it later resumes it where it stopped.
  const Output slow_out = Collect(*slow);
  ASSERT_TRUE(slow_out.finish);
  EXPECT_TRUE(slow_out.finish->status.ok());
  std::unique_ptr<Decoder> reference_decoder =
      testing::LoadDecoder(testing::GoldenDir("gpt2_learned"));
  EXPECT_EQ(slow_out.ids(),
            RunAlone(*reference_decoder, slow_prompt, Greedy(), 0, 60).ids);
  EXPECT_EQ(fast_out.ids(),
            RunAlone(*reference_decoder, fast_prompt, Greedy(), 0, 60).ids);
}

// A client that never reads cannot hold a slot for longer than
// stream_idle_timeout: its request ends with RESOURCE_EXHAUSTED naming the
// limit, its slot is freed, and a reader that keeps up is never cut off.
TEST(EngineTest, StreamNobodyReadsEndsAfterTheIdleTimeoutAndFreesItsSlot) {
  EngineOptions options;
  options.num_slots = 2;
  options.stream_buffer_events = 4;
  options.stream_idle_timeout = absl::Milliseconds(300);
  std::unique_ptr<Engine> engine = MakeEngine(options);
  ASSERT_NE(engine, nullptr);
  const int vocab = engine->config().vocab_size;

  const absl::Time submitted = absl::Now();
  auto idle = MustSubmit(*engine, Request(Prompt(6, vocab, 1), 100));
  ASSERT_TRUE(idle);
  ASSERT_TRUE(Eventually([&] { return idle->buffered() == 4; }));
  // Meanwhile a reader that keeps up runs to its end.
  auto reader = MustSubmit(*engine, Request(Prompt(9, vocab, 2), 60));
  const Output read = Collect(*reader);
  ASSERT_TRUE(read.finish);
  EXPECT_TRUE(read.finish->status.ok()) << read.finish->status;
  EXPECT_EQ(read.generated.size(), 60u);

  // The idle stream's slot comes back without anyone reading it.
  ASSERT_TRUE(Eventually([&] { return engine->stats().slots_in_use == 0; }));
  EXPECT_GE(absl::Now() - submitted, absl::Milliseconds(300));
  const Output idle_out = Collect(*idle);
  ASSERT_TRUE(idle_out.finish);
  EXPECT_EQ(idle_out.finish->status.code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(idle_out.finish->status.message(),
              HasSubstr("--stream_idle_timeout"));
  EXPECT_EQ(idle_out.generated.size(), 4u);  // What was made stays readable.
}

TEST(EngineTest, OnReadyIsCalledWhenEventsArrive) {
  std::unique_ptr<Engine> engine = MakeEngine({}, nullptr, "gpt2_learned",
                                              /*start=*/false);
  ASSERT_NE(engine, nullptr);
  auto stream = MustSubmit(*engine, Request({1, 2, 3}, 5));
  auto calls = std::make_shared<std::atomic<int>>(0);
  stream->set_on_ready([calls] { ++*calls; });
  ASSERT_TRUE(engine->Start().ok());
  const Output out = Collect(*stream);
  EXPECT_EQ(out.generated.size(), 5u);
  // Once per step that added events (the last call may come just after the
  // consumer saw the events).
  EXPECT_TRUE(Eventually([&] { return calls->load() == 5; }));
  EXPECT_EQ(engine->Start().code(), absl::StatusCode::kFailedPrecondition);
}

// ---------------------------------------------------------------------------
// Text: stop strings, UTF-8, EOS, echo.

// Pieces of 1 to 3 characters from a small alphabet, so that stop strings
// land across and inside tokens.
std::shared_ptr<PieceTokenizer> WordPieces(int vocab, int eos = -1) {
  const std::string alphabet = "abcde \n.";
  std::vector<std::string> pieces;
  for (int id = 0; id < vocab; ++id) {
    std::string piece;
    for (int k = 0; k <= id % 3; ++k) {
      piece += alphabet[(id * 5 + k * 3) % alphabet.size()];
    }
    pieces.push_back(piece);
  }
  if (eos >= 0) pieces[eos] = "";
  return std::make_shared<PieceTokenizer>(pieces, eos);
}

TEST(EngineTextTest, StopStringsAcrossTokenBoundariesAreNeverSent) {
  auto tokenizer = WordPieces(97);
  std::unique_ptr<Engine> engine = MakeEngine({}, tokenizer);
  ASSERT_NE(engine, nullptr);
  const std::vector<int> prompt = Prompt(8, 97, 4);

  // The text with no stop strings, and where each token's text starts.
  auto free_run = MustSubmit(*engine, Request(prompt, 50, Sampled(), 11));
  const Output full = Collect(*free_run);
  const std::string text = full.text();
  ASSERT_EQ(text, *tokenizer->Decode(full.ids()));
  std::vector<size_t> token_end;  // Text length after each token.
  {
    std::string so_far;
    for (int id : full.ids()) {
      so_far += tokenizer->TokenBytes(id, -1);
      token_end.push_back(so_far.size());
    }
  }

  // A stop string that starts inside token 10 and ends inside a later one.
  const size_t start = token_end[9] + 1;
  ASSERT_GT(text.size(), start + 4);
  const std::string stop = text.substr(start, 4);
  const size_t at = text.find(stop);
  GenerationRequest request = Request(prompt, 50, Sampled(), 11);
  request.stop = {"never appears", stop};
  auto stopped = MustSubmit(*engine, request);
  const Output out = Collect(*stopped);
  ASSERT_TRUE(out.finish);
  EXPECT_EQ(out.finish->reason, FinishReason::kStop);
  EXPECT_EQ(out.text(), text.substr(0, at));
  // It stopped at the token that completed the stop string.
  const size_t completing =
      std::lower_bound(token_end.begin(), token_end.end(), at + stop.size()) -
      token_end.begin();
  EXPECT_EQ(out.generated.size(), completing + 1);
  EXPECT_EQ(out.finish->usage.generated_tokens,
            static_cast<int>(completing) + 1);
  for (const TokenEvent& e : out.generated) {
    EXPECT_THAT(e.text, ::testing::Not(HasSubstr(stop)));
  }
  EXPECT_EQ(engine->stats().finished_stop, 1);

  // A stop string that starts with the text's last characters but is never
  // completed: they are held back, then sent with the last token.
  const std::string tail = text.substr(text.size() - 2);
  request.stop = {tail + "QQ"};
  auto held = MustSubmit(*engine, request);
  const Output held_out = Collect(*held);
  ASSERT_TRUE(held_out.finish);
  EXPECT_EQ(held_out.finish->reason, FinishReason::kLength);
  EXPECT_EQ(held_out.text(), text);
  EXPECT_THAT(held_out.generated.back().text, ::testing::EndsWith(tail));
}

// Tokens that are single bytes of 2-byte characters: even ids a lead byte
// (0xCE or 0xCF: Greek), odd ids a continuation byte. Random token orders
// make whole characters split over two tokens, and invalid sequences.
std::shared_ptr<PieceTokenizer> BytePieces(int vocab) {
  std::vector<std::string> pieces;
  for (int id = 0; id < vocab; ++id) {
    const int byte = id % 2 == 0 ? 0xCE + id % 4 / 2 : 0x80 + id % 64;
    pieces.push_back(std::string(1, static_cast<char>(byte)));
  }
  return std::make_shared<PieceTokenizer>(pieces);
}

TEST(EngineTextTest, StreamingNeverSplitsAUtf8Character) {
  auto tokenizer = BytePieces(97);
  std::unique_ptr<Engine> engine = MakeEngine({}, tokenizer);
  ASSERT_NE(engine, nullptr);
  const std::vector<int> prompt = Prompt(8, 97, 5);
  // The random-weight model likes to repeat itself; a hot, penalized sampler
  // makes the varied token orders this test wants.
  SamplingParams varied = Sampled(1.5f);
  varied.repetition_penalty = 2.0f;
  auto stream = MustSubmit(*engine, Request(prompt, 100, varied, 3));
  const Output out = Collect(*stream);
  ASSERT_TRUE(out.finish);

  int split_characters = 0;
  std::string first_whole;  // The first 2-byte character made of two tokens.
  for (size_t i = 0; i < out.generated.size(); ++i) {
    const TokenEvent& e = out.generated[i];
    EXPECT_TRUE(IsValidUtf8(e.text)) << "token " << i;
    if (i > 0 && out.generated[i - 1].text.empty() && e.text.size() >= 2 &&
        (static_cast<unsigned char>(e.text[0]) & 0xFE) == 0xCE) {
      if (first_whole.empty()) first_whole = e.text.substr(0, 2);
      ++split_characters;
    }
  }
  EXPECT_EQ(out.text(), *tokenizer->Decode(out.ids()));
  std::printf("[engine] %d characters split over two tokens, all sent whole\n",
              split_characters);
  ASSERT_GT(split_characters, 0);

  // A stop string that is one of those characters: matched although its
  // bytes came in two tokens, and not sent.
  GenerationRequest request = Request(prompt, 100, varied, 3);
  request.stop = {first_whole};
  auto stopped = MustSubmit(*engine, request);
  const Output stopped_out = Collect(*stopped);
  ASSERT_TRUE(stopped_out.finish);
  EXPECT_EQ(stopped_out.finish->reason, FinishReason::kStop);
  EXPECT_EQ(stopped_out.text(),
            out.text().substr(0, out.text().find(first_whole)));
}

TEST(EngineTextTest, EndOfSequenceTokenEndsTheRequest) {
  // Find a token the model will produce, then make it the EOS.
  std::unique_ptr<Decoder> reference_decoder =
      testing::LoadDecoder(testing::GoldenDir("gpt2_learned"));
  const std::vector<int> prompt = Prompt(8, 97, 6);
  const Reference free_run =
      RunAlone(*reference_decoder, prompt, Sampled(), 5, 40);
  const int eos = free_run.ids[12];
  const size_t first =
      std::find(free_run.ids.begin(), free_run.ids.end(), eos) -
      free_run.ids.begin();

  std::unique_ptr<Engine> engine = MakeEngine({}, WordPieces(97, eos));
  ASSERT_NE(engine, nullptr);
  auto stream = MustSubmit(*engine, Request(prompt, 40, Sampled(), 5));
  const Output out = Collect(*stream);
  ASSERT_TRUE(out.finish);
  EXPECT_EQ(out.finish->reason, FinishReason::kEos);
  ASSERT_EQ(out.generated.size(), first + 1);
  EXPECT_EQ(out.generated.back().id, eos);
  EXPECT_EQ(out.finish->usage.generated_tokens, static_cast<int>(first) + 1);
  EXPECT_EQ(engine->stats().finished_eos, 1);
}

TEST(EngineTextTest, CharVocabularyFromDiskAndEchoedPrompt) {
  // A char_vocab.json beside the model, loaded the way the server will.
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "engine_test_char_vocab";
  std::filesystem::create_directories(dir);
  testing::WriteCharVocab97(dir);
  auto loaded = LoadTokenizer(dir.string(), 97);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  std::shared_ptr<const Tokenizer> tokenizer = *std::move(loaded);
  ASSERT_EQ(tokenizer->vocab_size(), 97);

  EngineOptions options;
  options.prefill_chunk_tokens = 4;
  options.stream_buffer_events = 5;  // Smaller than the prompt: echo waits.
  std::unique_ptr<Engine> engine = MakeEngine(options, tokenizer);
  ASSERT_NE(engine, nullptr);
  auto ids = tokenizer->Encode("Café au lait, s'il vous plaît");
  ASSERT_FALSE(ids.ok());  // 'î' is not in the vocabulary.
  ids = tokenizer->Encode("Caf\xC3\xA9 au lait:");
  ASSERT_TRUE(ids.ok()) << ids.status();

  GenerationRequest request = Request(*ids, 20, Sampled(), 9);
  request.echo_prompt = true;
  auto stream = MustSubmit(*engine, request);
  const Output out = Collect(*stream);
  ASSERT_TRUE(out.finish);
  ASSERT_EQ(out.prompt.size(), ids->size());
  std::string echoed;
  for (size_t i = 0; i < out.prompt.size(); ++i) {
    EXPECT_EQ(out.prompt[i].position, static_cast<int>(i));
    EXPECT_EQ(out.prompt[i].id, (*ids)[i]);
    echoed += out.prompt[i].text;
  }
  EXPECT_EQ(echoed, "Caf\xC3\xA9 au lait:");
  EXPECT_EQ(out.generated.front().position, static_cast<int>(ids->size()));
  EXPECT_EQ(out.text(), *tokenizer->Decode(out.ids()));
  EXPECT_EQ(out.generated.size(), 20u);
}

// ---------------------------------------------------------------------------

TEST(EngineTest, LongPromptIsPrefilledInChunksWhileAnotherStreamDecodes) {
  EngineOptions options;
  options.num_slots = 2;
  options.prefill_chunk_tokens = 16;
  options.stream_buffer_events = 512;  // Never full: nobody waits on a reader.
  // Queued before Start, so that both are admitted at step 1 in this order.
  std::unique_ptr<Engine> engine =
      MakeEngine(options, nullptr, "gpt2_learned", /*start=*/false);
  ASSERT_NE(engine, nullptr);
  const std::vector<int> short_prompt = Prompt(3, 97, 7);
  const std::vector<int> long_prompt = Prompt(100, 97, 8);
  auto running = MustSubmit(*engine, Request(short_prompt, 100));
  GenerationRequest long_request = Request(long_prompt, 4);
  long_request.echo_prompt = true;  // Echo events say which step fed what.
  auto arriving = MustSubmit(*engine, long_request);
  ASSERT_TRUE(engine->Start().ok());
  const Output run = Collect(*running), arrive = Collect(*arriving);
  ASSERT_TRUE(run.finish && arrive.finish);

  // The long prompt went in 16-token steps (13 in the first, beside the short
  // prompt's 3): 7 steps.
  std::map<int64_t, int> prompt_tokens_per_step;
  for (const TokenEvent& e : arrive.prompt) ++prompt_tokens_per_step[e.step];
  std::set<int64_t> decode_steps;
  for (const TokenEvent& e : run.generated) decode_steps.insert(e.step);
  ASSERT_EQ(prompt_tokens_per_step.size(), 7u);
  int64_t expected_step = 1;
  for (const auto& [step, n] : prompt_tokens_per_step) {
    EXPECT_EQ(step, expected_step++);
    EXPECT_LE(n, 16);
    // ... and in every one of those steps the other stream made a token.
    EXPECT_TRUE(decode_steps.count(step)) << "step " << step;
  }
  EXPECT_EQ(prompt_tokens_per_step.begin()->second, 13);
  EXPECT_EQ(arrive.generated.front().step, 7);  // Right after its prompt.

  std::unique_ptr<Decoder> reference_decoder =
      testing::LoadDecoder(testing::GoldenDir("gpt2_learned"));
  EXPECT_EQ(arrive.ids(),
            RunAlone(*reference_decoder, long_prompt, Greedy(), 0, 4).ids);
  EXPECT_EQ(run.ids(),
            RunAlone(*reference_decoder, short_prompt, Greedy(), 0, 100).ids);
}

TEST(EngineTest, ShutdownEndsWhatIsLeftWithUnavailable) {
  EngineOptions options;
  options.num_slots = 1;
  options.stream_buffer_events = 2;
  std::unique_ptr<Engine> engine = MakeEngine(options);
  ASSERT_NE(engine, nullptr);
  auto running = MustSubmit(*engine, Request({1, 2, 3}, 50));
  ASSERT_TRUE(Eventually([&] { return running->buffered() == 2; }));
  auto queued = MustSubmit(*engine, Request({4, 5, 6}, 50));

  engine->Shutdown();
  for (auto* stream : {running.get(), queued.get()}) {
    const Output out = Collect(*stream);
    ASSERT_TRUE(out.finish);
    EXPECT_EQ(out.finish->status.code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(out.finish->status.message(), HasSubstr("shutting down"));
  }
  auto late = engine->Submit(Request({1}, 1));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kUnavailable);
  const EngineStats stats = engine->stats();
  EXPECT_EQ(stats.shut_down, 2);
  EXPECT_EQ(stats.slots_in_use, 0);
}

TEST(EngineTest, ShutdownWithGraceLetsRunningRequestsFinish) {
  std::unique_ptr<Engine> engine = MakeEngine({});
  ASSERT_NE(engine, nullptr);
  auto stream = MustSubmit(*engine, Request({1, 2, 3}, 10));
  engine->Shutdown(kWait);  // Returns once the request is done.
  const Output out = Collect(*stream);
  ASSERT_TRUE(out.finish);
  EXPECT_TRUE(out.finish->status.ok());
  EXPECT_EQ(out.generated.size(), 10u);
}

TEST(EngineTest, RequestsQueuedOnAnEngineNeverStartedEndAtShutdown) {
  std::unique_ptr<Engine> engine =
      MakeEngine({}, nullptr, "gpt2_learned", /*start=*/false);
  ASSERT_NE(engine, nullptr);
  auto stream = MustSubmit(*engine, Request({1, 2, 3}, 10));
  engine.reset();
  const Output out = Collect(*stream);
  ASSERT_TRUE(out.finish);
  EXPECT_EQ(out.finish->status.code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace textgen
