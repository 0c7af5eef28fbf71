// The API of encoder–decoder models end to end (issue 20): a TextgenServer in
// the test process on a port of 127.0.0.1, serving a tiny encoder–decoder
// checkpoint with random weights (tests/testing/make_tiny_seq2seq.py: 3 encoder
// and 2 decoder blocks, 2 heads, a character vocabulary with <s> and </s>), and
// clients over real sockets. Nothing depends on what the random model says:
// every expectation is either a status, a shape, or what the model computes
// when called directly (Decoder::Encode then Forward).
//
// What they show:
//   - ModelInfo says "encoder-decoder" and counts the encoder's blocks; a
//     decoder-only server still says its family, with 0 encoder layers;
//   - each refusal of `source` (missing, empty, unset, untokenizable, too
//     long, given to a decoder-only model) has its status and message;
//   - DebugAttention returns encoder self (S×S), decoder self (T×T, causal)
//     and cross (T×S) maps, each labelled with its kind, equal to the
//     model's own captured maps; rows sum to 1; the source is tokenized with
//     no BOS and the absent prompt is [BOS]; layer and head filters apply to
//     both stacks; --max_attention_tokens bounds the source; large maps come
//     in pieces of rows that reassemble;
//   - Generate with a source equals the model's greedy decoding, and the
//     attention tap streams cross rows (one weight per source position)
//     after the decoder's own rows.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "model/formats/model_loader.h"
#include "server/server.h"
#include "tests/testing/server_fixture.h"
#include "tests/testing/test_util.h"
#include "textgen/v1/textgen.grpc.pb.h"

namespace textgen {
namespace {

namespace pb = ::textgen::v1;
using ::testing::HasSubstr;

using testing::ContextWithWait;
using testing::Outcome;

constexpr int kBos = 97, kEos = 98;  // make_tiny_seq2seq.py's control tokens.
constexpr int kEncoderLayers = 3, kDecoderLayers = 2, kHeads = 2;

// The tiny encoder–decoder checkpoint, written once per test process.
const std::string& Seq2seqDir() {
  static const std::string dir = [] {
    const std::string path = (std::filesystem::path(::testing::TempDir()) /
                              absl::StrCat("seq2seq_e2e_model_", getpid()))
                                 .string();
    const auto out = testing::RunCommand(
        absl::StrCat(TEXTGEN_PYTHON, " ", TEXTGEN_SOURCE_DIR,
                     "/tests/testing/make_tiny_seq2seq.py ", path));
    EXPECT_TRUE(out.has_value()) << "make_tiny_seq2seq.py failed";
    return path;
  }();
  return dir;
}

// gpt2_learned (decoder-only) with a character vocabulary, as e2e_test's.
const std::string& DecoderOnlyDir() {
  static const std::string dir =
      testing::Gpt2LearnedWithCharVocab("seq2seq_e2e_decoder_only");
  return dir;
}

// A DebugAttention reply, its pieces reassembled per (kind, layer, head).
struct AttentionReply {
  std::vector<pb::PromptToken> tokens;
  std::vector<pb::PromptToken> source_tokens;
  std::map<std::tuple<int, int, int>, std::vector<float>> maps;
  std::vector<std::tuple<int, int, int>> order;  // As they came.
  int num_layers = -1, num_encoder_layers = -1, num_heads = -1;
  grpc::Status status;
  int messages = 0;

  const std::vector<float>& map(pb::AttentionKind kind, int layer,
                                int head) const {
    static const std::vector<float> kNone;
    auto it = maps.find({kind, layer, head});
    return it == maps.end() ? kNone : it->second;
  }
};

std::vector<int> Ids(const std::vector<pb::PromptToken>& tokens) {
  std::vector<int> ids;
  for (const pb::PromptToken& t : tokens) ids.push_back(t.id());
  return ids;
}

pb::Prompt TextPrompt(const std::string& text) {
  pb::Prompt prompt;
  prompt.set_text(text);
  return prompt;
}

pb::Prompt IdsPrompt(const std::vector<int>& ids) {
  pb::Prompt prompt;
  prompt.mutable_token_ids()->mutable_ids()->Add(ids.begin(), ids.end());
  return prompt;
}

class Seq2seqE2eTest : public testing::ServerTest {
 protected:
  static TextgenServerOptions DefaultOptions() {
    TextgenServerOptions options;
    options.address = "127.0.0.1:0";
    options.engine.num_slots = 4;
    options.engine.max_queue = 32;
    options.engine.max_new_tokens_limit = 60;
    options.engine.default_max_new_tokens = 10;
    options.engine.max_prompt_tokens = 40;
    options.service.model_name = "tiny-seq2seq";
    options.service.max_attention_tokens = 30;
    return options;
  }

  void StartServer(const std::string& dir,
                   const TextgenServerOptions& options = DefaultOptions()) {
    ServerTest::StartServer(dir, options);
  }

  AttentionReply DebugAttention(const pb::DebugAttentionRequest& request) {
    AttentionReply reply;
    auto context = ContextWithWait();
    auto reader = stub_->DebugAttention(context.get(), request);
    pb::DebugAttentionResponse response;
    while (reader->Read(&response)) {
      if (reply.messages++ == 0) {
        reply.tokens.assign(response.tokens().begin(), response.tokens().end());
        reply.source_tokens.assign(response.source_tokens().begin(),
                                   response.source_tokens().end());
        reply.num_layers = response.num_layers();
        reply.num_encoder_layers = response.num_encoder_layers();
        reply.num_heads = response.num_heads();
      } else {
        EXPECT_EQ(response.tokens_size(), 0);
        EXPECT_EQ(response.source_tokens_size(), 0);
      }
      for (const pb::AttentionMap& map : response.maps()) {
        const std::tuple<int, int, int> key{map.kind(), map.layer(),
                                            map.head()};
        auto [it, inserted] = reply.maps.try_emplace(key);
        if (inserted) reply.order.push_back(key);
        // Pieces come in order, whole rows from first_query on.
        const size_t keys = map.kind() == pb::ATTENTION_KIND_DECODER_SELF
                                ? reply.tokens.size()
                                : reply.source_tokens.size();
        EXPECT_EQ(it->second.size(), map.first_query() * keys);
        it->second.insert(it->second.end(), map.weights().begin(),
                          map.weights().end());
      }
    }
    reply.status = reader->Finish();
    return reply;
  }

  // The model's own maps and greedy tokens: Encode then Forward on a slot.
  struct Direct {
    AttentionMaps encoder, decoder, cross;
  };
  Direct DirectMaps(const std::vector<int>& source,
                    const std::vector<int>& target) {
    KvCache cache(reference_->config(), 1);
    ForwardOptions options;
    options.capture_attention = true;
    EncodeResult encoded;
    const SourceChunk s{0, source};
    EXPECT_TRUE(reference_->Encode({&s, 1}, cache, options, encoded).ok());
    ForwardResult result;
    const SequenceChunk t{0, target};
    EXPECT_TRUE(reference_->Forward({&t, 1}, cache, options, result).ok());
    return {encoded.attention[0], result.attention[0],
            result.cross_attention[0]};
  }

  // Greedy decoding by the model alone, from [BOS], until EOS or max_new.
  std::vector<int> GreedyAlone(const std::vector<int>& source, int max_new) {
    KvCache cache(reference_->config(), 1);
    EncodeResult encoded;
    const SourceChunk s{0, source};
    EXPECT_TRUE(reference_->Encode({&s, 1}, cache, {}, encoded).ok());
    std::vector<int> next = {kBos}, out;
    ForwardResult result;
    for (int i = 0; i < max_new; ++i) {
      const SequenceChunk t{0, next};
      EXPECT_TRUE(reference_->Forward({&t, 1}, cache, {}, result).ok());
      const int vocab = reference_->config().vocab_size;
      const float* row = result.logits.data();
      int best = 0;
      for (int v = 1; v < vocab; ++v) {
        if (row[v] > row[best]) best = v;
      }
      out.push_back(best);
      // The engine ends a sequence at either control token
      // (Tokenizer::EndsSequence).
      if (best == kEos || best == kBos) break;
      next = {best};
    }
    return out;
  }
};

std::vector<float> MapOf(const AttentionMaps& maps, int layer, int head) {
  const float* begin = maps.row(layer, head, 0);
  return std::vector<float>(
      begin, begin + static_cast<size_t>(maps.n_queries) * maps.n_keys);
}

TEST_F(Seq2seqE2eTest, ModelInfoSaysEncoderDecoder) {
  StartServer(Seq2seqDir());
  grpc::ClientContext context;
  pb::ModelInfo info;
  ASSERT_TRUE(
      stub_->GetModelInfo(&context, pb::GetModelInfoRequest(), &info).ok());
  EXPECT_EQ(info.architecture(), "encoder-decoder");
  EXPECT_EQ(info.num_encoder_layers(), kEncoderLayers);
  EXPECT_EQ(info.num_layers(), kDecoderLayers);
  EXPECT_EQ(info.num_heads(), kHeads);
  EXPECT_EQ(info.vocab_size(), 99);
  EXPECT_EQ(info.positional_encoding(), "sinusoidal");
  EXPECT_EQ(info.tokenizer(), "char");
  // The limits state the source limit that is enforced (here
  // --max_prompt_tokens' 40; without it the context: a source may fill it).
  const int most = info.limits().max_source_tokens();
  EXPECT_EQ(most, 40);
  for (const int n : {most, most + 1}) {
    pb::GenerateRequest request;
    *request.mutable_source() = IdsPrompt(std::vector<int>(n, 5));
    request.set_max_new_tokens(1);
    EXPECT_EQ(Generate(request).status.ok(), n == most) << n;
  }
}

TEST_F(Seq2seqE2eTest, DecoderOnlyModelKeepsItsFamilyAndRefusesSource) {
  StartServer(DecoderOnlyDir());
  grpc::ClientContext context;
  pb::ModelInfo info;
  ASSERT_TRUE(
      stub_->GetModelInfo(&context, pb::GetModelInfoRequest(), &info).ok());
  EXPECT_EQ(info.architecture(), "gpt2");
  EXPECT_EQ(info.num_encoder_layers(), 0);

  pb::GenerateRequest request;
  request.mutable_prompt()->set_text("To be");
  *request.mutable_source() = TextPrompt("or not");
  const Outcome out = Generate(request);
  EXPECT_EQ(out.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(out.status.error_message(),
              HasSubstr("source: this model (gpt2) is decoder-only and takes "
                        "no source; send the text as `prompt`"));
  EXPECT_TRUE(out.tokens.empty());

  pb::DebugAttentionRequest attention;
  *attention.mutable_prompt() = TextPrompt("To be");
  *attention.mutable_source() = IdsPrompt({1, 2});
  const AttentionReply refused = DebugAttention(attention);
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.status.error_message(), HasSubstr("decoder-only"));

  // Without a source: every map is DECODER_SELF, as before.
  attention.clear_source();
  const AttentionReply reply = DebugAttention(attention);
  ASSERT_TRUE(reply.status.ok()) << reply.status.error_message();
  EXPECT_TRUE(reply.source_tokens.empty());
  EXPECT_EQ(reply.num_encoder_layers, 0);
  EXPECT_EQ(reply.maps.size(),
            static_cast<size_t>(info.num_layers()) * info.num_heads());
  for (const auto& [key, weights] : reply.maps) {
    EXPECT_EQ(std::get<0>(key), pb::ATTENTION_KIND_DECODER_SELF);
  }

  // The tap's rows are DECODER_SELF too.
  pb::GenerateRequest tapped;
  tapped.mutable_prompt()->set_text("To be");
  tapped.set_max_new_tokens(3);
  tapped.mutable_attention_tap();
  const Outcome tap = Generate(tapped);
  ASSERT_TRUE(tap.status.ok()) << tap.status.error_message();
  ASSERT_EQ(tap.tokens.size(), 3u);
  for (const pb::Token& t : tap.tokens) {
    ASSERT_FALSE(t.attention().empty());
    for (const pb::AttentionRow& row : t.attention()) {
      EXPECT_EQ(row.kind(), pb::ATTENTION_KIND_DECODER_SELF);
    }
  }
}

TEST_F(Seq2seqE2eTest, GenerateRefusesBadSources) {
  TextgenServerOptions options = DefaultOptions();
  options.engine.max_prompt_tokens = 12;
  StartServer(Seq2seqDir(), options);
  struct Case {
    std::string name;
    std::function<void(pb::GenerateRequest&)> edit;
    grpc::StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"no source", [](pb::GenerateRequest&) {},
       grpc::StatusCode::FAILED_PRECONDITION,
       "this is an encoder-decoder model: send `source`"},
      {"no source, prompt only",
       [](pb::GenerateRequest& r) { r.mutable_prompt()->set_text("ab"); },
       grpc::StatusCode::FAILED_PRECONDITION,
       "this is an encoder-decoder model: send `source`"},
      {"source of no kind", [](pb::GenerateRequest& r) { r.mutable_source(); },
       grpc::StatusCode::INVALID_ARGUMENT,
       "source: set source.text or source.token_ids"},
      {"empty source text",
       [](pb::GenerateRequest& r) { r.mutable_source()->set_text(""); },
       grpc::StatusCode::INVALID_ARGUMENT, "source.text is empty"},
      {"empty source ids",
       [](pb::GenerateRequest& r) { r.mutable_source()->mutable_token_ids(); },
       grpc::StatusCode::INVALID_ARGUMENT, "source.token_ids.ids is empty"},
      {"character outside the vocabulary",
       [](pb::GenerateRequest& r) {
         r.mutable_source()->set_text("caf\u00e9 \u2603");
       },
       grpc::StatusCode::INVALID_ARGUMENT, "source.text: "},
      {"source over --max_prompt_tokens",
       [](pb::GenerateRequest& r) {
         r.mutable_source()->set_text("thirteen char");
       },
       grpc::StatusCode::INVALID_ARGUMENT,
       "source is 13 tokens; at most 12 (the model's context, and "
       "--max_prompt_tokens)"},
      {"empty prompt text with a source",
       [](pb::GenerateRequest& r) {
         r.mutable_source()->set_text("ab");
         r.mutable_prompt()->set_text("");
       },
       grpc::StatusCode::INVALID_ARGUMENT, "prompt.text is empty"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    pb::GenerateRequest request;
    request.set_max_new_tokens(3);
    c.edit(request);
    const Outcome out = Generate(request);
    EXPECT_EQ(out.status.error_code(), c.code);
    EXPECT_THAT(out.status.error_message(), HasSubstr(c.message));
    EXPECT_TRUE(out.tokens.empty());
  }
}

TEST_F(Seq2seqE2eTest, DebugAttentionReturnsEveryKindEqualToTheModel) {
  StartServer(Seq2seqDir());
  pb::DebugAttentionRequest request;
  *request.mutable_source() = TextPrompt("3rd of March 99");
  *request.mutable_prompt() = TextPrompt("1999-");
  const AttentionReply reply = DebugAttention(request);
  ASSERT_TRUE(reply.status.ok()) << reply.status.error_message();

  // The source is tokenized with no BOS; the prompt text gets BOS first.
  auto source = tokenizer_->Encode("3rd of March 99");
  auto target = tokenizer_->Encode("1999-");
  ASSERT_TRUE(source.ok() && target.ok());
  target->insert(target->begin(), kBos);
  EXPECT_EQ(Ids(reply.source_tokens), *source);
  EXPECT_EQ(Ids(reply.tokens), *target);
  EXPECT_EQ(reply.source_tokens[0].text(), "3");
  EXPECT_EQ(reply.tokens[0].text(), "");  // <s> contributes no text.
  EXPECT_EQ(reply.num_layers, kDecoderLayers);
  EXPECT_EQ(reply.num_encoder_layers, kEncoderLayers);
  EXPECT_EQ(reply.num_heads, kHeads);

  const size_t s = source->size(), t = target->size();
  const Direct direct = DirectMaps(*source, *target);
  EXPECT_EQ(reply.maps.size(), static_cast<size_t>(kHeads) *
                                   (kEncoderLayers + 2 * kDecoderLayers));
  // Kind by kind: encoder self, decoder self, cross.
  ASSERT_FALSE(reply.order.empty());
  EXPECT_EQ(std::get<0>(reply.order.front()), pb::ATTENTION_KIND_ENCODER_SELF);
  EXPECT_EQ(std::get<0>(reply.order.back()), pb::ATTENTION_KIND_CROSS);
  for (int head = 0; head < kHeads; ++head) {
    for (int layer = 0; layer < kEncoderLayers; ++layer) {
      SCOPED_TRACE(absl::StrCat("encoder layer ", layer, " head ", head));
      const auto& map = reply.map(pb::ATTENTION_KIND_ENCODER_SELF, layer, head);
      ASSERT_EQ(map.size(), s * s);
      EXPECT_EQ(map, MapOf(direct.encoder, layer, head));
      for (size_t q = 0; q < s; ++q) {
        double sum = 0;
        for (size_t k = 0; k < s; ++k) sum += map[q * s + k];
        EXPECT_NEAR(sum, 1.0, 1e-5);
      }
    }
    for (int layer = 0; layer < kDecoderLayers; ++layer) {
      SCOPED_TRACE(absl::StrCat("decoder layer ", layer, " head ", head));
      const auto& self =
          reply.map(pb::ATTENTION_KIND_DECODER_SELF, layer, head);
      ASSERT_EQ(self.size(), t * t);
      EXPECT_EQ(self, MapOf(direct.decoder, layer, head));
      for (size_t q = 0; q < t; ++q) {
        for (size_t k = q + 1; k < t; ++k) EXPECT_EQ(self[q * t + k], 0.0f);
      }
      // Cross: T_target rows of S_source weights, each a distribution.
      const auto& cross = reply.map(pb::ATTENTION_KIND_CROSS, layer, head);
      ASSERT_EQ(cross.size(), t * s);
      EXPECT_EQ(cross, MapOf(direct.cross, layer, head));
      for (size_t q = 0; q < t; ++q) {
        double sum = 0;
        for (size_t k = 0; k < s; ++k) {
          EXPECT_GE(cross[q * s + k], 0.0f);
          sum += cross[q * s + k];
        }
        EXPECT_NEAR(sum, 1.0, 1e-5);
      }
    }
  }
}

TEST_F(Seq2seqE2eTest, DebugAttentionWithoutPromptStartsFromBos) {
  StartServer(Seq2seqDir());
  pb::DebugAttentionRequest request;
  *request.mutable_source() = IdsPrompt({20, 21, 22, 23});
  const AttentionReply reply = DebugAttention(request);
  ASSERT_TRUE(reply.status.ok()) << reply.status.error_message();
  EXPECT_EQ(Ids(reply.tokens), std::vector<int>{kBos});
  EXPECT_EQ(Ids(reply.source_tokens), (std::vector<int>{20, 21, 22, 23}));
  EXPECT_EQ(reply.map(pb::ATTENTION_KIND_CROSS, 1, 1).size(), 4u);
  EXPECT_EQ(reply.map(pb::ATTENTION_KIND_DECODER_SELF, 1, 1),
            std::vector<float>{1.0f});
}

TEST_F(Seq2seqE2eTest, DebugAttentionFiltersAndLimitsApplyToTheSource) {
  StartServer(Seq2seqDir());  // --max_attention_tokens 30.
  pb::DebugAttentionRequest request;
  *request.mutable_source() = TextPrompt("March 3rd");

  // Layer 2 exists in the encoder only: its maps alone.
  request.add_layers(2);
  request.add_heads(1);
  AttentionReply reply = DebugAttention(request);
  ASSERT_TRUE(reply.status.ok()) << reply.status.error_message();
  EXPECT_EQ(reply.num_layers, 0);
  EXPECT_EQ(reply.num_encoder_layers, 1);
  EXPECT_EQ(reply.num_heads, 1);
  ASSERT_EQ(reply.maps.size(), 1u);
  EXPECT_EQ(
      reply.maps.begin()->first,
      std::make_tuple(static_cast<int>(pb::ATTENTION_KIND_ENCODER_SELF), 2, 1));

  // Layer 1 in both: encoder self, decoder self and cross.
  request.set_layers(0, 1);
  reply = DebugAttention(request);
  ASSERT_TRUE(reply.status.ok()) << reply.status.error_message();
  EXPECT_EQ(reply.num_layers, 1);
  EXPECT_EQ(reply.num_encoder_layers, 1);
  EXPECT_EQ(reply.maps.size(), 3u);

  // A layer neither stack has, a head out of range.
  request.set_layers(0, 3);
  reply = DebugAttention(request);
  EXPECT_EQ(reply.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(reply.status.error_message(), HasSubstr("layers"));
  request.set_layers(0, 0);
  request.set_heads(0, 2);
  reply = DebugAttention(request);
  EXPECT_EQ(reply.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(reply.status.error_message(), HasSubstr("heads"));
  request.clear_heads();
  request.clear_layers();

  // --max_attention_tokens bounds the source as it bounds the prompt.
  *request.mutable_source() = TextPrompt(std::string(31, 'x'));
  reply = DebugAttention(request);
  EXPECT_EQ(reply.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(reply.status.error_message(),
              HasSubstr("source is 31 tokens; DebugAttention takes at most 30 "
                        "(--max_attention_tokens)"));

  // Source errors as Generate's.
  request.clear_source();
  reply = DebugAttention(request);
  EXPECT_EQ(reply.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(reply.status.error_message(), HasSubstr("send `source`"));
  request.mutable_source()->set_text("");
  reply = DebugAttention(request);
  EXPECT_EQ(reply.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(reply.status.error_message(), HasSubstr("source.text is empty"));
  *request.mutable_source() = IdsPrompt({5, 99});
  reply = DebugAttention(request);
  EXPECT_EQ(reply.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(reply.status.error_message(), HasSubstr("source"));
}

TEST_F(Seq2seqE2eTest, DebugAttentionSplitsCrossMapsIntoPiecesOfRows) {
  TextgenServerOptions options = DefaultOptions();
  options.service.max_attention_tokens = 64;
  options.service.max_attention_message_bytes = 1024;
  StartServer(Seq2seqDir(), options);
  pb::DebugAttentionRequest request;
  *request.mutable_source() = TextPrompt(std::string(60, 'a') + "bcd");
  *request.mutable_prompt() = TextPrompt(std::string(40, 'z'));
  const AttentionReply reply = DebugAttention(request);
  ASSERT_TRUE(reply.status.ok()) << reply.status.error_message();
  EXPECT_GT(reply.messages, 40);
  const Direct direct = DirectMaps(Ids(reply.source_tokens), Ids(reply.tokens));
  EXPECT_EQ(reply.map(pb::ATTENTION_KIND_CROSS, 1, 0),
            MapOf(direct.cross, 1, 0));
  EXPECT_EQ(reply.map(pb::ATTENTION_KIND_ENCODER_SELF, 2, 1),
            MapOf(direct.encoder, 2, 1));
  EXPECT_EQ(reply.map(pb::ATTENTION_KIND_DECODER_SELF, 0, 1),
            MapOf(direct.decoder, 0, 1));
}

TEST_F(Seq2seqE2eTest, GenerateWithSourceEqualsTheModelsGreedyDecoding) {
  StartServer(Seq2seqDir());
  const std::vector<std::string> sources = {"3rd of March 99",
                                            "12/25/2001",
                                            "the first of May, 1999",
                                            "x",
                                            "June 7th 04",
                                            "2 Feb 1988",
                                            "31.12.1999",
                                            "ok?"};
  // Each alone, then all at once: batched decode steps mix source lengths.
  std::vector<Outcome> alone(sources.size()), together(sources.size());
  auto request_for = [](const std::string& source) {
    pb::GenerateRequest request;
    request.mutable_source()->set_text(source);
    request.set_max_new_tokens(12);
    return request;
  };
  for (size_t i = 0; i < sources.size(); ++i) {
    alone[i] = Generate(request_for(sources[i]));
  }
  std::vector<std::thread> threads;
  for (size_t i = 0; i < sources.size(); ++i) {
    threads.emplace_back(
        [&, i] { together[i] = Generate(request_for(sources[i])); });
  }
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < sources.size(); ++i) {
    SCOPED_TRACE(sources[i]);
    ASSERT_TRUE(alone[i].status.ok()) << alone[i].status.error_message();
    ASSERT_TRUE(together[i].status.ok()) << together[i].status.error_message();
    auto source = tokenizer_->Encode(sources[i]);
    ASSERT_TRUE(source.ok());
    const std::vector<int> greedy = GreedyAlone(*source, 12);
    EXPECT_EQ(alone[i].ids(), greedy);
    EXPECT_EQ(together[i].ids(), greedy);
    ASSERT_TRUE(alone[i].finished.has_value());
    const pb::Finished& finished = *alone[i].finished;
    EXPECT_EQ(finished.usage().source_tokens(),
              static_cast<int>(source->size()));
    EXPECT_EQ(finished.usage().prompt_tokens(), 1);  // [BOS]
    EXPECT_EQ(finished.usage().generated_tokens(),
              static_cast<int>(greedy.size()));
    EXPECT_EQ(finished.reason(), greedy.size() < 12 ? pb::FINISH_REASON_EOS
                                                    : pb::FINISH_REASON_LENGTH);
    // The first generated token sits after [BOS].
    EXPECT_EQ(alone[i].tokens.front().position(), 1);
  }
  EXPECT_EQ(server_->engine().stats().slots_in_use, 0);
}

TEST_F(Seq2seqE2eTest, GeneratePromptStartsTheAnswerAfterBos) {
  StartServer(Seq2seqDir());
  pb::GenerateRequest request;
  request.mutable_source()->set_text("March 3rd 99");
  request.mutable_prompt()->set_text("19");
  request.set_max_new_tokens(4);
  request.set_echo_prompt(true);
  const Outcome out = Generate(request);
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  ASSERT_TRUE(out.finished.has_value());
  EXPECT_EQ(out.finished->usage().prompt_tokens(), 3);
  ASSERT_GE(out.tokens.size(), 3u);
  auto digits = tokenizer_->Encode("19");
  ASSERT_TRUE(digits.ok());
  const std::vector<int> ids = out.ids();
  EXPECT_EQ(std::vector<int>(ids.begin(), ids.begin() + 3),
            (std::vector<int>{kBos, (*digits)[0], (*digits)[1]}));
  EXPECT_TRUE(out.tokens[2].is_prompt());
  EXPECT_FALSE(out.tokens.size() > 3 && out.tokens[3].is_prompt());

  // Token ids out of the vocabulary: the engine's refusal, naming `source`.
  pb::GenerateRequest bad;
  bad.mutable_source()->mutable_token_ids()->add_ids(99);
  const Outcome refused = Generate(bad);
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.status.error_message(), HasSubstr("source"));
}

TEST_F(Seq2seqE2eTest, AttentionTapStreamsCrossRowsEqualToDebugAttention) {
  StartServer(Seq2seqDir());
  const std::string text = "the 3rd of March";
  auto source = tokenizer_->Encode(text);
  ASSERT_TRUE(source.ok());
  const size_t s = source->size();
  pb::GenerateRequest request;
  request.mutable_source()->set_text(text);
  request.set_max_new_tokens(6);
  request.mutable_attention_tap()->add_layers(1);
  const Outcome out = Generate(request);
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  ASSERT_FALSE(out.tokens.empty());

  // The whole target's maps, for comparison: DebugAttention of [BOS] +
  // every generated token but the last (each row predicted the next token).
  std::vector<int> target = {kBos};
  for (size_t i = 0; i + 1 < out.tokens.size(); ++i) {
    target.push_back(out.tokens[i].id());
  }
  pb::DebugAttentionRequest again;
  *again.mutable_source() = TextPrompt(text);
  *again.mutable_prompt() = IdsPrompt(target);
  const AttentionReply maps = DebugAttention(again);
  ASSERT_TRUE(maps.status.ok()) << maps.status.error_message();

  for (const pb::Token& token : out.tokens) {
    SCOPED_TRACE(absl::StrCat("position ", token.position()));
    // Layer 1's decoder rows (every head), then its cross rows.
    ASSERT_EQ(token.attention_size(), 2 * kHeads);
    const int query = token.position() - 1;
    for (int i = 0; i < token.attention_size(); ++i) {
      const pb::AttentionRow& row = token.attention(i);
      const bool cross = i >= kHeads;
      EXPECT_EQ(row.kind(), cross ? pb::ATTENTION_KIND_CROSS
                                  : pb::ATTENTION_KIND_DECODER_SELF);
      EXPECT_EQ(row.layer(), 1);
      EXPECT_EQ(row.head(), i % kHeads);
      const size_t keys = cross ? s : static_cast<size_t>(token.position());
      ASSERT_EQ(static_cast<size_t>(row.weights_size()), keys);
      double sum = 0;
      for (float w : row.weights()) sum += w;
      EXPECT_NEAR(sum, 1.0, 1e-5);
      const std::vector<float>& map = maps.map(row.kind(), 1, row.head());
      const size_t width = cross ? s : target.size();
      ASSERT_GE(map.size(), (query + 1) * width);
      const std::vector<float> expected(map.begin() + query * width,
                                        map.begin() + query * width + keys);
      EXPECT_EQ(std::vector<float>(row.weights().begin(), row.weights().end()),
                expected);
    }
  }
}

}  // namespace
}  // namespace textgen
