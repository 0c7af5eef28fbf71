// The in-process server fixture of the end-to-end tests: a TextgenServer in
// the test process on a port of 127.0.0.1 the system picks, a TextGeneration
// stub on it over a real socket, and a reference decoder of the same model to
// hold its answers against; and reading a Generate stream whole. Waits are
// bounded (kServerTestWait) only so that a bug fails instead of hanging.
#ifndef TEXTGEN_TESTS_TESTING_SERVER_FIXTURE_H_
#define TEXTGEN_TESTS_TESTING_SERVER_FIXTURE_H_

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "model/decoder.h"
#include "model/formats/model_loader.h"
#include "model/text/tokenizer.h"
#include "server/server.h"
#include "tests/testing/test_util.h"
#include "textgen/v1/textgen.grpc.pb.h"

namespace textgen::testing {

inline constexpr absl::Duration kServerTestWait = absl::Seconds(60);

// A client context whose deadline is kServerTestWait away.
inline std::unique_ptr<grpc::ClientContext> ContextWithWait() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + kServerTestWait));
  return context;
}

// What a Generate stream delivered.
struct Outcome {
  std::vector<textgen::v1::Token> tokens;
  std::optional<textgen::v1::Finished> finished;  // The last.
  std::vector<textgen::v1::Finished> finishes;    // One per completion.
  grpc::Status status;
  int messages = 0;

  std::vector<int> ids() const {
    std::vector<int> ids;
    for (const textgen::v1::Token& t : tokens) ids.push_back(t.id());
    return ids;
  }
  std::string text() const {
    std::string text;
    for (const textgen::v1::Token& t : tokens) text += t.text();
    return text;
  }
};

// Reads `reader` to its end and its status.
inline Outcome ReadAll(
    grpc::ClientReader<textgen::v1::GenerateResponse>& reader) {
  Outcome out;
  textgen::v1::GenerateResponse response;
  while (reader.Read(&response)) {
    ++out.messages;
    if (response.has_token()) {
      out.tokens.push_back(response.token());
    } else if (response.has_finished()) {
      out.finished = response.finished();
      out.finishes.push_back(response.finished());
    }
  }
  out.status = reader.Finish();
  return out;
}

class ServerTest : public ::testing::Test {
 protected:
  // Serves the model in `dir` with `options` (its address should be
  // "127.0.0.1:0"); DebugAttention gets a decoder of its own when
  // options.service.debug_attention is on.
  void StartServer(const std::string& dir,
                   const TextgenServerOptions& options) {
    auto loaded = LoadModel(dir);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    tokenizer_ = std::move(loaded->tokenizer);
    auto server = TextgenServer::Start(
        options, std::make_unique<Decoder>(std::move(loaded->checkpoint)),
        options.service.debug_attention ? LoadDecoder(dir) : nullptr,
        tokenizer_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                   grpc::InsecureChannelCredentials());
    stub_ = textgen::v1::TextGeneration::NewStub(channel_);
    reference_ = LoadDecoder(dir);
  }

  // One Generate call, read whole.
  Outcome Generate(const textgen::v1::GenerateRequest& request) {
    auto context = ContextWithWait();
    auto reader = stub_->Generate(context.get(), request);
    return ReadAll(*reader);
  }

  std::shared_ptr<const Tokenizer> tokenizer_;
  std::unique_ptr<TextgenServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<textgen::v1::TextGeneration::Stub> stub_;
  // The same model, for the answers the server's should equal.
  std::unique_ptr<Decoder> reference_;
};

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_TESTING_SERVER_FIXTURE_H_
