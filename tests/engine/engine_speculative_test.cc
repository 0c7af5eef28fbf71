// Speculative decoding (engine/speculation.h) changes how fast tokens come,
// never which: every test here runs the same requests with speculation off
// and on and asserts the streams are identical — token ids, logprobs and top
// log-probabilities as float bits, text, prompt scores, finish reasons and
// usage — while the engine's counters show that proposals were made,
// accepted and rejected (else the test would prove nothing).
//
// The models are the random-weight golden checkpoints (tests/golden/). Their
// prompts repeat a random run of tokens, so prompt lookup finds proposals,
// and greedy decoding of a random model falls into loops that it catches;
// sampled requests mostly reject what it proposes. Both paths are taken.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "engine/speculation.h"
#include "model/formats/model_loader.h"
#include "tests/testing/engine_reference.h"
#include "tests/testing/engine_streams.h"
#include "tests/testing/piece_tokenizer.h"
#include "tests/testing/shared_data.h"

namespace textgen {
namespace {

using testing::CollectCompletions;
using testing::Output;
using testing::PieceTokenizer;
using testing::Reference;
using testing::Request;

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// One letter per token, cycling through a small alphabet, so that stop
// strings taken from an output are likely to recur.
std::shared_ptr<const Tokenizer> Letters(int vocab) {
  std::vector<std::string> pieces;
  for (int id = 0; id < vocab; ++id) {
    pieces.push_back(std::string(1, static_cast<char>('a' + id % 7)));
  }
  return std::make_shared<PieceTokenizer>(std::move(pieces));
}

// `run` random tokens, then the same tokens again, and `tail` more of them:
// text that quotes itself.
std::vector<int> RepeatingPrompt(int run, int tail, int vocab, unsigned seed) {
  std::vector<int> prompt = testing::Prompt(run, vocab, seed);
  for (int i = 0; i < run + tail; ++i) prompt.push_back(prompt[i % run]);
  return prompt;
}

// Sixteen unrelated requests: greedy and seeded sampling at several
// temperatures, top-k, top-p, a repetition penalty, n = 3, prompt scores,
// echo, top log-probabilities, short and context-filling lengths, a request
// that lowers k and one that turns speculation off.
std::vector<GenerationRequest> Workload(const ModelConfig& config) {
  const int vocab = config.vocab_size;
  std::vector<GenerationRequest> w;
  w.push_back(Request(RepeatingPrompt(9, 4, vocab, 1), 48, 0, 0));
  w.back().top_logprobs = 3;
  w.push_back(Request(RepeatingPrompt(6, 2, vocab, 2), 40, 0.7f, 11));
  w.push_back(Request(RepeatingPrompt(12, 0, vocab, 3), 40, 1.0f, 12));
  w.back().sampling.top_k = 5;
  w.push_back(Request(RepeatingPrompt(5, 3, vocab, 4), 40, 1.5f, 13));
  w.back().sampling.top_p = 0.9f;
  w.push_back(Request(RepeatingPrompt(8, 1, vocab, 5), 40, 0, 0));
  w.back().sampling.repetition_penalty = 1.3f;
  w.push_back(Request(RepeatingPrompt(7, 5, vocab, 6), 30, 0.8f, 14));
  w.back().n = 3;
  w.push_back(Request(RepeatingPrompt(10, 2, vocab, 7), 36, 0, 0));
  w.back().prompt_logprobs = 2;
  w.push_back(Request(RepeatingPrompt(4, 4, vocab, 8), 36, 0, 0));
  w.back().echo_prompt = true;
  w.back().top_logprobs = 2;
  w.push_back(Request(RepeatingPrompt(6, 0, vocab, 9), 1, 0, 0));
  w.push_back(Request(RepeatingPrompt(6, 1, vocab, 10), 2, 0, 0));
  // Fills the context: ends with kContextFull, the last proposals cut by it.
  const int long_prompt = config.context_length - 30;
  w.push_back(Request(
      RepeatingPrompt(long_prompt / 2, long_prompt % 2, vocab, 11), 100, 0, 0));
  w.push_back(Request(RepeatingPrompt(9, 3, vocab, 12), 40, 0, 0));
  w.back().speculative_tokens = 2;
  w.push_back(Request(RepeatingPrompt(9, 3, vocab, 13), 40, 0, 0));
  w.back().speculative_tokens = 0;
  w.push_back(Request(RepeatingPrompt(3, 7, vocab, 14), 40, 0.3f, 15));
  w.push_back(Request(testing::Prompt(11, vocab, 15), 40, 0, 0));
  w.push_back(Request(RepeatingPrompt(5, 5, vocab, 16), 40, 2.0f, 16));
  return w;
}

struct Runs {
  std::vector<std::vector<Output>> outputs;  // Per request, per completion.
  EngineStats stats;
};

// Starts `created` and runs `requests` on it: all submitted at once (a mixed
// batch), or one after another.
Runs RunOn(absl::StatusOr<std::unique_ptr<Engine>> created,
           const std::vector<GenerationRequest>& requests, bool together) {
  Runs run;
  EXPECT_TRUE(created.ok()) << created.status();
  if (!created.ok()) return run;
  Engine& engine = **created;
  EXPECT_TRUE(engine.Start().ok());
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const GenerationRequest& r : requests) {
    absl::StatusOr<std::shared_ptr<RequestStream>> stream = engine.Submit(r);
    EXPECT_TRUE(stream.ok()) << stream.status();
    if (!stream.ok()) return run;
    if (together) {
      streams.push_back(*stream);
    } else {
      run.outputs.push_back(CollectCompletions(**stream, r.n));
    }
  }
  for (size_t i = 0; i < streams.size(); ++i) {
    run.outputs.push_back(CollectCompletions(*streams[i], requests[i].n));
  }
  run.stats = engine.stats();
  return run;
}

// Runs `requests` on golden model `model` (see RunOn). With
// SpeculativeMode::kDraft the draft is the target's own checkpoint, in another
// Decoder: its greedy guesses are what a greedy request samples, and a sampled
// request's mostly not.
Runs RunRequests(const std::string& model, const EngineOptions& options,
                 const std::vector<GenerationRequest>& requests,
                 bool together) {
  std::unique_ptr<Decoder> decoder =
      testing::LoadDecoder(testing::GoldenDir(model));
  std::shared_ptr<const Tokenizer> tokenizer =
      Letters(decoder->config().vocab_size);
  return RunOn(
      Engine::Create(options, std::move(decoder), tokenizer,
                     options.speculation.mode == SpeculativeMode::kDraft
                         ? testing::LoadDecoder(testing::GoldenDir(model))
                         : nullptr),
      requests, together);
}

void ExpectSameEvents(const std::vector<TokenEvent>& want,
                      const std::vector<TokenEvent>& got,
                      const std::string& where) {
  ASSERT_EQ(want.size(), got.size()) << where;
  for (size_t t = 0; t < want.size(); ++t) {
    const TokenEvent& a = want[t];
    const TokenEvent& b = got[t];
    const std::string at = absl::StrCat(where, " token ", t);
    ASSERT_EQ(a.id, b.id) << at;
    EXPECT_EQ(Bits(a.logprob), Bits(b.logprob)) << at;
    EXPECT_EQ(a.text, b.text) << at;
    EXPECT_EQ(a.position, b.position) << at;
    ASSERT_EQ(a.top_logprobs.size(), b.top_logprobs.size()) << at;
    for (size_t k = 0; k < a.top_logprobs.size(); ++k) {
      EXPECT_EQ(a.top_logprobs[k].id, b.top_logprobs[k].id) << at;
      EXPECT_EQ(Bits(a.top_logprobs[k].logprob),
                Bits(b.top_logprobs[k].logprob))
          << at;
    }
  }
}

void ExpectSameRun(const Runs& want, const Runs& got,
                   const std::string& label) {
  ASSERT_EQ(want.outputs.size(), got.outputs.size()) << label;
  for (size_t r = 0; r < want.outputs.size(); ++r) {
    ASSERT_EQ(want.outputs[r].size(), got.outputs[r].size());
    for (size_t c = 0; c < want.outputs[r].size(); ++c) {
      const std::string where =
          absl::StrCat(label, ": request ", r, " completion ", c);
      const Output& a = want.outputs[r][c];
      const Output& b = got.outputs[r][c];
      ExpectSameEvents(a.prompt, b.prompt, where + " (prompt)");
      ExpectSameEvents(a.generated, b.generated, where);
      ASSERT_TRUE(a.finish && b.finish) << where;
      EXPECT_EQ(a.finish->status, b.finish->status) << where;
      EXPECT_EQ(a.finish->reason, b.finish->reason) << where;
      EXPECT_EQ(a.finish->usage.generated_tokens,
                b.finish->usage.generated_tokens)
          << where;
      EXPECT_EQ(a.finish->seed, b.finish->seed) << where;
    }
  }
}

EngineOptions Options(SpeculativeMode mode, int k = 5, int max_batch = 16) {
  EngineOptions options;
  options.num_slots = 16;
  options.max_queue = 64;
  options.prefill_chunk_tokens = 32;
  options.speculation.mode = mode;
  options.speculation.tokens = k;
  options.speculation.max_batch = max_batch;
  return options;
}

class SpeculativeIdentityTest : public ::testing::TestWithParam<std::string> {};

INSTANTIATE_TEST_SUITE_P(GoldenConfigs, SpeculativeIdentityTest,
                         ::testing::Values("gpt2_learned", "llama_gqa",
                                           "qwen3_qk_norm",
                                           "mistral_no_window"));

TEST_P(SpeculativeIdentityTest, ProposalsChangeNothingButTheSteps) {
  const std::string model = GetParam();
  const ModelConfig config =
      testing::LoadDecoder(testing::GoldenDir(model))->config();
  std::vector<GenerationRequest> requests = Workload(config);

  // Alone, one by one, without speculation: the reference.
  const Runs plain =
      RunRequests(model, Options(SpeculativeMode::kOff), requests, false);
  ASSERT_EQ(plain.outputs.size(), requests.size());
  // A stop string taken from the reference's own text (its 9th..11th
  // generated characters), so that it is certain to be met.
  GenerationRequest stopped = requests[0];
  stopped.stop = {plain.outputs[0][0].text().substr(8, 3)};
  requests.push_back(stopped);
  const Runs plain_all =
      RunRequests(model, Options(SpeculativeMode::kOff), requests, false);
  EXPECT_EQ(plain_all.outputs.back()[0].finish->reason, FinishReason::kStop);

  // Alone with prompt lookup and with a draft model, and all together
  // (mixed batches of up to 16, everything speculating), at k = 5 and k = 2.
  for (SpeculativeMode mode :
       {SpeculativeMode::kNgram, SpeculativeMode::kDraft})
    for (bool together : {false, true}) {
      for (int k : {5, 2}) {
        const std::string label =
            absl::StrCat(model, " ", SpeculativeModeName(mode),
                         together ? " together" : " alone", " k=", k);
        const Runs spec =
            RunRequests(model, Options(mode, k), requests, together);
        ExpectSameRun(plain_all, spec, label);
        RecordProperty(absl::StrCat("accepted ", label),
                       absl::StrCat(spec.stats.spec_accepted_tokens, " of ",
                                    spec.stats.spec_proposed_tokens,
                                    " proposed, ", spec.stats.steps,
                                    " steps against ", plain_all.stats.steps));
        EXPECT_GT(spec.stats.spec_accepted_tokens, 0) << label;
        EXPECT_GT(spec.stats.spec_proposed_tokens,
                  spec.stats.spec_accepted_tokens)
            << label;
        // Accepted proposals are tokens that took no step of their own.
        if (!together) {
          EXPECT_LT(spec.stats.steps, plain_all.stats.steps) << label;
        }
      }
    }
}

// A real model (loaded once) and its drafts, for the engines of one test.
struct RealModel {
  std::unique_ptr<Decoder> decoder;
  std::shared_ptr<const Tokenizer> tokenizer;
  std::unique_ptr<Decoder> draft;

  static std::unique_ptr<Decoder> Share(const Decoder& d) {
    return std::make_unique<Decoder>(d.config(), d.shared_weights());
  }
};

// Text prompts of a trained model: passages it may quote, greedy and
// sampled at several temperatures, n = 2, stop strings, prompt and top
// log-probabilities.
std::vector<GenerationRequest> TextWorkload(
    const Tokenizer& tokenizer, const std::vector<std::string>& texts,
    const std::string& stop) {
  std::vector<GenerationRequest> w;
  const float temperatures[] = {0, 0, 0.5f, 0.8f, 1.0f, 1.3f};
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<int> prompt = *tokenizer.Encode(texts[i]);
    if (tokenizer.bos_id() >= 0)
      prompt.insert(prompt.begin(), tokenizer.bos_id());
    for (size_t t = 0; t < std::size(temperatures); ++t) {
      GenerationRequest r =
          Request(prompt, 48, temperatures[t], 100 + 10 * i + t);
      if (t == 1) r.stop = {stop};
      if (t == 2) r.top_logprobs = 2;
      if (t == 3) r.n = 2;
      if (t == 4 && i == 0) r.prompt_logprobs = 1;
      w.push_back(std::move(r));
    }
  }
  return w;
}

// Runs `requests` alone without speculation and together (a mixed batch)
// with prompt lookup and with `model.draft`, and checks every stream is the
// same.
void ExpectIdentityOnRealModel(const RealModel& model,
                               const std::vector<GenerationRequest>& requests,
                               const std::string& label) {
  auto run = [&](SpeculativeMode mode, bool together) {
    return RunOn(Engine::Create(Options(mode), RealModel::Share(*model.decoder),
                                model.tokenizer,
                                mode == SpeculativeMode::kDraft
                                    ? RealModel::Share(*model.draft)
                                    : nullptr),
                 requests, together);
  };
  const Runs plain = run(SpeculativeMode::kOff, false);
  bool stopped = false;
  for (const auto& completions : plain.outputs) {
    stopped |= completions[0].finish->reason == FinishReason::kStop;
  }
  EXPECT_TRUE(stopped) << label << ": no request met its stop string";
  for (SpeculativeMode mode :
       {SpeculativeMode::kNgram, SpeculativeMode::kDraft}) {
    const std::string name =
        absl::StrCat(label, " ", SpeculativeModeName(mode));
    const Runs spec = run(mode, true);
    ExpectSameRun(plain, spec, name);
    EXPECT_GT(spec.stats.spec_accepted_tokens, 0) << name;
    EXPECT_GT(spec.stats.spec_proposed_tokens, spec.stats.spec_accepted_tokens)
        << name;
    ::testing::Test::RecordProperty(
        absl::StrCat("accepted ", name),
        absl::StrCat(spec.stats.spec_accepted_tokens, " of ",
                     spec.stats.spec_proposed_tokens));
  }
}

const std::vector<std::string>& ShakespeareTexts() {
  static const auto* texts = new std::vector<std::string>{
      "ROMEO:\nBut soft, what light through yonder window breaks?\n\n"
      "ROMEO:\nBut soft, what light",
      "First Citizen:\nBefore we proceed any further, hear me speak.\n\n"
      "All:\nSpeak, speak.\n\nFirst Citizen:\nBefore we",
      "KING RICHARD II:\nNo matter where; of comfort no man speak:\n"};
  return *texts;
}

TEST(SpeculativeRealModelTest, ShippedModelWithItsDraft) {
  const std::string dir = absl::StrCat(TEXTGEN_SOURCE_DIR, "/models/");
  absl::StatusOr<LoadedModel> target = LoadModel(dir + "shakespeare-char");
  absl::StatusOr<LoadedModel> draft = LoadModel(dir + "shakespeare-char-draft");
  ASSERT_TRUE(target.ok()) << target.status();
  ASSERT_TRUE(draft.ok()) << draft.status();
  ASSERT_TRUE(DraftModel::CheckTokenizers(target->tokenizer.get(),
                                          draft->tokenizer.get())
                  .ok());
  RealModel model;
  model.tokenizer = std::move(target->tokenizer);
  model.decoder = std::make_unique<Decoder>(std::move(target->checkpoint));
  model.draft = std::make_unique<Decoder>(std::move(draft->checkpoint));
  ExpectIdentityOnRealModel(
      model, TextWorkload(*model.tokenizer, ShakespeareTexts(), "\n"),
      "shakespeare-char");
}

TEST(SpeculativeRealModelTest, Stories260kWithItselfAsDraft) {
  const std::string dir = testing::SharedDir() + "/models/stories260K";
  if (!testing::Exists(dir + "/stories260K.bin")) {
    GTEST_SKIP() << "stories260K is not at " << dir
                 << " (set TEXTGEN_SHARED_DIR to the shared/ directory)";
  }
  absl::StatusOr<LoadedModel> target = LoadModel(dir + "/stories260K.bin");
  ASSERT_TRUE(target.ok()) << target.status();
  RealModel model;
  model.tokenizer = std::move(target->tokenizer);
  model.decoder = std::make_unique<Decoder>(std::move(target->checkpoint));
  model.draft = RealModel::Share(*model.decoder);
  ExpectIdentityOnRealModel(
      model,
      TextWorkload(*model.tokenizer,
                   {"Once upon a time, there was a little girl named Lily. "
                    "She loved to play outside. Once upon a time, there was",
                    "Tom had a big red ball. Tom had a big",
                    "The sun was shining and the birds were singing."},
                   "."),
      "stories260K");
}

TEST(SpeculativeTest, ABatchLargerThanMaxBatchDoesNotSpeculate) {
  const std::string model = "gpt2_learned";
  const ModelConfig config =
      testing::LoadDecoder(testing::GoldenDir(model))->config();
  const std::vector<GenerationRequest> requests = Workload(config);
  const Runs plain =
      RunRequests(model, Options(SpeculativeMode::kOff), requests, true);
  // 16 requests at once, proposals only while at most 2 decode: none until
  // the batch has thinned out at the end.
  const Runs spec = RunRequests(model, Options(SpeculativeMode::kNgram, 5, 2),
                                requests, true);
  ExpectSameRun(plain, spec, "max_batch=2");
  EXPECT_LT(spec.stats.spec_proposed_tokens,
            RunRequests(model, Options(SpeculativeMode::kNgram, 5, 16),
                        requests, true)
                .stats.spec_proposed_tokens);
}

TEST(SpeculativeTest, KvDtypeBf16AndPrefixCacheKeepTheIdentity) {
  const std::string model = "llama_gqa";
  const ModelConfig config =
      testing::LoadDecoder(testing::GoldenDir(model))->config();
  std::vector<GenerationRequest> requests = Workload(config);
  // The same prompt three times: later ones attach its cached blocks.
  for (int i = 0; i < 3; ++i) requests.push_back(requests[0]);
  EngineOptions off = Options(SpeculativeMode::kOff);
  EngineOptions on = Options(SpeculativeMode::kNgram);
  off.kv_dtype = on.kv_dtype = KvDtype::kBf16;
  off.kv_block_tokens = on.kv_block_tokens = 4;
  const Runs plain = RunRequests(model, off, requests, false);
  const Runs spec = RunRequests(model, on, requests, true);
  ExpectSameRun(plain, spec, "bf16, blocks of 4");
  EXPECT_GT(spec.stats.spec_accepted_tokens, 0);
  EXPECT_GT(spec.stats.prefix_cache_hit_tokens, 0);
}

TEST(SpeculativeTest, ADraftMustBeGivenExactlyWhenAskedForAndFit) {
  auto create = [](SpeculativeMode mode, const std::string& draft) {
    EngineOptions options = Options(mode);
    return Engine::Create(
               options,
               testing::LoadDecoder(testing::GoldenDir("gpt2_learned")),
               nullptr,
               draft.empty() ? nullptr
                             : testing::LoadDecoder(testing::GoldenDir(draft)))
        .status();
  };
  EXPECT_TRUE(create(SpeculativeMode::kDraft, "gpt2_learned").ok());
  EXPECT_NE(create(SpeculativeMode::kDraft, "").message().find("needs a draft"),
            std::string::npos);
  EXPECT_NE(create(SpeculativeMode::kNgram, "gpt2_learned")
                .message()
                .find("not draft"),
            std::string::npos);
  // llama_gqa's vocabulary is another size: not the same tokenizer.
  EXPECT_NE(create(SpeculativeMode::kDraft, "llama_gqa")
                .message()
                .find("share the target's tokenizer"),
            std::string::npos);
}

TEST(SpeculativeTest, AnAttentionTapSendsTheSameRowsFromAVerificationChunk) {
  const std::string model = "gpt2_learned";
  const ModelConfig config =
      testing::LoadDecoder(testing::GoldenDir(model))->config();
  // A looping greedy request that lookup would guess well, tapped.
  GenerationRequest tapped =
      Request(RepeatingPrompt(9, 4, config.vocab_size, 1), 32, 0, 0);
  tapped.attention_tap = AttentionTap{{0}, {1}};
  const Runs plain =
      RunRequests(model, Options(SpeculativeMode::kOff), {tapped}, false);
  const Runs spec =
      RunRequests(model, Options(SpeculativeMode::kNgram), {tapped}, false);
  ExpectSameRun(plain, spec, "tapped");
  // Tokens came from verification chunks: each token's rows are those of
  // the chunk's query that picked it, cut to the keys it sees.
  EXPECT_GT(spec.stats.spec_accepted_tokens, 0);
  const Output& a = plain.outputs[0][0];
  const Output& b = spec.outputs[0][0];
  ASSERT_EQ(a.generated.size(), b.generated.size());
  for (size_t t = 0; t < a.generated.size(); ++t) {
    ASSERT_EQ(a.generated[t].attention.size(), 1u);
    ASSERT_EQ(b.generated[t].attention.size(), 1u);
    EXPECT_EQ(a.generated[t].attention[0].weights,
              b.generated[t].attention[0].weights)
        << "token " << t;
  }
}

TEST(SpeculativeTest, ANegativeRequestedKIsRefusedNamingTheField) {
  std::unique_ptr<Engine> engine =
      testing::MakeEngine(Options(SpeculativeMode::kNgram));
  ASSERT_NE(engine, nullptr);
  GenerationRequest r = Request({1, 2, 3}, 4, 0, 0);
  r.speculative_tokens = -1;
  const auto stream = engine->Submit(r);
  EXPECT_EQ(stream.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(stream.status().message().find("speculative_tokens"),
            std::string::npos)
      << stream.status();
}

TEST(SpeculationOptionsTest, OutOfRangeValuesAreNamed) {
  EngineOptions options = Options(SpeculativeMode::kNgram, 65);
  EXPECT_NE(options.Validate().message().find("speculative_tokens"),
            std::string::npos);
  // 0 is each mode's default k.
  options = Options(SpeculativeMode::kNgram, 0);
  EXPECT_TRUE(options.Validate().ok());
  EXPECT_EQ(options.speculation.Tokens(), 5);
  options.speculation.mode = SpeculativeMode::kDraft;
  EXPECT_EQ(options.speculation.Tokens(), 3);
  options.speculation.mode = SpeculativeMode::kOff;
  EXPECT_EQ(options.speculation.Tokens(), 0);
  options = Options(SpeculativeMode::kNgram, 5, 0);
  EXPECT_NE(options.Validate().message().find("speculative_max_batch"),
            std::string::npos);
  EXPECT_EQ(ParseSpeculativeMode("lookahead").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*ParseSpeculativeMode("ngram"), SpeculativeMode::kNgram);
}

TEST(DraftModelTest, GuessesWhatTheDraftWouldPickAndNothingWhenThePoolIsFull) {
  const ModelConfig config =
      testing::LoadDecoder(testing::GoldenDir("gpt2_learned"))->config();
  KvCacheOptions cache;
  cache.num_slots = 2;
  cache.block_tokens = 4;
  cache.num_blocks = 6;  // 24 positions for both slots together.
  auto draft = DraftModel::Create(
      testing::LoadDecoder(testing::GoldenDir("gpt2_learned")), config, cache);
  ASSERT_TRUE(draft.ok()) << draft.status();
  const std::vector<int> history = testing::Prompt(10, config.vocab_size, 3);
  std::vector<int> guesses;
  (*draft)->Propose({{0, history, 4, &guesses}});
  // The draft is the target itself: its guesses are greedy decoding's.
  const Reference ref = testing::RunAlone(
      *testing::LoadDecoder(testing::GoldenDir("gpt2_learned")), history,
      SamplingParams{0}, 0, 4);
  EXPECT_EQ(guesses, ref.ids);
  // Slot 1 wants 20 more positions: the pool has 24 - 16 (slot 0's
  // 13 rounded up) = 8. No guesses, no error; slot 0 is forgotten too.
  const std::vector<int> longer = testing::Prompt(20, config.vocab_size, 4);
  std::vector<int> more;
  (*draft)->Propose({{1, longer, 4, &more}});
  EXPECT_TRUE(more.empty());
  // And it starts afresh: slot 0 again gets its guesses.
  (*draft)->Propose({{0, history, 4, &guesses}});
  EXPECT_EQ(guesses, ref.ids);
}

TEST(ProposeByLookupTest, ContinuesTheLatestEarlierOccurrenceLongestFirst) {
  std::vector<int> out;
  // "5 6" occurs at 1 and at 5; the latest is followed by 9 1 5.
  ProposeByLookup({4, 5, 6, 7, 8, 5, 6, 9, 1, 5, 6}, 3, 1, 3, out);
  EXPECT_EQ(out, (std::vector<int>{9, 1, 5}));
  // The 3-gram "1 5 6" wins over the later 2-gram match.
  ProposeByLookup({1, 5, 6, 2, 3, 5, 6, 4, 1, 5, 6}, 2, 1, 3, out);
  EXPECT_EQ(out, (std::vector<int>{2, 3}));
  // Past the end of the history the copy goes on from its own start: the
  // loop "8 7" continues.
  ProposeByLookup({7, 8, 7}, 4, 1, 2, out);
  EXPECT_EQ(out, (std::vector<int>{8, 7, 8, 7}));
  ProposeByLookup({1, 2, 5, 5, 5}, 3, 1, 3, out);  // "5 5" one back.
  EXPECT_EQ(out, (std::vector<int>{5, 5, 5}));
  // No earlier occurrence of the last token: nothing.
  ProposeByLookup({1, 2, 3}, 4, 1, 3, out);
  EXPECT_TRUE(out.empty());
  // Shorter than ngram_min + 1: nothing.
  ProposeByLookup({3}, 4, 1, 3, out);
  EXPECT_TRUE(out.empty());
  ProposeByLookup({3, 3}, 4, 2, 3, out);
  EXPECT_TRUE(out.empty());
}

TEST(DraftLengthTest, ShrinksOnMissesPausesAndRecovers) {
  DraftLength length(5);
  EXPECT_EQ(length.Next(), 5);
  length.Record(5, 2);  // Guesses ran out about there.
  EXPECT_EQ(length.Next(), 3);
  length.Record(3, 3);  // All accepted: grows.
  EXPECT_EQ(length.Next(), 5);
  length.Record(5, 0);
  EXPECT_EQ(length.Next(), 1);
  length.Record(1, 0);  // Second miss in a row: a pause of 1 step.
  EXPECT_EQ(length.Next(), 0);
  EXPECT_EQ(length.Next(), 1);
  length.Record(1, 0);  // Third: a pause of 2.
  EXPECT_EQ(length.Next(), 0);
  EXPECT_EQ(length.Next(), 0);
  EXPECT_EQ(length.Next(), 1);
  length.Record(1, 1);  // Accepted: no more pauses, grows again.
  EXPECT_EQ(length.Next(), 3);
  length.Record(3, 0);
  EXPECT_EQ(length.Next(), 1);
}

}  // namespace
}  // namespace textgen
