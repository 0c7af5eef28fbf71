// llama.cpp's KL-divergence method (model/kl_divergence.h), its base file
// (model/kl_base_file.h) and its chunks (model/perplexity_chunks.h): the
// 16-bit log-probability rows decode to the exact log-softmax within half a
// step, the statistics equal a direct float64 computation from their
// definitions, the file has llama.cpp's layout and refuses what is not one,
// and a chunk's scored logits are the ones one whole forward pass gives.
#include "model/kl_divergence.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "model/formats/hf_checkpoint.h"
#include "model/kl_base_file.h"
#include "model/perplexity_chunks.h"
#include "tests/testing/test_util.h"

namespace textgen {
namespace {

std::vector<float> RandomLogits(int vocab, float stddev, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> logits(vocab);
  for (float& l : logits) l = normal(rng);
  return logits;
}

std::vector<double> LogSoftmax(const std::vector<float>& logits) {
  const double max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(l - max);
  std::vector<double> out;
  for (float l : logits) out.push_back(l - max - std::log(sum));
  return out;
}

// log p(v) as a row encodes it (−inf for code 0: more than 16 nats down).
double Decoded(const std::vector<uint16_t>& row, int v) {
  float scale, min_log_prob;
  std::memcpy(&scale, &row[0], 4);
  std::memcpy(&min_log_prob, &row[2], 4);
  return row[4 + v] == 0 ? -INFINITY : scale * row[4 + v] + min_log_prob;
}

std::vector<uint16_t> Encode(const std::vector<float>& logits, int target,
                             double* nll = nullptr) {
  std::vector<uint16_t> row(LogProbRowWords(logits.size()), 0xABCD);
  const double v = EncodeLogProbs(logits, target, absl::MakeSpan(row));
  if (nll) *nll = v;
  return row;
}

TEST(KlDivergenceTest, RowWordsAreLlamaCppsNv) {
  EXPECT_EQ(LogProbRowWords(5), 10u);  // 6 (even) + 4
  EXPECT_EQ(LogProbRowWords(6), 10u);
  EXPECT_EQ(LogProbRowWords(50257), 50262u);
  EXPECT_EQ(LogProbRowWords(151936), 151940u);
}

TEST(KlDivergenceTest, RowsDecodeToTheLogSoftmaxWithinHalfAStep) {
  std::mt19937 rng(7);
  const int vocab = 1001;  // Odd: the row has a padding word.
  const std::vector<float> logits = RandomLogits(vocab, 5.0f, rng);
  double nll;
  const std::vector<uint16_t> row = Encode(logits, 17, &nll);
  const std::vector<double> exact = LogSoftmax(logits);
  EXPECT_NEAR(nll, -exact[17], 1e-5);
  const double max = *std::max_element(logits.begin(), logits.end());
  const double step = 16.0 / 65535;
  int clipped = 0;
  for (int v = 0; v < vocab; ++v) {
    if (logits[v] <= max - 16) {
      EXPECT_EQ(row[4 + v], 0) << v;
      ++clipped;
    } else {
      EXPECT_NEAR(Decoded(row, v), exact[v], step / 2 + 1e-5) << v;
    }
  }
  EXPECT_GT(clipped, 0);  // Std 5 over 1001 values spans more than 16 nats.
  EXPECT_EQ(row[4 + vocab], 0);  // The padding word is written, as zero.
}

TEST(KlDivergenceTest, IdenticalModelsDivergeByTheRoundingOnly) {
  std::mt19937 rng(1);
  KlDivergence kld(500);
  for (int i = 0; i < 50; ++i) {
    const std::vector<float> logits = RandomLogits(500, 3.0f, rng);
    kld.Add(logits, Encode(logits, i), i);
  }
  const KlSummary s = kld.Summarize();
  EXPECT_EQ(s.count, 50);
  EXPECT_LT(std::abs(s.mean_kld.value), 2e-4);
  EXPECT_DOUBLE_EQ(s.same_top.value, 1.0);
  EXPECT_EQ(s.same_top.uncertainty, 0.0);
  EXPECT_NEAR(s.ln_ppl_ratio.value, 0.0, 2e-4);
}

// KL, same top, Δp and the NLLs against their definitions in float64 over the
// decoded base, position by position and in the summary.
TEST(KlDivergenceTest, StatisticsFollowTheirDefinitions) {
  std::mt19937 rng(3);
  const int vocab = 300, positions = 40;
  KlDivergence kld(vocab);
  std::vector<double> klds, nlls, p_diffs;
  int same = 0;
  for (int i = 0; i < positions; ++i) {
    const std::vector<float> base = RandomLogits(vocab, 3.0f, rng);
    std::vector<float> test = base;
    std::normal_distribution<float> noise(0.0f, 0.3f);
    for (float& l : test) l += noise(rng);
    const int target = (i * 37) % vocab;
    const std::vector<uint16_t> row = Encode(base, target);
    kld.Add(test, row, target);

    const std::vector<double> log_test = LogSoftmax(test);
    double sum = 0;
    for (int v = 0; v < vocab; ++v) {
      const double lb = Decoded(row, v);
      if (lb > -16) sum += std::exp(lb) * (lb - log_test[v]);
    }
    klds.push_back(sum);
    nlls.push_back(-log_test[target]);
    p_diffs.push_back(std::exp(log_test[target]) -
                      std::exp(Decoded(row, target)));
    const int top_test =
        std::max_element(test.begin(), test.end()) - test.begin();
    const int top_base =
        std::max_element(base.begin(), base.end()) - base.begin();
    same += top_test == top_base;
  }
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s / v.size();
  };
  const KlSummary s = kld.Summarize();
  ASSERT_EQ(s.count, positions);
  const double m = mean(klds);
  EXPECT_NEAR(s.mean_kld.value, m, 1e-5 + 1e-4 * m);
  double var = 0;
  for (double x : klds) var += (x - m) * (x - m);
  var /= positions;  // llama.cpp: E[x²] − E[x]², then / (n − 1).
  EXPECT_NEAR(s.mean_kld.uncertainty, std::sqrt(var / (positions - 1)),
              1e-3 * std::sqrt(var));
  EXPECT_NEAR(s.ppl.value, std::exp(mean(nlls)), 1e-4 * s.ppl.value);
  EXPECT_NEAR(s.mean_p_diff.value, mean(p_diffs), 1e-6);
  EXPECT_DOUBLE_EQ(s.same_top.value, 1.0 * same / positions);
  EXPECT_LT(same, positions);  // Noise of 0.3 moves some maxima.
  EXPECT_GT(same, 0);
  std::sort(klds.begin(), klds.end());
  EXPECT_NEAR(s.kld_max, klds.back(), 1e-5);
  EXPECT_NEAR(s.kld_min, klds.front(), 1e-5);
  EXPECT_NEAR(s.kld_median, 0.5 * (klds[19] + klds[20]), 1e-5);
  EXPECT_LE(s.kld_90, s.kld_99);
  EXPECT_LE(s.kld_10, s.kld_median);
}

TEST(KlDivergenceTest, SummaryReadsLikeLlamaPerplexity) {
  std::mt19937 rng(5);
  KlDivergence kld(64);
  for (int i = 0; i < 20; ++i) {
    const std::vector<float> logits = RandomLogits(64, 2.0f, rng);
    kld.Add(logits, Encode(logits, i), i);
  }
  const std::string text = FormatKlSummary(kld.Summarize());
  EXPECT_NE(text.find("====== KL divergence statistics ======\nMean    KLD: "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Same top p: 100.000 ± 0.000 %"), std::string::npos)
      << text;
  const std::string ratio = "Mean PPL(Q)/PPL(base)         : ";
  const size_t at = text.find(ratio);
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_NEAR(std::stod(text.substr(at + ratio.size())), 1.0, 1e-4) << text;
}

class KlBaseFileTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) { return dir_ + "/" + name; }
  const std::string dir_ = testing::FreshTempDir("kl_base_file");
};

TEST_F(KlBaseFileTest, WritesLlamaCppsLayoutAndReadsItBack) {
  const int n_ctx = 8, vocab = 5;  // 3 scored rows per chunk, 10 words a row.
  std::vector<int> tokens(2 * n_ctx);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = i % vocab;
  auto writer = KlBaseWriter::Create(Path("base.kld"), n_ctx, vocab, tokens);
  ASSERT_TRUE(writer.ok()) << writer.status();
  std::vector<uint16_t> chunk0(30), chunk1(30);
  for (int i = 0; i < 30; ++i) chunk0[i] = i, chunk1[i] = 1000 + i;
  EXPECT_EQ(writer->AppendChunk(std::vector<uint16_t>(29)).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(writer->AppendChunk(chunk0).ok());
  EXPECT_EQ(writer->Close().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(writer->AppendChunk(chunk1).ok());
  EXPECT_EQ(writer->AppendChunk(chunk1).code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(writer->Close().ok());

  // The bytes: magic, three int32, the tokens, the rows.
  std::ifstream in(Path("base.kld"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  ASSERT_EQ(bytes.size(), 8 + 12 + 4 * 16 + 2 * 60u);
  EXPECT_EQ(bytes.substr(0, 8), "_logits_");
  int32_t header[3];
  std::memcpy(header, bytes.data() + 8, 12);
  EXPECT_EQ(header[0], 8);
  EXPECT_EQ(header[1], 5);
  EXPECT_EQ(header[2], 2);

  auto reader = KlBaseReader::Open(Path("base.kld"));
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(reader->n_ctx(), n_ctx);
  EXPECT_EQ(reader->n_vocab(), vocab);
  EXPECT_EQ(reader->n_chunks(), 2);
  EXPECT_EQ(reader->tokens(), tokens);
  std::vector<uint16_t> rows;
  ASSERT_TRUE(reader->ReadChunk(rows).ok());
  EXPECT_EQ(rows, chunk0);
  ASSERT_TRUE(reader->ReadChunk(rows).ok());
  EXPECT_EQ(rows, chunk1);
  EXPECT_EQ(reader->ReadChunk(rows).code(), absl::StatusCode::kOutOfRange);
}

TEST_F(KlBaseFileTest, RefusesWhatIsNotABaseFile) {
  const std::vector<int> tokens(8, 1);
  EXPECT_EQ(KlBaseWriter::Create(Path("x"), 8, 5, std::vector<int>(7, 1))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  {
    std::ofstream out(Path("not.kld"), std::ios::binary);
    out << "_logitz_" << std::string(64, '\0');
  }
  EXPECT_EQ(KlBaseReader::Open(Path("not.kld")).status().code(),
            absl::StatusCode::kInvalidArgument);
  {
    auto writer = KlBaseWriter::Create(Path("short.kld"), 8, 5, tokens);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE(writer->AppendChunk(std::vector<uint16_t>(30)).ok());
    ASSERT_TRUE(writer->Close().ok());
  }
  std::filesystem::resize_file(Path("short.kld"), 8 + 12 + 32 + 59);
  auto reader = KlBaseReader::Open(Path("short.kld"));
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(reader.status().message().find("header calls for"),
            std::string::npos);
  EXPECT_EQ(KlBaseReader::Open(Path("missing.kld")).status().code(),
            absl::StatusCode::kNotFound);
}

// The scored half of a chunk, whatever the passes, is what one forward pass
// over the whole chunk gives at positions n/2 .. n − 2; --bos changes the
// first token read.
TEST(PerplexityChunksTest, ScoredLogitsEqualOneWholePass) {
  auto checkpoint = LoadCheckpoint(testing::GoldenDir("gpt2_learned"));
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  Decoder decoder(*std::move(checkpoint));
  const int vocab = decoder.config().vocab_size, n = 40;
  std::vector<int> chunk(n);
  for (int i = 0; i < n; ++i) chunk[i] = (i * 13 + 5) % vocab;

  for (int bos : {-1, 3}) {
    std::vector<int> read = chunk;
    if (bos >= 0) read[0] = bos;
    KvCache whole_cache(decoder.config(), ChunkCacheOptions(n));
    ForwardResult whole;
    ASSERT_TRUE(decoder
                    .Forward({SequenceChunk{0, read}}, whole_cache,
                             {LogitsMode::kAllTokens}, whole)
                    .ok());
    for (int rows_per_pass : {1, 7, 64}) {
      KvCache cache(decoder.config(), ChunkCacheOptions(n));
      int calls = 0;
      const absl::Status status = ForEachScoredLogits(
          decoder, cache, chunk, bos, rows_per_pass,
          [&](int i, absl::Span<const float> logits) {
            EXPECT_EQ(i, calls++);
            const auto expected = whole.logits.row(n / 2 + i);
            EXPECT_EQ(logits.size(), static_cast<size_t>(vocab));
            for (int v = 0; v < vocab; ++v) {
              if (logits[v] != expected[v]) {
                ADD_FAILURE()
                    << "bos " << bos << ", passes of " << rows_per_pass
                    << ": row " << i << " token " << v << ": " << logits[v]
                    << " != " << expected[v];
                return absl::OkStatus();
              }
            }
            return absl::OkStatus();
          });
      ASSERT_TRUE(status.ok()) << status;
      EXPECT_EQ(calls, ScoredPerChunk(n));  // 19: positions 20 .. 38.
    }
  }
}

TEST(PerplexityChunksTest, StopsAtTheFirstErrorOfTheCallback) {
  auto checkpoint = LoadCheckpoint(testing::GoldenDir("gpt2_learned"));
  ASSERT_TRUE(checkpoint.ok());
  Decoder decoder(*std::move(checkpoint));
  KvCache cache(decoder.config(), ChunkCacheOptions(16));
  std::vector<int> chunk(16, 1);
  int calls = 0;
  const absl::Status status = ForEachScoredLogits(
      decoder, cache, chunk, -1, 4, [&](int, absl::Span<const float>) {
        return ++calls == 2 ? absl::CancelledError("stop") : absl::OkStatus();
      });
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(ForEachScoredLogits(
                decoder, cache, std::vector<int>(3, 1), -1, 4,
                [](int, absl::Span<const float>) { return absl::OkStatus(); })
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace textgen
