// The gRPC server end to end: a TextgenServer in the test process on a port of
// 127.0.0.1 the system picks, and clients over real sockets.
//
// The model is the golden gpt2_learned checkpoint (tiny, random weights)
// copied into a temporary directory with a char_vocab.json of 97 characters
// beside it, so that it loads the way a shipped model does.
//
// What they show:
//   - a stream arrives one message per token; its text is the detokenized
//     ids, and at temperature 0 the ids are the plain decoder's greedy ones;
//   - 32 concurrent streams each get exactly what they get alone;
//   - client cancels and deadlines mid-stream return every KV slot, and the
//     server keeps serving;
//   - past the queue, RESOURCE_EXHAUSTED while admitted streams go on;
//   - a table of bad requests, each with its status and message; the server
//     survives them all;
//   - DebugAttention equals the decoder's captured maps (causal zeros, rows
//     summing to 1) and agrees with Generate's attention tap;
//   - health: SERVING after start, NOT_SERVING (to a Watch) while draining,
//     new calls refused, and running streams finish during the drain;
//     reflection lists the service;
//   - the Prometheus endpoint counts requests by status, tokens and slots.
// Streams that must stay open are held by not reading them: gRPC's flow
// control stops the server's writes, the engine's stream buffer fills, and
// the sequence waits in its slot. Waits are bounded (kWait) only so that a
// bug fails instead of hanging; nothing depends on timing.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <google/protobuf/unknown_field_set.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/client_unary_call.h>
#include <grpcpp/impl/codegen/sync_stream.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "model/checkpoint.h"
#include "model/formats/model_loader.h"
#include "model/generate.h"
#include "model/kernels/dispatch.h"
#include "model/sampler.h"
#include "server/server.h"
#include "tests/testing/engine_reference.h"
#include "tests/testing/server_fixture.h"
#include "tests/testing/test_util.h"
#include "textgen/v1/textgen.grpc.pb.h"

// Last: httplib.h brings in <resolv.h>, whose `_res` macro breaks Eigen's
// headers if they come after it.
#include <httplib.h>

namespace textgen {
namespace {

namespace pb = ::textgen::v1;
using ::testing::HasSubstr;

using testing::ContextWithWait;
using testing::Outcome;
using testing::ReadAll;

constexpr absl::Duration kWait = testing::kServerTestWait;

// gpt2_learned with a character vocabulary beside it, made once.
const std::string& ModelDir() {
  static const std::string dir =
      testing::Gpt2LearnedWithCharVocab("e2e_test_model");
  return dir;
}

// The decoder alone at temperature 0 (model/generate.h, no end token): the
// reference for Generate.
std::vector<int> GreedyAlone(Decoder& decoder, const std::vector<int>& prompt,
                             int max_new_tokens) {
  SamplingParams greedy;
  greedy.temperature = 0;
  return testing::RunAlone(decoder, prompt, greedy, /*seed=*/0, max_new_tokens)
      .ids;
}

// `n` ids of the test model's 97-character vocabulary.
std::vector<int> RandomIds(int n, unsigned seed) {
  return testing::Prompt(n, /*vocab=*/97, seed);
}

pb::GenerateRequest IdsRequest(const std::vector<int>& ids,
                               int max_new_tokens) {
  pb::GenerateRequest request;
  request.mutable_prompt()->mutable_token_ids()->mutable_ids()->Add(ids.begin(),
                                                                    ids.end());
  request.set_max_new_tokens(max_new_tokens);
  return request;
}

// A request whose messages are large (every attention row, 20 alternatives),
// so that a client that does not read soon stalls the server's writes.
pb::GenerateRequest HeavyRequest(unsigned seed) {
  pb::GenerateRequest request = IdsRequest(RandomIds(8, seed), 110);
  request.set_top_logprobs(20);
  request.mutable_attention_tap();
  return request;
}

std::string ToString(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices) {
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return out;
}

grpc::ByteBuffer ToBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

// Whether a TCP connection to 127.0.0.1:port is accepted.
bool PortAcceptsConnections(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool accepted =
      connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  close(fd);
  return accepted;
}

class E2eTest : public testing::ServerTest {
 protected:
  static TextgenServerOptions DefaultOptions() {
    TextgenServerOptions options;
    options.address = "127.0.0.1:0";
    options.engine.num_slots = 8;
    options.engine.max_queue = 64;
    options.engine.max_new_tokens_limit = 200;
    options.engine.default_max_new_tokens = 20;
    options.engine.stream_buffer_events = 4;
    options.service.model_name = "gpt2_learned";
    options.engine.max_prompt_tokens = 100;
    options.service.max_attention_tokens = 80;
    return options;
  }

  void StartServer(const TextgenServerOptions& options = DefaultOptions()) {
    ServerTest::StartServer(ModelDir(), options);
  }

  // A stub whose streams stall the server soon when not read: the client
  // announces a small HTTP/2 window and does not grow it (no BDP probing),
  // so the server's writes wait for reads, and then the engine's buffer.
  std::unique_ptr<pb::TextGeneration::Stub> HoldingStub() {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1024);
    // A channel of its own, not shared with the test's other calls.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return pb::TextGeneration::NewStub(
        grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                  grpc::InsecureChannelCredentials(), args));
  }

  // Waits (bounded) until the engine's stats satisfy `done`.
  bool WaitForStats(const std::function<bool(const EngineStats&)>& done) {
    const absl::Time end = absl::Now() + kWait;
    while (absl::Now() < end) {
      if (done(server_->engine().stats())) return true;
      absl::SleepFor(absl::Milliseconds(5));
    }
    ADD_FAILURE() << "engine stats never reached the expected state";
    return false;
  }

  // grpc.health.v1.Health/Check for the whole server, read without generated
  // stubs (gRPC does not install health.proto): 1 = SERVING, 2 = NOT_SERVING.
  int HealthStatus() {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kWait));
    grpc::ByteBuffer response;
    const grpc::internal::RpcMethod method(
        "/grpc.health.v1.Health/Check", grpc::internal::RpcMethod::NORMAL_RPC);
    const grpc::Status status =
        grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
            channel_.get(), method, &context, ToBuffer(""), &response);
    if (!status.ok()) return -1;
    google::protobuf::UnknownFieldSet fields;
    EXPECT_TRUE(fields.ParseFromString(ToString(response)));
    for (int i = 0; i < fields.field_count(); ++i) {
      if (fields.field(i).number() == 1) {
        return static_cast<int>(fields.field(i).varint());
      }
    }
    return 0;  // proto3 omits UNKNOWN (0).
  }
};

TEST_F(E2eTest, StreamIsTokenByTokenAndEqualsGreedyDecoder) {
  StartServer();
  pb::GenerateRequest request;
  request.mutable_prompt()->set_text("To be, or not to be");
  request.set_max_new_tokens(40);
  const Outcome out = Generate(request);
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  ASSERT_EQ(out.tokens.size(), 40u);
  EXPECT_EQ(out.messages, 41);  // One per token, then Finished.
  ASSERT_TRUE(out.finished.has_value());
  EXPECT_EQ(out.finished->reason(), pb::FINISH_REASON_LENGTH);
  EXPECT_EQ(out.finished->usage().generated_tokens(), 40);
  EXPECT_EQ(out.finished->usage().prompt_tokens(), 19);

  auto prompt = tokenizer_->Encode("To be, or not to be");
  ASSERT_TRUE(prompt.ok());
  EXPECT_EQ(out.ids(), GreedyAlone(*reference_, *prompt, 40));
  auto text = tokenizer_->Decode(out.ids(), prompt->back());
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(out.text(), *text);
  for (size_t i = 0; i < out.tokens.size(); ++i) {
    EXPECT_EQ(out.tokens[i].position(), static_cast<int>(19 + i));
    EXPECT_LE(out.tokens[i].logprob(), 0.0f);
  }
}

TEST_F(E2eTest, ThirtyTwoConcurrentStreamsEqualTheirSoloResults) {
  StartServer();
  constexpr int kStreams = 32;
  std::vector<pb::GenerateRequest> requests;
  std::vector<Outcome> solo(kStreams), together(kStreams);
  for (int i = 0; i < kStreams; ++i) {
    pb::GenerateRequest request = IdsRequest(RandomIds(5 + i, i), 16 + i % 8);
    if (i % 2 == 1) {  // Seeded sampling on every other stream.
      request.mutable_sampling()->set_temperature(0.8f);
      request.mutable_sampling()->set_top_k(20);
      request.mutable_sampling()->set_seed(1000 + i);
    }
    requests.push_back(request);
    solo[i] = Generate(request);
    ASSERT_TRUE(solo[i].status.ok()) << solo[i].status.error_message();
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] { together[i] = Generate(requests[i]); });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kStreams; ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(together[i].status.ok()) << together[i].status.error_message();
    EXPECT_EQ(together[i].ids(), solo[i].ids());
    EXPECT_EQ(together[i].text(), solo[i].text());
    ASSERT_TRUE(together[i].finished.has_value());
    if (requests[i].sampling().has_seed()) {
      EXPECT_EQ(together[i].finished->seed(), requests[i].sampling().seed());
      EXPECT_EQ(solo[i].finished->seed(), requests[i].sampling().seed());
    }
  }
  EXPECT_EQ(GreedyAlone(*reference_, RandomIds(5, 0), 16), solo[0].ids());
  EXPECT_EQ(server_->engine().stats().slots_in_use, 0);
}

TEST_F(E2eTest, NCompletionsEachEqualTheirOwnCallWithSeedPlusIndex) {
  StartServer();
  const std::vector<int> prompt = RandomIds(6, 3);
  pb::GenerateRequest request = IdsRequest(prompt, 15);
  request.set_n(3);
  request.set_echo_prompt(true);
  request.set_top_logprobs(2);
  request.mutable_sampling()->set_temperature(0.9f);
  request.mutable_sampling()->set_seed(41);
  const Outcome all = Generate(request);
  ASSERT_TRUE(all.status.ok()) << all.status.error_message();
  ASSERT_EQ(all.finishes.size(), 3u);
  std::set<int> ended;
  for (const pb::Finished& f : all.finishes) {
    ended.insert(f.completion_index());
    EXPECT_EQ(f.seed(), 41u + f.completion_index());
    EXPECT_EQ(f.usage().generated_tokens(), 15);
  }
  EXPECT_EQ(ended, (std::set<int>{0, 1, 2}));

  // The prompt comes once, from completion 0.
  std::vector<int> echoed;
  for (const pb::Token& t : all.tokens) {
    if (!t.is_prompt()) continue;
    echoed.push_back(t.id());
    EXPECT_EQ(t.completion_index(), 0);
  }
  EXPECT_EQ(echoed, prompt);

  // Completion i is the call with n = 1 and seed 41 + i, bit for bit.
  std::set<std::vector<int>> distinct;
  for (int i = 0; i < 3; ++i) {
    pb::GenerateRequest single = request;
    single.set_n(1);
    single.set_echo_prompt(false);
    single.mutable_sampling()->set_seed(41 + i);
    const Outcome alone = Generate(single);
    ASSERT_TRUE(alone.status.ok()) << alone.status.error_message();
    std::vector<pb::Token> mine;
    for (const pb::Token& t : all.tokens) {
      if (!t.is_prompt() && t.completion_index() == i) mine.push_back(t);
    }
    ASSERT_EQ(mine.size(), alone.tokens.size()) << "completion " << i;
    for (size_t k = 0; k < mine.size(); ++k) {
      EXPECT_EQ(mine[k].id(), alone.tokens[k].id()) << i << ", token " << k;
      EXPECT_EQ(mine[k].logprob(), alone.tokens[k].logprob());
      EXPECT_EQ(mine[k].position(), alone.tokens[k].position());
      EXPECT_EQ(mine[k].text(), alone.tokens[k].text());
    }
    distinct.insert(alone.ids());
  }
  EXPECT_EQ(distinct.size(), 3u) << "three seeds, three different samples";

  // More than the server allows: refused, naming the flag.
  request.set_n(9);
  const Outcome refused = Generate(request);
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.status.error_message(),
              HasSubstr("n must be in 1..8 (--max_completions), got 9"));
  EXPECT_TRUE(
      WaitForStats([](const EngineStats& s) { return s.slots_in_use == 0; }));
}

TEST_F(E2eTest, CancelsAndDeadlinesReturnEverySlot) {
  StartServer();
  auto holding = HoldingStub();
  // Cancelled by the client after the first token.
  std::vector<std::thread> threads;
  std::atomic<int> cancelled{0}, expired{0};
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&, i] {
      grpc::ClientContext context;
      auto reader = holding->Generate(&context, HeavyRequest(i));
      pb::GenerateResponse response;
      EXPECT_TRUE(reader->Read(&response));
      context.TryCancel();
      while (reader->Read(&response)) {
      }
      if (reader->Finish().error_code() == grpc::StatusCode::CANCELLED) {
        ++cancelled;
      }
    });
  }
  // Deadlines passing while the stream is held open: nothing is read until
  // after the deadline, so the generation cannot have finished (its messages
  // exceed the client's window), however fast or slow the machine.
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&, i] {
      grpc::ClientContext context;
      const absl::Time deadline = absl::Now() + absl::Milliseconds(300);
      context.set_deadline(absl::ToChronoTime(deadline));
      auto reader = holding->Generate(&context, HeavyRequest(100 + i));
      pb::GenerateResponse response;
      absl::SleepFor(deadline - absl::Now() + absl::Milliseconds(100));
      while (reader->Read(&response)) {
      }
      if (reader->Finish().error_code() ==
          grpc::StatusCode::DEADLINE_EXCEEDED) {
        ++expired;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(cancelled, 6);
  EXPECT_EQ(expired, 6);
  EXPECT_TRUE(WaitForStats([](const EngineStats& s) {
    return s.slots_in_use == 0 && s.queue_depth == 0 &&
           s.cancelled + s.deadline_exceeded == 12;
  })) << "cancelled "
      << server_->engine().stats().cancelled << ", deadline_exceeded "
      << server_->engine().stats().deadline_exceeded << ", slots "
      << server_->engine().stats().slots_in_use << ", length "
      << server_->engine().stats().finished_length;

  // And the server still serves.
  const Outcome out = Generate(IdsRequest({1, 2, 3}, 10));
  EXPECT_TRUE(out.status.ok());
  EXPECT_EQ(out.ids(), GreedyAlone(*reference_, {1, 2, 3}, 10));
}

TEST_F(E2eTest, OverAdmissionIsResourceExhaustedWhileAdmittedStreamsGoOn) {
  TextgenServerOptions options = DefaultOptions();
  options.engine.num_slots = 2;
  options.engine.max_queue = 2;
  StartServer(options);
  // Four held streams: two in slots, two queued. Each has a connection of
  // its own, so that reading one never waits on another's HTTP/2 window.
  std::vector<std::unique_ptr<pb::TextGeneration::Stub>> stubs;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<pb::GenerateResponse>>>
      readers;
  for (int i = 0; i < 4; ++i) {
    stubs.push_back(HoldingStub());
    contexts.push_back(ContextWithWait());
    readers.push_back(
        stubs.back()->Generate(contexts.back().get(), HeavyRequest(i)));
  }
  ASSERT_TRUE(WaitForStats([](const EngineStats& s) {
    return s.slots_in_use == 2 && s.queue_depth == 2;
  }));
  const Outcome refused = Generate(IdsRequest({1, 2, 3}, 5));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.status.error_message(), HasSubstr("queue is full"));
  EXPECT_TRUE(refused.tokens.empty());
  // Read side by side: which two of the four reached the slots first is the
  // server's order of arrival, not the order sent, and a stream read only
  // after a queued one would wait for its reader until the idle timeout.
  std::vector<Outcome> outs(readers.size());
  std::vector<std::thread> reading;
  for (size_t i = 0; i < readers.size(); ++i) {
    reading.emplace_back([&, i] { outs[i] = ReadAll(*readers[i]); });
  }
  for (std::thread& t : reading) t.join();
  for (const Outcome& out : outs) {
    EXPECT_TRUE(out.status.ok()) << out.status.error_message();
    EXPECT_EQ(out.tokens.size(), 110u);
  }
  EXPECT_EQ(server_->engine().stats().rejected_queue_full, 1);
}

TEST_F(E2eTest, BadRequestsNameTheFieldAndTheServerSurvives) {
  StartServer();
  struct Case {
    std::string name;
    std::function<void(pb::GenerateRequest&)> edit;
    grpc::StatusCode code;
    std::string message;
  };
  const auto ids = [](std::vector<int> v) {
    return [v](pb::GenerateRequest& r) {
      r.mutable_prompt()->mutable_token_ids()->mutable_ids()->Assign(v.begin(),
                                                                     v.end());
    };
  };
  const grpc::StatusCode kInvalid = grpc::StatusCode::INVALID_ARGUMENT;
  const std::vector<Case> cases = {
      {"no prompt", [](auto& r) { r.clear_prompt(); }, kInvalid,
       "prompt: set prompt.text, prompt.token_ids or prompt.conversation"},
      {"empty text", [](auto& r) { r.mutable_prompt()->set_text(""); },
       kInvalid, "prompt.text is empty"},
      {"text outside vocabulary",
       [](auto& r) { r.mutable_prompt()->set_text("naïve"); }, kInvalid,
       "prompt.text"},
      {"tap layer negative",
       [](auto& r) { r.mutable_attention_tap()->add_layers(-1); }, kInvalid,
       "attention_tap.layers[0] = -1"},
      {"empty ids", ids({}), kInvalid, "prompt.token_ids.ids is empty"},
      {"negative id", ids({1, -1}), kInvalid,
       "prompt[1] = -1 is outside the model's vocabulary 0..96"},
      {"id past vocabulary", ids({97}), kInvalid,
       "prompt[0] = 97 is outside the model's vocabulary 0..96"},
      {"prompt over --max_prompt_tokens", ids(std::vector<int>(101, 3)),
       kInvalid, "--max_prompt_tokens"},
      {"prompt fills the context", ids(std::vector<int>(128, 3)), kInvalid,
       "context is 128"},
      {"max_new_tokens over the limit",
       [](auto& r) { r.set_max_new_tokens(201); }, kInvalid,
       "--max_new_tokens_limit"},
      {"negative max_new_tokens", [](auto& r) { r.set_max_new_tokens(-1); },
       kInvalid, "max_new_tokens"},
      {"negative temperature",
       [](auto& r) { r.mutable_sampling()->set_temperature(-1); }, kInvalid,
       "sampling.temperature"},
      {"NaN temperature",
       [](auto& r) { r.mutable_sampling()->set_temperature(NAN); }, kInvalid,
       "sampling.temperature"},
      {"negative top_k", [](auto& r) { r.mutable_sampling()->set_top_k(-2); },
       kInvalid, "sampling.top_k"},
      {"top_p above 1", [](auto& r) { r.mutable_sampling()->set_top_p(1.5f); },
       kInvalid, "sampling.top_p"},
      {"negative top_p",
       [](auto& r) { r.mutable_sampling()->set_top_p(-0.5f); }, kInvalid,
       "sampling.top_p"},
      {"negative repetition_penalty",
       [](auto& r) { r.mutable_sampling()->set_repetition_penalty(-1); },
       kInvalid, "sampling.repetition_penalty"},
      {"top_logprobs over 20", [](auto& r) { r.set_top_logprobs(21); },
       kInvalid, "top_logprobs"},
      {"negative top_logprobs", [](auto& r) { r.set_top_logprobs(-1); },
       kInvalid, "top_logprobs"},
      {"tap layer out of range",
       [](auto& r) { r.mutable_attention_tap()->add_layers(3); }, kInvalid,
       "attention_tap.layers[0]"},
      {"tap head out of range",
       [](auto& r) {
         r.mutable_attention_tap()->add_heads(0);
         r.mutable_attention_tap()->add_heads(-1);
       },
       kInvalid, "attention_tap.heads[1]"},
      {"empty stop string", [](auto& r) { r.add_stop(""); }, kInvalid,
       "stop[0] is empty"},
      {"too many stop strings",
       [](auto& r) {
         for (int i = 0; i < 17; ++i) r.add_stop(absl::StrCat("s", i));
       },
       kInvalid, "stop: at most 16"},
      {"stop string too long",
       [](auto& r) { r.add_stop(std::string(300, 'x')); }, kInvalid,
       "stop[0] is 300 bytes"},
  };
  ASSERT_GE(cases.size(), 20u);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    pb::GenerateRequest request = IdsRequest({1, 2, 3}, 5);
    c.edit(request);
    const Outcome out = Generate(request);
    EXPECT_EQ(out.status.error_code(), c.code) << out.status.error_message();
    EXPECT_THAT(out.status.error_message(), HasSubstr(c.message));
    EXPECT_EQ(out.messages, 0);
  }
  // Still serving, nothing held.
  const Outcome out = Generate(IdsRequest({1, 2, 3}, 5));
  EXPECT_TRUE(out.status.ok());
  EXPECT_EQ(out.tokens.size(), 5u);
  EXPECT_EQ(server_->engine().stats().slots_in_use, 0);
}

// A request that is not a valid message of its method's type (truncated or
// garbled bytes, or invalid UTF-8 in a string field, which proto3 refuses):
// INVALID_ARGUMENT naming the type, and the field where protobuf says which.
// gRPC's typed handlers answered UNIMPLEMENTED with no message.
TEST_F(E2eTest, UndecodableRequestsAreInvalidArgumentWithAMessage) {
  StartServer();
  // Sends `bytes` to `method` and returns the call's status.
  const auto call = [&](const std::string& method, bool streaming,
                        const std::string& bytes) {
    const std::string path = "/textgen.v1.TextGeneration/" + method;
    std::unique_ptr<grpc::ClientContext> context = ContextWithWait();
    if (!streaming) {
      grpc::ByteBuffer response;
      return grpc::internal::BlockingUnaryCall<grpc::ByteBuffer,
                                               grpc::ByteBuffer>(
          channel_.get(),
          grpc::internal::RpcMethod(path.c_str(),
                                    grpc::internal::RpcMethod::NORMAL_RPC),
          context.get(), ToBuffer(bytes), &response);
    }
    std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
        grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(
            channel_.get(),
            grpc::internal::RpcMethod(
                path.c_str(), grpc::internal::RpcMethod::SERVER_STREAMING),
            context.get(), ToBuffer(bytes)));
    grpc::ByteBuffer message;
    int messages = 0;
    while (reader->Read(&message)) ++messages;
    EXPECT_EQ(messages, 0) << method;
    return reader->Finish();
  };
  // A serialized `message` with its string `placeholder` replaced by bytes
  // that are not UTF-8.
  const auto with_bad_utf8 = [](const google::protobuf::MessageLite& message) {
    std::string bytes = message.SerializeAsString();
    const size_t at = bytes.find("PLACEHOLDER");
    EXPECT_NE(at, std::string::npos);
    bytes.replace(at, 11, "PLACE\xff\xfeHOLD");
    return bytes;
  };
  pb::GenerateRequest generate = IdsRequest({1, 2, 3}, 5);
  generate.add_stop("PLACEHOLDER");
  pb::DebugAttentionRequest attention;
  attention.mutable_prompt()->set_text("PLACEHOLDER");
  pb::TokenizeRequest tokenize;
  tokenize.set_text("PLACEHOLDER");
  struct Case {
    std::string method;
    bool streaming;
    std::string bytes;
    std::string message;
  };
  // 0x0a = field 1, length-delimited, then a length past the end.
  const std::string truncated("\x0a\x7f\x01\x02", 4);
  // Field 1 as a 64-bit fixed value: the wrong wire type for every field 1
  // here, and cut short.
  const std::string garbled("\x09\xff\xff", 3);
  const std::vector<Case> cases = {
      {"Generate", true, truncated,
       "the request is not a valid textgen.v1.GenerateRequest: malformed"},
      {"Generate", true, with_bad_utf8(generate),
       "textgen.v1.GenerateRequest: String field "
       "'textgen.v1.GenerateRequest.stop' contains invalid UTF-8"},
      {"DebugAttention", true, garbled,
       "not a valid textgen.v1.DebugAttentionRequest: malformed"},
      {"DebugAttention", true, with_bad_utf8(attention),
       "'textgen.v1.Prompt.text' contains invalid UTF-8"},
      {"GetModelInfo", false, garbled,
       "not a valid textgen.v1.GetModelInfoRequest: malformed"},
      {"Tokenize", false, truncated,
       "not a valid textgen.v1.TokenizeRequest: malformed"},
      {"Tokenize", false, with_bad_utf8(tokenize),
       "'textgen.v1.TokenizeRequest.text' contains invalid UTF-8"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.method + ": " + c.message);
    const grpc::Status status = call(c.method, c.streaming, c.bytes);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr(c.message));
  }
  // The same bytes, made valid, are served: the refusals were the bytes'.
  EXPECT_TRUE(call("Tokenize", false, tokenize.SerializeAsString()).ok());
  const Outcome out = Generate(generate);
  EXPECT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_EQ(server_->engine().stats().slots_in_use, 0);
}

// All of a DebugAttention call's maps, reassembled: [layer][head] → T×T.
struct AttentionReply {
  std::vector<pb::PromptToken> tokens;
  std::map<std::pair<int, int>, std::vector<float>> maps;
  grpc::Status status;
  int messages = 0;
};

AttentionReply DebugAttention(
    pb::TextGeneration::Stub& stub, const pb::DebugAttentionRequest& request,
    size_t max_message_bytes = kMaxAttentionMessageBytes) {
  AttentionReply reply;
  auto context = ContextWithWait();
  auto reader = stub.DebugAttention(context.get(), request);
  pb::DebugAttentionResponse response;
  while (reader->Read(&response)) {
    EXPECT_LE(response.ByteSizeLong(), max_message_bytes);
    if (reply.messages++ == 0) {
      reply.tokens.assign(response.tokens().begin(), response.tokens().end());
    } else {
      EXPECT_EQ(response.tokens_size(), 0);
    }
    for (const pb::AttentionMap& map : response.maps()) {
      std::vector<float>& out = reply.maps[{map.layer(), map.head()}];
      const size_t t = reply.tokens.size();
      EXPECT_EQ(out.size(), static_cast<size_t>(map.first_query()) * t);
      out.insert(out.end(), map.weights().begin(), map.weights().end());
    }
  }
  reply.status = reader->Finish();
  return reply;
}

TEST_F(E2eTest, DebugAttentionEqualsDecoderAndGenerateTap) {
  StartServer();
  const std::vector<int> prompt = RandomIds(64, 7);
  pb::DebugAttentionRequest request;
  request.mutable_prompt()->mutable_token_ids()->mutable_ids()->Add(
      prompt.begin(), prompt.end());
  const AttentionReply reply = DebugAttention(*stub_, request);
  ASSERT_TRUE(reply.status.ok()) << reply.status.error_message();
  ASSERT_EQ(reply.tokens.size(), 64u);
  EXPECT_EQ(reply.tokens[5].id(), prompt[5]);
  ASSERT_EQ(reply.maps.size(), 3u * 4u);

  KvCache cache(reference_->config(), 1);
  ForwardOptions options;
  options.capture_attention = true;
  ForwardResult result;
  const SequenceChunk chunk{0, prompt};
  ASSERT_TRUE(reference_->Forward({&chunk, 1}, cache, options, result).ok());
  const AttentionMaps& expected = result.attention[0];
  for (const auto& [key, weights] : reply.maps) {
    const auto [layer, head] = key;
    ASSERT_EQ(weights.size(), 64u * 64u);
    for (int q = 0; q < 64; ++q) {
      double sum = 0;
      for (int k = 0; k < 64; ++k) {
        const float w = weights[q * 64 + k];
        EXPECT_NEAR(w, expected.at(layer, head, q, k), 1e-6);
        if (k > q) {
          EXPECT_EQ(w, 0.0f);
        }
        sum += w;
      }
      EXPECT_NEAR(sum, 1.0, 1e-5);
    }
  }

  // Generate's tap on a prefix of the same prompt: generated token i sits at
  // position p and carries query p - 1's rows, which DebugAttention of
  // prompt + generated tokens holds too.
  const std::vector<int> prefix(prompt.begin(), prompt.begin() + 40);
  pb::GenerateRequest generate = IdsRequest(prefix, 6);
  generate.mutable_attention_tap()->add_layers(2);
  generate.mutable_attention_tap()->add_layers(0);
  const Outcome out = Generate(generate);
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  std::vector<int> full = prefix;
  for (int id : out.ids()) full.push_back(id);
  pb::DebugAttentionRequest again;
  again.mutable_prompt()->mutable_token_ids()->mutable_ids()->Add(full.begin(),
                                                                  full.end());
  const AttentionReply maps = DebugAttention(*stub_, again);
  ASSERT_TRUE(maps.status.ok());
  const size_t t = full.size();
  for (const pb::Token& token : out.tokens) {
    ASSERT_EQ(token.attention_size(), 2 * 4);
    for (const pb::AttentionRow& row : token.attention()) {
      const int q = token.position() - 1;
      ASSERT_EQ(row.weights_size(), token.position());
      const std::vector<float>& map = maps.maps.at({row.layer(), row.head()});
      for (int k = 0; k < row.weights_size(); ++k) {
        EXPECT_NEAR(row.weights(k), map[q * t + k], 1e-6);
      }
    }
  }
}

TEST_F(E2eTest, DebugAttentionSplitsLargeMapsIntoPiecesOfRows) {
  TextgenServerOptions options = DefaultOptions();
  // 64 tokens: a row is 256 bytes, a map 16 KiB; at 4 KiB a message holds
  // about 15 rows, so every map comes in pieces.
  options.service.max_attention_message_bytes = 4096;
  StartServer(options);
  const std::vector<int> prompt = RandomIds(64, 7);
  pb::DebugAttentionRequest request;
  request.mutable_prompt()->mutable_token_ids()->mutable_ids()->Add(
      prompt.begin(), prompt.end());
  const AttentionReply pieces = DebugAttention(*stub_, request, 4096);
  ASSERT_TRUE(pieces.status.ok()) << pieces.status.error_message();
  EXPECT_GT(pieces.messages, 3 * 4 * 4);
  ASSERT_EQ(pieces.tokens.size(), 64u);

  KvCache cache(reference_->config(), 1);
  ForwardOptions forward;
  forward.capture_attention = true;
  ForwardResult result;
  const SequenceChunk chunk{0, prompt};
  ASSERT_TRUE(reference_->Forward({&chunk, 1}, cache, forward, result).ok());
  ASSERT_EQ(pieces.maps.size(), 12u);
  for (const auto& [key, weights] : pieces.maps) {
    ASSERT_EQ(weights.size(), 64u * 64u);
    for (int q = 0; q < 64; ++q) {
      for (int k = 0; k < 64; ++k) {
        ASSERT_EQ(weights[q * 64 + k],
                  result.attention[0].at(key.first, key.second, q, k));
      }
    }
  }
}

TEST_F(E2eTest, DebugAttentionCallsOneAfterAnotherAreNeverConcurrent) {
  // One call at a time is allowed; a client that waits for each reply before
  // the next call must never be refused, however fast it calls again.
  TextgenServerOptions options = DefaultOptions();
  options.service.max_concurrent_debug_attention = 1;
  StartServer(options);
  pb::DebugAttentionRequest request;
  const std::vector<int> prompt = RandomIds(8, 3);
  request.mutable_prompt()->mutable_token_ids()->mutable_ids()->Add(
      prompt.begin(), prompt.end());
  for (int i = 0; i < 100; ++i) {
    const AttentionReply reply = DebugAttention(*stub_, request);
    ASSERT_TRUE(reply.status.ok())
        << "call " << i << ": " << reply.status.error_message();
  }
}

TEST_F(E2eTest, DebugAttentionLimitsAndSelection) {
  TextgenServerOptions options = DefaultOptions();
  StartServer(options);
  pb::DebugAttentionRequest request;
  const std::vector<int> long_prompt(81, 4);
  request.mutable_prompt()->mutable_token_ids()->mutable_ids()->Add(
      long_prompt.begin(), long_prompt.end());
  AttentionReply reply = DebugAttention(*stub_, request);
  EXPECT_EQ(reply.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(reply.status.error_message(),
              HasSubstr("--max_attention_tokens"));

  request.mutable_prompt()->set_text("Hello");
  request.add_layers(1);
  request.add_heads(3);
  request.add_heads(0);
  reply = DebugAttention(*stub_, request);
  ASSERT_TRUE(reply.status.ok()) << reply.status.error_message();
  ASSERT_EQ(reply.tokens.size(), 5u);
  EXPECT_EQ(reply.tokens[1].text(), "e");
  EXPECT_EQ(reply.maps.size(), 2u);
  EXPECT_TRUE(reply.maps.count({1, 3}));

  request.add_layers(9);
  reply = DebugAttention(*stub_, request);
  EXPECT_EQ(reply.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(reply.status.error_message(), HasSubstr("layers[1] = 9"));
}

TEST_F(E2eTest, DebugAttentionCanBeDisabled) {
  TextgenServerOptions options = DefaultOptions();
  options.service.debug_attention = false;
  StartServer(options);
  pb::DebugAttentionRequest request;
  request.mutable_prompt()->set_text("Hello");
  const AttentionReply reply = DebugAttention(*stub_, request);
  EXPECT_EQ(reply.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  // Attention taps are the same debug work.
  pb::GenerateRequest tapped = IdsRequest({1, 2, 3}, 2);
  tapped.mutable_attention_tap()->add_layers(0);
  const Outcome out = Generate(tapped);
  EXPECT_EQ(out.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(out.status.error_message(),
              ::testing::HasSubstr("--debug_attention=off"));
  // Plain generation is unaffected.
  EXPECT_TRUE(Generate(IdsRequest({1, 2, 3}, 2)).status.ok());
}

TEST_F(E2eTest, ModelInfoAndTokenize) {
  StartServer();
  grpc::ClientContext context;
  pb::ModelInfo info;
  ASSERT_TRUE(stub_->GetModelInfo(&context, {}, &info).ok());
  EXPECT_EQ(info.architecture(), "gpt2");
  EXPECT_EQ(info.positional_encoding(), "learned");
  EXPECT_EQ(info.num_layers(), 3);
  EXPECT_EQ(info.vocab_size(), 97);
  EXPECT_EQ(info.context_length(), 128);
  // The sum of model.safetensors' tensor sizes (tied head).
  EXPECT_EQ(info.num_parameters(), 164480);
  EXPECT_EQ(info.tokenizer(), "char");
  // The kernels this process chose at start-up, and the weights' storage.
  EXPECT_EQ(info.cpu_kernels(),
            kernels::KernelFamilyName(kernels::ActiveKernelFamily()));
  EXPECT_EQ(info.weights_dtype(), "f32");
  EXPECT_EQ(info.kv_cache_dtype(), "f32");
  EXPECT_EQ(info.limits().max_prompt_tokens(), 100);
  EXPECT_EQ(info.limits().max_new_tokens(), 200);

  grpc::ClientContext tokenize_context;
  pb::TokenizeRequest request;
  request.set_text("Café");
  pb::TokenizeResponse response;
  ASSERT_TRUE(stub_->Tokenize(&tokenize_context, request, &response).ok());
  ASSERT_EQ(response.tokens_size(), 4);
  EXPECT_EQ(response.tokens(3).text(), "é");
  EXPECT_EQ(response.tokens(3).id(), 96);
}

TEST_F(E2eTest, DrainTellsHealthWatchersRefusesNewCallsAndStreamsFinish) {
  StartServer();
  EXPECT_EQ(HealthStatus(), 1);  // SERVING

  // A health Watch opened before the drain hears NOT_SERVING; once draining,
  // the server takes no new calls, so a new Check could not be answered.
  grpc::ClientContext watch_context;
  watch_context.set_deadline(absl::ToChronoTime(absl::Now() + kWait));
  const grpc::internal::RpcMethod watch_method(
      "/grpc.health.v1.Health/Watch",
      grpc::internal::RpcMethod::SERVER_STREAMING);
  std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> watch(
      grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(
          channel_.get(), watch_method, &watch_context, ToBuffer("")));
  auto next_status = [&]() -> int {
    grpc::ByteBuffer message;
    if (!watch->Read(&message)) return -1;
    google::protobuf::UnknownFieldSet fields;
    EXPECT_TRUE(fields.ParseFromString(ToString(message)));
    for (int i = 0; i < fields.field_count(); ++i) {
      if (fields.field(i).number() == 1) {
        return static_cast<int>(fields.field(i).varint());
      }
    }
    return 0;
  };
  EXPECT_EQ(next_status(), 1);

  auto context = ContextWithWait();
  auto holding = HoldingStub();
  auto held = holding->Generate(context.get(), HeavyRequest(1));
  ASSERT_TRUE(
      WaitForStats([](const EngineStats& s) { return s.slots_in_use == 1; }));

  std::thread drain([&] { server_->Drain(kWait); });
  EXPECT_EQ(next_status(), 2);  // NOT_SERVING while the held stream runs.
  // The port closes (right after NOT_SERVING: a connection that slips in
  // between gets its call CANCELLED by gRPC's shutdown), and then a call on
  // a new connection is UNAVAILABLE.
  const absl::Time port_deadline = absl::Now() + kWait;
  while (PortAcceptsConnections(server_->port()) &&
         absl::Now() < port_deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_FALSE(PortAcceptsConnections(server_->port()));
  grpc::ChannelArguments own_connection;
  own_connection.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto fresh = pb::TextGeneration::NewStub(grpc::CreateCustomChannel(
      absl::StrCat("127.0.0.1:", server_->port()),
      grpc::InsecureChannelCredentials(), own_connection));
  grpc::ClientContext fresh_context;
  fresh_context.set_deadline(absl::ToChronoTime(absl::Now() + kWait));
  pb::ModelInfo info;
  EXPECT_EQ(
      fresh->GetModelInfo(&fresh_context, pb::GetModelInfoRequest(), &info)
          .error_code(),
      grpc::StatusCode::UNAVAILABLE);

  const Outcome out = ReadAll(*held);  // Finishes within the grace.
  EXPECT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_EQ(out.tokens.size(), 110u);
  watch_context.TryCancel();
  drain.join();
}

TEST_F(E2eTest, ReflectionListsTheService) {
  StartServer();
  // grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo with
  // list_services (field 7), decoded field by field: gRPC installs no
  // reflection.proto for clients.
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kWait));
  const grpc::internal::RpcMethod method(
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
      grpc::internal::RpcMethod::BIDI_STREAMING);
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>>
      stream(grpc::internal::ClientReaderWriterFactory<
             grpc::ByteBuffer, grpc::ByteBuffer>::Create(channel_.get(), method,
                                                         &context));
  ASSERT_TRUE(stream->Write(ToBuffer(std::string("\x3a\x01*", 3))));
  stream->WritesDone();
  grpc::ByteBuffer response;
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_TRUE(stream->Finish().ok());

  google::protobuf::UnknownFieldSet fields;
  ASSERT_TRUE(fields.ParseFromString(ToString(response)));
  std::vector<std::string> services;
  for (int i = 0; i < fields.field_count(); ++i) {
    if (fields.field(i).number() != 6) continue;  // list_services_response
    google::protobuf::UnknownFieldSet list;
    ASSERT_TRUE(list.ParseFromString(fields.field(i).length_delimited()));
    for (int j = 0; j < list.field_count(); ++j) {
      google::protobuf::UnknownFieldSet service;
      ASSERT_TRUE(service.ParseFromString(list.field(j).length_delimited()));
      services.push_back(service.field(0).length_delimited());
    }
  }
  EXPECT_THAT(services, ::testing::Contains("textgen.v1.TextGeneration"));
  EXPECT_THAT(services, ::testing::Contains("grpc.health.v1.Health"));
}

TEST_F(E2eTest, MetricsCountRequestsTokensAndSlots) {
  TextgenServerOptions options = DefaultOptions();
  options.metrics_port = 0;
  StartServer(options);
  ASSERT_GT(server_->metrics_port(), 0);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(Generate(IdsRequest({1, 2, 3}, 7)).status.ok());
  }
  EXPECT_FALSE(Generate(IdsRequest({}, 7)).status.ok());

  httplib::Client client("127.0.0.1", server_->metrics_port());
  client.set_read_timeout(60, 0);
  const httplib::Result result = client.Get("/metrics");
  ASSERT_TRUE(result) << httplib::to_string(result.error());
  EXPECT_EQ(result->status, 200);
  const std::string& body = result->body;
  EXPECT_THAT(body, HasSubstr("textgen_requests_total{code=\"OK\"} 3\n"));
  EXPECT_THAT(
      body, HasSubstr("textgen_requests_total{code=\"INVALID_ARGUMENT\"} 1\n"));
  EXPECT_THAT(body, HasSubstr("textgen_generated_tokens_total 21\n"));
  EXPECT_THAT(body, HasSubstr("textgen_kv_slots_in_use 0\n"));
  EXPECT_THAT(body, HasSubstr("textgen_kv_slots_total 8\n"));
  EXPECT_THAT(body, HasSubstr("textgen_queue_depth 0\n"));
  EXPECT_THAT(body, HasSubstr("textgen_batch_size "));
  EXPECT_THAT(body, HasSubstr(absl::StrCat("textgen_cpu_kernels_info{family=\"",
                                           kernels::KernelFamilyName(
                                               kernels::ActiveKernelFamily()),
                                           "\"} 1\n")));
  EXPECT_THAT(body, HasSubstr("textgen_time_to_first_token_seconds_count 3\n"));
  EXPECT_THAT(body,
              HasSubstr("textgen_time_per_output_token_seconds_bucket{le=\"+"
                        "Inf\"} 3\n"));
}

}  // namespace
}  // namespace textgen
