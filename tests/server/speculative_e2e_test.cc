// Speculative decoding through the server's doors: the shipped model served
// with speculation off, with prompt lookup and with its draft model answers
// the same Generate calls with the same streams (token ids, logprobs and top
// log-probabilities as float bits, finish reasons), 16 calls at once; the
// server says which mode it runs (GetModelInfo, GET /v1/models) and counts
// proposals (/metrics); a call may lower k or turn it off, and a negative k
// is INVALID_ARGUMENT over gRPC and a 400 naming speculative_tokens over
// HTTP.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "model/formats/model_loader.h"
#include "nlohmann/json.hpp"
#include "server/server.h"
#include "tests/testing/server_fixture.h"

// After the model headers: httplib.h defines names Eigen's headers use.
#include <httplib.h>

namespace textgen {
namespace {

namespace pb = textgen::v1;
using testing::ContextWithWait;
using testing::Outcome;
using testing::ReadAll;

const std::string kModels = absl::StrCat(TEXTGEN_SOURCE_DIR, "/models/");

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// A server of the shipped model with `mode`, its gRPC stub and HTTP port.
struct Served {
  std::unique_ptr<TextgenServer> server;
  std::unique_ptr<pb::TextGeneration::Stub> stub;
};

Served Serve(SpeculativeMode mode) {
  Served served;
  absl::StatusOr<LoadedModel> model = LoadModel(kModels + "shakespeare-char");
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return served;
  std::unique_ptr<Decoder> draft;
  if (mode == SpeculativeMode::kDraft) {
    absl::StatusOr<LoadedModel> loaded =
        LoadModel(kModels + "shakespeare-char-draft");
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    if (!loaded.ok()) return served;
    draft = std::make_unique<Decoder>(std::move(loaded->checkpoint));
  }
  TextgenServerOptions options;
  options.address = "127.0.0.1:0";
  options.http_port = 0;
  options.metrics_port = -1;
  options.service.model_name = "shakespeare-char";
  options.service.draft_model_name =
      draft != nullptr ? "shakespeare-char-draft" : "";
  options.engine.num_slots = 16;
  options.engine.speculation.mode = mode;
  options.engine.speculation.max_batch = 16;
  auto server = TextgenServer::Start(
      options, std::make_unique<Decoder>(std::move(model->checkpoint)), nullptr,
      std::move(model->tokenizer), std::move(draft));
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return served;
  served.server = *std::move(server);
  served.stub = pb::TextGeneration::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", served.server->port()),
                          grpc::InsecureChannelCredentials()));
  return served;
}

// Sixteen calls: greedy and sampled, quoting prompts and plain ones, stop
// strings, top log-probabilities, n = 2, one with k = 2 and one with
// speculation off.
std::vector<pb::GenerateRequest> Calls() {
  const std::string texts[] = {
      "ROMEO:\nBut soft, what light through yonder window breaks?\n\nROMEO:\n"
      "But soft,",
      "First Citizen:\nBefore we proceed any further, hear me speak.\n",
      "KING RICHARD II:\nNo matter where; of comfort no man speak:\n",
      "JULIET:\nO Romeo, Romeo! wherefore art thou Romeo?\nJULIET:\nO Rom"};
  std::vector<pb::GenerateRequest> calls;
  for (int i = 0; i < 16; ++i) {
    pb::GenerateRequest r;
    r.mutable_prompt()->set_text(texts[i % 4]);
    r.set_max_new_tokens(40 + i);
    r.mutable_sampling()->set_temperature(i < 8 ? 0.0f : 0.25f * (i - 7));
    r.mutable_sampling()->set_seed(7 + i);
    if (i % 5 == 1) r.add_stop("\n");
    if (i % 3 == 0) r.set_top_logprobs(2);
    if (i == 9) r.set_n(2);
    if (i == 4) r.set_speculative_tokens(2);
    if (i == 5) r.set_speculative_tokens(0);
    calls.push_back(std::move(r));
  }
  return calls;
}

// All calls at once, each on its own thread.
std::vector<Outcome> CallAll(pb::TextGeneration::Stub& stub,
                             const std::vector<pb::GenerateRequest>& calls) {
  std::vector<Outcome> outcomes(calls.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < calls.size(); ++i) {
    threads.emplace_back([&, i] {
      auto context = ContextWithWait();
      auto reader = stub.Generate(context.get(), calls[i]);
      outcomes[i] = ReadAll(*reader);
    });
  }
  for (std::thread& t : threads) t.join();
  return outcomes;
}

// A stream's tokens completion by completion (n > 1 interleaves them in
// whatever order the steps made them).
std::vector<pb::Token> ByCompletion(std::vector<pb::Token> tokens) {
  std::stable_sort(tokens.begin(), tokens.end(),
                   [](const pb::Token& a, const pb::Token& b) {
                     return a.completion_index() < b.completion_index();
                   });
  return tokens;
}

void ExpectSame(const std::vector<Outcome>& want,
                const std::vector<Outcome>& got, const std::string& label) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const std::string where = absl::StrCat(label, " call ", i);
    ASSERT_TRUE(want[i].status.ok()) << where << want[i].status.error_message();
    ASSERT_TRUE(got[i].status.ok()) << where << got[i].status.error_message();
    const std::vector<pb::Token> want_tokens = ByCompletion(want[i].tokens);
    const std::vector<pb::Token> got_tokens = ByCompletion(got[i].tokens);
    ASSERT_EQ(want_tokens.size(), got_tokens.size()) << where;
    for (size_t t = 0; t < want_tokens.size(); ++t) {
      const pb::Token& a = want_tokens[t];
      const pb::Token& b = got_tokens[t];
      ASSERT_EQ(a.id(), b.id()) << where << " token " << t;
      EXPECT_EQ(a.text(), b.text()) << where << " token " << t;
      EXPECT_EQ(Bits(a.logprob()), Bits(b.logprob()))
          << where << " token " << t;
      ASSERT_EQ(a.top_logprobs_size(), b.top_logprobs_size()) << where;
      for (int k = 0; k < a.top_logprobs_size(); ++k) {
        EXPECT_EQ(a.top_logprobs(k).id(), b.top_logprobs(k).id()) << where;
        EXPECT_EQ(Bits(a.top_logprobs(k).logprob()),
                  Bits(b.top_logprobs(k).logprob()))
            << where;
      }
    }
    ASSERT_EQ(want[i].finishes.size(), got[i].finishes.size()) << where;
    auto reasons = [](const Outcome& o) {
      std::map<int, pb::FinishReason> by_completion;
      for (const pb::Finished& f : o.finishes) {
        by_completion[f.completion_index()] = f.reason();
      }
      return by_completion;
    };
    EXPECT_EQ(reasons(want[i]), reasons(got[i])) << where;
  }
}

nlohmann::json HttpJson(int port, const std::string& method,
                        const std::string& path, const std::string& body,
                        int* status) {
  httplib::Client client("127.0.0.1", port);
  auto result = method == "GET" ? client.Get(path)
                                : client.Post(path, body, "application/json");
  if (!result) {
    ADD_FAILURE() << method << " " << path << ": no answer";
    return {};
  }
  *status = result->status;
  return result->status == 200 || result->status == 400
             ? nlohmann::json::parse(result->body, nullptr, false)
             : nlohmann::json(result->body);
}

TEST(SpeculativeE2eTest, EveryModeStreamsTheSameAndSaysSo) {
  const std::vector<pb::GenerateRequest> calls = Calls();
  Served off = Serve(SpeculativeMode::kOff);
  ASSERT_NE(off.server, nullptr);
  const std::vector<Outcome> plain = CallAll(*off.stub, calls);
  off.server.reset();

  for (SpeculativeMode mode :
       {SpeculativeMode::kNgram, SpeculativeMode::kDraft}) {
    const std::string name = SpeculativeModeName(mode);
    Served on = Serve(mode);
    ASSERT_NE(on.server, nullptr);
    ExpectSame(plain, CallAll(*on.stub, calls), name);

    pb::ModelInfo info;
    grpc::ClientContext context;
    ASSERT_TRUE(on.stub->GetModelInfo(&context, {}, &info).ok());
    EXPECT_EQ(info.speculation().mode(), name);
    // Each mode's default k.
    EXPECT_EQ(info.speculation().tokens(),
              mode == SpeculativeMode::kDraft ? 3 : 5);
    EXPECT_EQ(info.speculation().draft_model(),
              mode == SpeculativeMode::kDraft ? "shakespeare-char-draft" : "");

    int status = 0;
    const nlohmann::json models =
        HttpJson(on.server->http_port(), "GET", "/v1/models", "", &status);
    ASSERT_EQ(status, 200);
    EXPECT_EQ(models["data"][0]["speculation"]["mode"], name);
    httplib::Client client("127.0.0.1", on.server->http_port());
    auto metrics = client.Get("/metrics");
    ASSERT_TRUE(metrics);
    const std::string& text = metrics->body;
    const size_t at = text.find("\ntextgen_spec_accepted_tokens_total ");
    ASSERT_NE(at, std::string::npos) << name;
    EXPECT_GT(std::stol(text.substr(text.find(' ', at + 1) + 1)), 0)
        << name << ": no proposal accepted";

    // A negative k, over both doors.
    pb::GenerateRequest bad = calls[0];
    bad.set_speculative_tokens(-1);
    auto bad_context = ContextWithWait();
    auto reader = on.stub->Generate(bad_context.get(), bad);
    const Outcome refused = ReadAll(*reader);
    EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(refused.status.error_message().find("speculative_tokens"),
              std::string::npos)
        << refused.status.error_message();
    const nlohmann::json error = HttpJson(
        on.server->http_port(), "POST", "/v1/completions",
        R"({"model": "shakespeare-char", "prompt": "ROMEO:", "max_tokens": 4,
            "speculative_tokens": -1})",
        &status);
    EXPECT_EQ(status, 400);
    EXPECT_EQ(error["error"]["param"], "speculative_tokens") << error.dump();
  }
}

}  // namespace
}  // namespace textgen
