// The shipped encoder–decoder model (models/dates-seq2seq, issue 20) served
// over gRPC: every held-out source goes through Generate (greedy, up to the
// training script's budget, many calls at once), and the server's answers
// give the exact-match accuracy, which must be >= 0.99 and equal to the one
// PyTorch measured (metrics.json), prediction by prediction (heldout.jsonl
// records PyTorch's greedy output for each source).
//
// heldout.jsonl (tools/train_seq2seq.py): one JSON object per line,
//   {"source": "...", "target": "YYYY-MM-DD", "prediction": "...",
//    "format": "...", "correct": true}
// metrics.json: "exact_match_accuracy", "exact_match_correct",
// "heldout_examples", and "decoding" ("greedy, float32, from <s> until </s>
// or N tokens").
//
// Skips (saying why) only when the model directory is absent.
// TEXTGEN_SEQ2SEQ_MODEL_DIR=DIR runs it on another directory of this layout.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "model/formats/model_loader.h"
#include "nlohmann/json.hpp"
#include "server/server.h"
#include "tests/testing/test_util.h"
#include "textgen/v1/textgen.grpc.pb.h"

namespace textgen {
namespace {

namespace pb = ::textgen::v1;
using Json = nlohmann::json;

constexpr int kThreads = 16;

// models/dates-seq2seq, or $TEXTGEN_SEQ2SEQ_MODEL_DIR (another model
// directory of the same layout, e.g. a run of the training script).
std::string ModelDir() {
  const char* dir = std::getenv("TEXTGEN_SEQ2SEQ_MODEL_DIR");
  return dir != nullptr && *dir != '\0'
             ? std::string(dir)
             : absl::StrCat(TEXTGEN_SOURCE_DIR, "/models/dates-seq2seq");
}

struct Example {
  std::string source, target, prediction, format;
};

TEST(Seq2seqAccuracyTest, GrpcGreedyAccuracyEqualsPyTorch) {
  const std::string dir = ModelDir();
  if (!std::filesystem::exists(dir)) {
    GTEST_SKIP() << dir << " is absent: the shipped encoder-decoder model "
                 << "(tools/train_seq2seq.py) is not in this checkout";
  }
  std::ifstream metrics_file(dir + "/metrics.json");
  ASSERT_TRUE(metrics_file) << "no metrics.json in " << dir;
  const Json metrics = Json::parse(metrics_file);
  // The training script's greedy budget, from its own record.
  const std::string decoding = metrics.at("decoding").get<std::string>();
  int max_new_tokens = 0;
  ASSERT_EQ(std::sscanf(decoding.substr(decoding.rfind(" or ")).c_str(),
                        " or %d tokens", &max_new_tokens),
            1)
      << "metrics.json decoding: " << decoding;

  std::vector<Example> examples;
  std::ifstream heldout(dir + "/heldout.jsonl");
  ASSERT_TRUE(heldout) << "no heldout.jsonl in " << dir;
  for (std::string line; std::getline(heldout, line);) {
    if (line.empty()) continue;
    const Json j = Json::parse(line);
    examples.push_back({j.at("source"), j.at("target"), j.at("prediction"),
                        j.value("format", "")});
  }
  ASSERT_EQ(static_cast<int>(examples.size()),
            metrics.at("heldout_examples").get<int>());

  TextgenServerOptions options;
  options.address = "127.0.0.1:0";
  options.engine.num_slots = kThreads;
  options.engine.max_queue = 4 * kThreads;
  options.service.model_name = "dates-seq2seq";
  options.service.debug_attention = false;
  auto loaded = LoadModel(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  std::shared_ptr<const Tokenizer> tokenizer = std::move(loaded->tokenizer);
  auto server = TextgenServer::Start(
      options, std::make_unique<Decoder>(std::move(loaded->checkpoint)),
      nullptr, tokenizer);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = pb::TextGeneration::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*server)->port()),
                          grpc::InsecureChannelCredentials()));

  // Every source through Generate, kThreads calls at a time.
  std::vector<std::string> answers(examples.size());
  std::vector<grpc::Status> statuses(examples.size());
  std::atomic<size_t> next{0};
  const absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < examples.size();) {
        pb::GenerateRequest request;
        request.mutable_source()->set_text(examples[i].source);
        request.set_max_new_tokens(max_new_tokens);  // temperature 0: greedy
        grpc::ClientContext context;
        context.set_deadline(
            absl::ToChronoTime(absl::Now() + absl::Seconds(120)));
        auto reader = stub->Generate(&context, request);
        pb::GenerateResponse response;
        while (reader->Read(&response)) {
          if (response.has_token()) answers[i] += response.token().text();
        }
        statuses[i] = reader->Finish();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);

  int correct = 0, differ = 0, failed = 0;
  std::map<std::string, std::pair<int, int>> by_format;  // correct, total
  for (size_t i = 0; i < examples.size(); ++i) {
    const Example& e = examples[i];
    if (!statuses[i].ok()) {
      ++failed;
      ADD_FAILURE() << "\"" << e.source
                    << "\": " << statuses[i].error_message();
      continue;
    }
    const bool ok = answers[i] == e.target;
    correct += ok;
    by_format[e.format].first += ok;
    ++by_format[e.format].second;
    if (answers[i] != e.prediction) {
      if (++differ <= 10) {
        ADD_FAILURE() << "\"" << e.source << "\": server \"" << answers[i]
                      << "\", PyTorch \"" << e.prediction << "\"";
      }
    }
  }
  const double accuracy = static_cast<double>(correct) / examples.size();
  std::printf(
      "[dates-seq2seq] gRPC greedy exact-match accuracy %.6f (%d/%zu); "
      "PyTorch %.6f (%d); %d predictions differ from PyTorch's; %d calls "
      "failed; %zu calls in %.1f s with %d at once (shared machine: noisy)\n",
      accuracy, correct, examples.size(),
      metrics.at("exact_match_accuracy").get<double>(),
      metrics.at("exact_match_correct").get<int>(), differ, failed,
      examples.size(), seconds, kThreads);
  for (const auto& [format, counts] : by_format) {
    std::printf("  %-24s %d/%d\n", format.c_str(), counts.first, counts.second);
  }
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(differ, 0) << "every prediction should equal PyTorch's";
  EXPECT_EQ(correct, metrics.at("exact_match_correct").get<int>());
  EXPECT_GE(accuracy, 0.99);
}

}  // namespace
}  // namespace textgen
