// The engine over a paged KV cache (model/kv_cache.h): admission by blocks
// and automatic prefix caching must change no token.
//
// What they show, on the random-weight golden checkpoints:
//   - a request whose prompt prefix is cached gets exactly the tokens and
//     logprobs of the same request computed cold (prefix cache off), greedy
//     and seeded, for every golden config; the hits are counted;
//   - under a pool of a few blocks, many concurrent requests with shared and
//     unshared prefixes queue for blocks, evict cached ones, and each gets
//     exactly what it gets alone; when all have ended every block is free or
//     cached;
//   - a request that could never fit the pool is refused at once;
//   - a request echoing its prompt still gets every prompt token (it bypasses
//     the cache lookup);
//   - requests with different cache salts (clients) share no block and see
//     no hit, and get the same tokens bit for bit;
//   - a client holds at most its share of the pool while another client's
//     request is admitted beside it; one that alone needs more is refused.
// Waits are bounded (kWait) only so that a bug fails instead of hanging.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/sampler.h"
#include "tests/testing/engine_reference.h"
#include "tests/testing/engine_streams.h"
#include "tests/testing/test_util.h"

namespace textgen {
namespace {

constexpr absl::Duration kWait = absl::Seconds(60);

using testing::Collect;
using testing::CollectCompletions;
using testing::MakeEngine;
using testing::Output;
using testing::Prompt;
using testing::Request;
using testing::RunAlone;

// All blocks back once nothing runs: none used, the rest free or cached.
bool AllBlocksBack(const Engine& engine) {
  const absl::Time give_up = absl::Now() + kWait;
  while (absl::Now() < give_up) {
    const EngineStats s = engine.stats();
    if (s.kv_blocks_used == 0 && s.slots_in_use == 0 &&
        s.kv_blocks_free + s.kv_blocks_cached == s.kv_blocks_total) {
      return true;
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  return false;
}

class EnginePagedParityTest : public ::testing::TestWithParam<std::string> {};

TEST_P(EnginePagedParityTest, CachedPrefixGivesTheColdTokens) {
  EngineOptions cold_options;
  cold_options.prefix_cache = false;
  EngineOptions cached_options;
  cached_options.prefill_chunk_tokens = 7;  // Publishing as prefill goes.
  std::unique_ptr<Engine> cold = MakeEngine(cold_options, nullptr, GetParam());
  std::unique_ptr<Engine> cached =
      MakeEngine(cached_options, nullptr, GetParam());
  ASSERT_NE(cold, nullptr);
  ASSERT_NE(cached, nullptr);
  const int vocab = cached->config().vocab_size;

  // A 50-token "system prompt", then requests that share it: the first
  // publishes its three full blocks, the others start after them.
  const std::vector<int> shared = Prompt(50, vocab, 7);
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 4; ++i) {
    std::vector<int> prompt = shared;
    const std::vector<int> tail = Prompt(3 + 5 * i, vocab, 100 + i);
    prompt.insert(prompt.end(), tail.begin(), tail.end());
    requests.push_back(Request(prompt, 12, i % 2 == 0 ? 0.0f : 1.0f, 40 + i));
  }
  requests.push_back(requests[1]);  // The same prompt again: 64 tokens hit.

  int64_t expected_hits = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE(i);
    auto cold_stream = cold->Submit(requests[i]);
    auto cached_stream = cached->Submit(requests[i]);
    ASSERT_TRUE(cold_stream.ok() && cached_stream.ok());
    const Output want = Collect(**cold_stream);
    const Output got = Collect(**cached_stream);
    ASSERT_TRUE(got.finish && got.finish->status.ok());
    EXPECT_EQ(got.ids(), want.ids());
    EXPECT_EQ(got.logprobs(), want.logprobs());  // Bit for bit.
    EXPECT_EQ(got.finish->usage.prompt_tokens,
              static_cast<int>(requests[i].prompt.size()));
    if (i > 0) {
      // Whole blocks of 16, stopping short of the last prompt token.
      const int prompt = static_cast<int>(requests[i].prompt.size());
      expected_hits += i == 4 ? (prompt - 1) / 16 * 16 : 48;
    }
  }
  const EngineStats stats = cached->stats();
  EXPECT_EQ(stats.prefix_cache_hit_tokens, expected_hits);
  int64_t lookups = 0;
  for (const auto& r : requests) lookups += r.prompt.size();
  EXPECT_EQ(stats.prefix_cache_lookup_tokens, lookups);
  EXPECT_EQ(cold->stats().prefix_cache_hit_tokens, 0);
  EXPECT_EQ(stats.prompt_tokens + expected_hits, cold->stats().prompt_tokens);
  EXPECT_TRUE(AllBlocksBack(*cached));
  EXPECT_GT(cached->stats().kv_blocks_cached, 0);
}

INSTANTIATE_TEST_SUITE_P(AllGoldenConfigs, EnginePagedParityTest,
                         ::testing::Values("gpt2_learned", "gpt2_sinusoidal",
                                           "llama_gqa", "qwen3_qk_norm"));

TEST(EnginePagedTest, TinyPoolQueuesEvictsAndEveryRequestGetsItsTokens) {
  EngineOptions options;
  options.num_slots = 8;
  options.kv_block_tokens = 4;
  options.kv_cache_tokens = 64;  // 16 blocks: two or three requests at once.
  options.prefill_chunk_tokens = 6;
  std::unique_ptr<Engine> engine = MakeEngine(options);
  ASSERT_NE(engine, nullptr);
  std::unique_ptr<Decoder> reference =
      testing::LoadDecoder(testing::GoldenDir("gpt2_learned"));
  const int vocab = engine->config().vocab_size;

  // Three families of prompts sharing a prefix each, and unshared ones.
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 18; ++i) {
    std::vector<int> prompt =
        i % 4 == 3 ? Prompt(9, vocab, 500 + i) : Prompt(9, vocab, i % 4);
    const std::vector<int> tail = Prompt(1 + i % 5, vocab, 900 + i);
    prompt.insert(prompt.end(), tail.begin(), tail.end());
    requests.push_back(Request(prompt, 10 + i % 7, i % 3 == 0 ? 0.0f : 0.8f,
                               static_cast<uint64_t>(i)));
  }
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const GenerationRequest& r : requests) {
    auto stream = engine->Submit(r);
    ASSERT_TRUE(stream.ok()) << stream.status();
    streams.push_back(*stream);
  }
  for (size_t i = 0; i < streams.size(); ++i) {
    SCOPED_TRACE(i);
    const Output out = Collect(*streams[i]);
    ASSERT_TRUE(out.finish && out.finish->status.ok());
    EXPECT_EQ(out.ids(), RunAlone(*reference, requests[i]).ids);
  }
  EXPECT_TRUE(AllBlocksBack(*engine));
  const EngineStats stats = engine->stats();
  EXPECT_EQ(stats.kv_blocks_total, 16);
  EXPECT_GT(stats.prefix_cache_hit_tokens, 0);
}

TEST(EnginePagedTest, RequestLargerThanThePoolIsRefusedAtOnce) {
  EngineOptions options;
  options.kv_block_tokens = 16;
  options.kv_cache_tokens = 32;
  std::unique_ptr<Engine> engine = MakeEngine(options);
  ASSERT_NE(engine, nullptr);
  const int vocab = engine->config().vocab_size;
  auto refused = engine->Submit(Request(Prompt(20, vocab, 1), 20, 0.0f, 0));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("--kv_cache_tokens"),
            std::string::npos)
      << refused.status();
  // One that fits still runs.
  auto fits = engine->Submit(Request(Prompt(20, vocab, 1), 10, 0.0f, 0));
  ASSERT_TRUE(fits.ok()) << fits.status();
  const Output out = Collect(**fits);
  ASSERT_TRUE(out.finish && out.finish->status.ok());
  EXPECT_EQ(out.ids().size(), 10u);
}

TEST(EnginePagedTest, NCompletionsShareThePromptsBlocks) {
  EngineOptions options;
  options.kv_block_tokens = 8;
  options.prefill_chunk_tokens = 16;  // Completion 0 takes three steps.
  std::unique_ptr<Engine> engine = MakeEngine(options);
  ASSERT_NE(engine, nullptr);
  const std::vector<int> prompt = Prompt(45, engine->config().vocab_size, 4);
  GenerationRequest request = Request(prompt, 10, 0.9f, 500);
  request.n = 4;
  auto stream = engine->Submit(request);
  ASSERT_TRUE(stream.ok());
  const std::vector<Output> out = CollectCompletions(**stream, 4);
  // Completions 1..3 waited for completion 0's prompt and found its five full
  // blocks (40 of the 45 tokens) cached.
  EXPECT_EQ(engine->stats().prefix_cache_hit_tokens, 3 * 40);
  std::unique_ptr<Decoder> reference =
      testing::LoadDecoder(testing::GoldenDir("gpt2_learned"));
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(out[i].finish && out[i].finish->status.ok());
    EXPECT_EQ(out[i].ids(),
              RunAlone(*reference, Request(prompt, 10, 0.9f, 500 + i)).ids)
        << "completion " << i;
  }
  EXPECT_TRUE(AllBlocksBack(*engine));
}

TEST(EnginePagedTest, EchoedPromptIsWholeEvenWhenItsPrefixIsCached) {
  std::unique_ptr<Engine> engine = MakeEngine({});
  ASSERT_NE(engine, nullptr);
  const std::vector<int> prompt = Prompt(40, engine->config().vocab_size, 3);
  auto first = engine->Submit(Request(prompt, 4, 0.0f, 0));
  ASSERT_TRUE(first.ok());
  const Output plain = Collect(**first);
  GenerationRequest echo = Request(prompt, 4, 0.0f, 0);
  echo.echo_prompt = true;
  auto second = engine->Submit(echo);
  ASSERT_TRUE(second.ok());
  const Output echoed = Collect(**second);
  EXPECT_EQ(echoed.prompt_ids(), prompt);
  EXPECT_EQ(echoed.ids(), plain.ids());
  EXPECT_EQ(engine->stats().prefix_cache_hit_tokens, 0);
}

TEST(EnginePagedTest, ClientsWithDifferentSaltsShareNoBlocks) {
  EngineOptions options;
  options.kv_block_tokens = 16;
  std::unique_ptr<Engine> engine = MakeEngine(options);
  ASSERT_NE(engine, nullptr);
  const std::vector<int> prompt = Prompt(40, engine->config().vocab_size, 9);
  auto from = [&](const std::string& client) {
    GenerationRequest r = Request(prompt, 6, 0.8f, 77);
    r.client = client;
    r.cache_salt = "salt of " + client;
    return r;
  };
  auto run = [&](const GenerationRequest& r) {
    auto stream = engine->Submit(r);
    EXPECT_TRUE(stream.ok()) << stream.status();
    return stream.ok() ? Collect(**stream) : Output{};
  };

  // a publishes the prompt's two full blocks; b, with the same prompt, finds
  // none of them and publishes its own; a again finds its own.
  const Output a = run(from("a"));
  EXPECT_EQ(engine->stats().prefix_cache_hit_tokens, 0);
  EXPECT_EQ(engine->stats().kv_blocks_cached, 2);
  const Output b = run(from("b"));
  EXPECT_EQ(engine->stats().prefix_cache_hit_tokens, 0)
      << "b must not see a's prompt in the cache";
  EXPECT_EQ(engine->stats().kv_blocks_cached, 4) << "no block shared";
  const Output a_again = run(from("a"));
  EXPECT_EQ(engine->stats().prefix_cache_hit_tokens, 32);
  EXPECT_EQ(engine->stats().kv_blocks_cached, 4);

  // Cached or not, salted or not: the same tokens, bit for bit.
  const Output unsalted = run(Request(prompt, 6, 0.8f, 77));
  for (const Output* out : {&a, &b, &a_again, &unsalted}) {
    ASSERT_TRUE(out->finish && out->finish->status.ok());
    EXPECT_EQ(out->ids(), a.ids());
    EXPECT_EQ(out->logprobs(), a.logprobs());
  }
  std::unique_ptr<Decoder> reference =
      testing::LoadDecoder(testing::GoldenDir("gpt2_learned"));
  EXPECT_EQ(a.ids(), RunAlone(*reference, Request(prompt, 6, 0.8f, 77)).ids);
}

TEST(EnginePagedTest, AClientHoldsAtMostItsShareWhileAnotherGoesAhead) {
  EngineOptions options;
  options.num_slots = 8;
  options.kv_block_tokens = 4;
  options.kv_cache_tokens = 64;          // 16 blocks.
  options.client_max_kv_fraction = 0.5;  // 8 blocks per client.
  options.stream_buffer_events = 1;      // Unread streams hold their blocks.
  std::unique_ptr<Engine> engine = MakeEngine(options);
  ASSERT_NE(engine, nullptr);
  const int vocab = engine->config().vocab_size;
  auto from = [&](const std::string& client, int prompt_tokens,
                  int max_new_tokens, unsigned seed) {
    GenerationRequest r =
        Request(Prompt(prompt_tokens, vocab, seed), max_new_tokens, 0.0f, seed);
    r.client = client;
    return r;
  };

  // Alone more than the share: refused at once, naming the flag.
  auto too_big = engine->Submit(from("a", 20, 20, 1));  // 39 positions: 10.
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(too_big.status().message().find("--client_max_kv_fraction"),
            std::string::npos)
      << too_big.status();
  EXPECT_EQ(engine->stats().rejected_client_share, 1);

  // Client a opens three streams of 4 blocks each (6 + 11 - 1 positions)
  // and reads none of them: two run (8 blocks, its share) and wait for
  // their reader, the third waits in the queue.
  std::vector<GenerationRequest> a_requests;
  std::vector<std::shared_ptr<RequestStream>> a_streams;
  for (unsigned i = 0; i < 3; ++i) {
    a_requests.push_back(from("a", 6, 11, 10 + i));
    auto stream = engine->Submit(a_requests.back());
    ASSERT_TRUE(stream.ok()) << stream.status();
    a_streams.push_back(*stream);
  }
  // Client b's small request goes ahead of a's third and finishes.
  const GenerationRequest b_request = from("b", 3, 2, 20);
  auto b = engine->Submit(b_request);
  ASSERT_TRUE(b.ok()) << b.status();
  const Output b_out = Collect(**b);
  ASSERT_TRUE(b_out.finish && b_out.finish->status.ok());
  const EngineStats stats = engine->stats();
  EXPECT_EQ(stats.slots_in_use, 2) << "a's two at its share";
  EXPECT_EQ(stats.queue_depth, 1) << "a's third waits";
  EXPECT_LE(stats.kv_blocks_used, 8);

  // Once read, a's streams all finish, and each gets what it gets alone.
  std::unique_ptr<Decoder> reference =
      testing::LoadDecoder(testing::GoldenDir("gpt2_learned"));
  EXPECT_EQ(b_out.ids(), RunAlone(*reference, b_request).ids);
  for (size_t i = 0; i < a_streams.size(); ++i) {
    SCOPED_TRACE(i);
    const Output out = Collect(*a_streams[i]);
    ASSERT_TRUE(out.finish && out.finish->status.ok());
    EXPECT_EQ(out.ids(), RunAlone(*reference, a_requests[i]).ids);
  }
  EXPECT_TRUE(AllBlocksBack(*engine));
}

}  // namespace
}  // namespace textgen
