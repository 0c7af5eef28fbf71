// DebugAttention's views of a prompt (server/api/debug_attention.h,
// attention_collector.h, attention_encoding.h), each held to the whole float
// maps of the same prompt:
//   - every compact encoding decodes (with the client's own decoder,
//     client/packed_weights.h) to within the bound textgen.proto states;
//   - a pass in chunks, and a zoom that reuses the cached prompt, give the
//     whole pass's maps bit for bit;
//   - query and key ranges are slices of the whole maps, overviews are their
//     max or mean pooling, summaries and the rollout are computed from them;
//   - what would not fit the budget is refused before the pass, naming the
//     way out.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "client/packed_weights.h"
#include "server/api/attention_encoding.h"
#include "server/api/debug_attention.h"
#include "tests/testing/test_util.h"

namespace textgen {
namespace {

namespace pb = ::textgen::v1;
using ::testing::HasSubstr;

absl::Status Ok() { return absl::OkStatus(); }

// A softmax row of n weights: peaked (a few large) or flat, by seed.
std::vector<float> RandomRow(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, seed % 2 == 0 ? 6.0f : 0.5f);
  std::vector<float> row(n);
  float max = -1e30f;
  for (float& x : row) max = std::max(max, x = normal(rng));
  double sum = 0;
  for (float& x : row) sum += x = std::exp(x - max);
  for (float& x : row) x = static_cast<float>(x / sum);
  return row;
}

std::vector<float> Decoded(const pb::PackedWeights& packed, int width) {
  absl::StatusOr<std::vector<float>> rows =
      client::DecodePackedWeights(packed, width);
  EXPECT_TRUE(rows.ok()) << rows.status();
  return rows.ok() ? *rows : std::vector<float>();
}

TEST(AttentionEncodingTest, EveryFormStaysWithinItsStatedBound) {
  for (int n : {1, 2, 15, 16, 17, 100, 257}) {
    for (unsigned seed = 0; seed < 6; ++seed) {
      const std::vector<float> row = RandomRow(n, seed * 1000 + n);
      const float max = *std::max_element(row.begin(), row.end());
      for (auto [encoding, bound] :
           {std::pair{pb::ATTENTION_ENCODING_UINT8, max / 510},
            std::pair{pb::ATTENTION_ENCODING_UINT16, max / 131070}}) {
        pb::PackedWeights packed;
        AppendPackedRow({encoding, 0}, row, 0, packed);
        const std::vector<float> back = Decoded(packed, n);
        ASSERT_EQ(back.size(), row.size());
        for (int k = 0; k < n; ++k) {
          // The bound, plus float rounding of code × scale.
          EXPECT_LE(std::abs(back[k] - row[k]), bound * 1.0001f + 1e-9f)
              << EncodingName(encoding) << " n=" << n << " k=" << k;
        }
      }
      pb::PackedWeights half;
      AppendPackedRow({pb::ATTENTION_ENCODING_FLOAT16, 0}, row, 0, half);
      const std::vector<float> back = Decoded(half, n);
      for (int k = 0; k < n; ++k) {
        const float error = std::abs(back[k] - row[k]);
        if (row[k] >= std::ldexp(1.0f, -14)) {
          EXPECT_LE(error, row[k] * std::ldexp(1.0f, -11)) << k;
        } else {
          EXPECT_LE(error, std::ldexp(1.0f, -25)) << k;
        }
      }
      for (int top_k : {1, 3, 16}) {
        pb::PackedWeights packed;
        AppendPackedRow({pb::ATTENTION_ENCODING_TOP_K, top_k}, row, 5, packed);
        const int kept = std::min(top_k, n);
        ASSERT_EQ(packed.row_keys(0), kept);
        ASSERT_EQ(packed.top_keys_size(), kept);
        std::vector<char> is_kept(n, 0);
        float smallest_kept = 1;
        for (int i = 0; i < kept; ++i) {
          const int key = packed.top_keys(i) - 5;  // first_key 5.
          ASSERT_TRUE(key >= 0 && key < n);
          EXPECT_EQ(packed.top_weights(i), row[key]);  // Exact.
          is_kept[key] = 1;
          smallest_kept = std::min(smallest_kept, row[key]);
        }
        double rest = 0;
        for (int k = 0; k < n; ++k) {
          if (is_kept[k]) continue;
          rest += row[k];
          EXPECT_LE(row[k], smallest_kept);  // The largest were kept.
        }
        EXPECT_NEAR(packed.remainders(0), rest, 1e-6);
      }
    }
  }
}

TEST(AttentionEncodingTest, TopKTiesKeepTheLowerKey) {
  const std::vector<float> row = {0.25f, 0.25f, 0.25f, 0.25f};
  pb::PackedWeights packed;
  AppendPackedRow({pb::ATTENTION_ENCODING_TOP_K, 2}, row, 0, packed);
  EXPECT_THAT(packed.top_keys(), ::testing::ElementsAre(0, 1));
  EXPECT_FLOAT_EQ(packed.remainders(0), 0.5f);
}

TEST(AttentionEncodingTest, TheSpecRefusesWhatDoesNotFit) {
  EXPECT_THAT(MakeEncodingSpec(pb::ATTENTION_ENCODING_TOP_K, 0, "tap")
                  .status()
                  .message(),
              HasSubstr("tap.top_k: 0 is outside 1..1024"));
  EXPECT_FALSE(MakeEncodingSpec(pb::ATTENTION_ENCODING_TOP_K, 1025, "t").ok());
  EXPECT_THAT(MakeEncodingSpec(pb::ATTENTION_ENCODING_UINT8, 4, "tap")
                  .status()
                  .message(),
              HasSubstr("it belongs to top_k"));
  EXPECT_FALSE(
      MakeEncodingSpec(static_cast<pb::AttentionEncoding>(99), 0, "t").ok());
  EXPECT_FALSE(MakeEncodingSpec(pb::ATTENTION_ENCODING_UNSPECIFIED, 0, "t")
                   .value()
                   .compact());
}

// The debugger over the golden gpt2_learned model (3 layers, 4 heads, 128
// positions), its decoder on `threads` (every step split: the collector then
// sees heads from two threads at once; also under ThreadSanitizer).
std::unique_ptr<AttentionDebugger> MakeDebugger(
    DebugAttentionOptions options = {}, int threads = 1) {
  absl::StatusOr<Checkpoint> checkpoint =
      LoadCheckpoint(testing::GoldenDir("gpt2_learned"));
  EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
  DecoderOptions decoder;
  decoder.threads = threads;
  decoder.min_parallel_work = 0;
  return std::make_unique<AttentionDebugger>(
      options, std::make_unique<Decoder>(*std::move(checkpoint), decoder),
      nullptr);
}

pb::DebugAttentionRequest Prompt(int n, int salt = 0) {
  pb::DebugAttentionRequest request;
  for (int i = 0; i < n; ++i) {
    request.mutable_prompt()->mutable_token_ids()->add_ids(
        (i < 30 ? 3 + 11 * i : 3 + 11 * i + salt) % 97);
  }
  return request;
}

// A reply's maps, gathered: (layer, head) -> rows × cols floats (pieces put
// together; compact ones decoded with the client's decoder).
struct Gathered {
  std::map<std::pair<int, int>, std::vector<float>> maps;
  std::map<std::pair<int, int>, int> rows;
  std::vector<pb::AttentionSummary> summaries;
  pb::AttentionRollout rollout;
};

Gathered Gather(const std::vector<pb::DebugAttentionResponse>& reply,
                int cols) {
  Gathered out;
  for (const pb::DebugAttentionResponse& message : reply) {
    for (const pb::AttentionMap& piece : message.maps()) {
      std::vector<float>& map = out.maps[{piece.layer(), piece.head()}];
      if (piece.has_compact()) {
        const std::vector<float> rows = Decoded(piece.compact(), cols);
        map.insert(map.end(), rows.begin(), rows.end());
      } else {
        map.insert(map.end(), piece.weights().begin(), piece.weights().end());
      }
      out.rows[{piece.layer(), piece.head()}] += piece.rows();
    }
    out.summaries.insert(out.summaries.end(), message.summaries().begin(),
                         message.summaries().end());
    if (message.has_rollout()) out.rollout = message.rollout();
  }
  return out;
}

Gathered RunPass(AttentionDebugger& debugger,
                 const pb::DebugAttentionRequest& request, int cols) {
  absl::StatusOr<std::vector<pb::DebugAttentionResponse>> reply =
      debugger.Run(request, Ok);
  EXPECT_TRUE(reply.ok()) << reply.status();
  return reply.ok() ? Gather(*reply, cols) : Gathered();
}

constexpr int kN = 100, kLayers = 3, kHeads = 4;

TEST(AttentionViewsTest, APassInChunksAndAZoomGiveTheWholePassBitForBit) {
  std::unique_ptr<AttentionDebugger> whole = MakeDebugger();
  DebugAttentionOptions chunked_options;
  chunked_options.pass_chunk_tokens = 16;
  std::unique_ptr<AttentionDebugger> chunked = MakeDebugger(chunked_options);
  const Gathered want = RunPass(*whole, Prompt(kN), kN);
  ASSERT_EQ(want.maps.size(), static_cast<size_t>(kLayers * kHeads));
  EXPECT_EQ(RunPass(*chunked, Prompt(kN), kN).maps, want.maps);
  // A zoom into the same prompt's later queries reuses the cached keys.
  pb::DebugAttentionRequest zoom = Prompt(kN);
  zoom.mutable_queries()->set_begin(60);
  const Gathered zoomed = RunPass(*chunked, zoom, kN);
  for (const auto& [key, map] : want.maps) {
    const std::vector<float> rows(map.begin() + 60 * kN, map.end());
    EXPECT_EQ(zoomed.maps.at(key), rows);
  }
  // And a prompt that shares only its start is computed for what differs.
  const Gathered other_whole = RunPass(*whole, Prompt(kN, /*salt=*/5), kN);
  EXPECT_EQ(RunPass(*chunked, Prompt(kN, 5), kN).maps, other_whole.maps);
  EXPECT_NE(other_whole.maps, want.maps);
}

// A pass in chunks sends each chunk's rows of every map as soon as the chunk
// is computed: before the next chunk's forward pass (the check that follows
// each chunk counts them), in order, whole bands, and, pooled, every cell row
// once all its queries are done; gathered, the same maps as one pass.
TEST(AttentionViewsTest, EachChunksRowsGoOutBeforeTheNextChunkIsComputed) {
  DebugAttentionOptions options;
  options.pass_chunk_tokens = 16;
  std::unique_ptr<AttentionDebugger> chunked = MakeDebugger(options);
  std::unique_ptr<AttentionDebugger> whole = MakeDebugger();
  for (bool overview : {false, true}) {
    SCOPED_TRACE(overview ? "overview" : "whole maps");
    pb::DebugAttentionRequest request = Prompt(kN);
    // Cells of 15 queries: a chunk of 16 ends within a cell row.
    constexpr int kStep = 15;
    if (overview) {
      request.mutable_overview()->set_cells(7);
      request.mutable_overview()->set_pooling(pb::POOLING_MEAN);
    }
    const int step = overview ? kStep : 1, cols = overview ? 7 : kN;
    int checks = 0;
    auto check = [&checks] {
      ++checks;
      return absl::OkStatus();
    };
    std::vector<std::vector<pb::DebugAttentionResponse>> batches;
    std::vector<int> checks_at;
    ASSERT_TRUE(chunked
                    ->Run(request, check,
                          [&](std::vector<pb::DebugAttentionResponse> batch) {
                            batches.push_back(std::move(batch));
                            checks_at.push_back(checks);
                          })
                    .ok());
    // The tokens first, then a band per chunk that completes a row.
    ASSERT_GE(batches.size(), 2u);
    EXPECT_GT(batches[0][0].tokens_size(), 0);
    EXPECT_EQ(batches[0][0].maps_size(), 0);
    int rows_sent = 0;
    for (size_t b = 1; b < batches.size(); ++b) {
      // Two checks before the pass, then one after each chunk's forward.
      const int chunks_done = checks_at[b] - 2;
      const int final_rows = std::min(kN, 16 * chunks_done) == kN
                                 ? (kN + step - 1) / step
                                 : 16 * chunks_done / step;
      std::map<std::pair<int, int>, int> rows;
      for (const pb::DebugAttentionResponse& message : batches[b]) {
        for (const pb::AttentionMap& piece : message.maps()) {
          EXPECT_EQ(piece.first_query(),
                    (rows_sent + rows[{piece.layer(), piece.head()}]) * step);
          rows[{piece.layer(), piece.head()}] += piece.rows();
        }
      }
      ASSERT_EQ(rows.size(), static_cast<size_t>(kLayers * kHeads)) << b;
      for (const auto& [map, count] : rows) {
        EXPECT_EQ(rows_sent + count, final_rows) << "band " << b;
      }
      rows_sent = final_rows;
    }
    EXPECT_EQ(rows_sent, (kN + step - 1) / step);
    EXPECT_GE(batches.size(), overview ? 6u : 8u);  // Not one at the end.
    std::vector<pb::DebugAttentionResponse> all;
    for (auto& batch : batches) {
      for (auto& message : batch) all.push_back(std::move(message));
    }
    EXPECT_EQ(Gather(all, cols).maps, RunPass(*whole, request, cols).maps);
  }
}

TEST(AttentionViewsTest, RangesAreSlicesOfTheWholeMaps) {
  std::unique_ptr<AttentionDebugger> debugger = MakeDebugger();
  const Gathered whole = RunPass(*debugger, Prompt(kN), kN);
  pb::DebugAttentionRequest request = Prompt(kN);
  request.mutable_queries()->set_begin(40);
  request.mutable_queries()->set_end(70);
  request.mutable_keys()->set_begin(10);
  request.mutable_keys()->set_end(50);
  request.add_layers(2);
  request.add_heads(1);
  const Gathered ranged = RunPass(*debugger, request, 40);
  ASSERT_EQ(ranged.maps.size(), 1u);
  const std::vector<float>& got = ranged.maps.at({2, 1});
  ASSERT_EQ(got.size(), 30u * 40);
  for (int q = 0; q < 30; ++q) {
    for (int k = 0; k < 40; ++k) {
      EXPECT_EQ(got[q * 40 + k], whole.maps.at({2, 1})[(40 + q) * kN + 10 + k]);
    }
  }
  pb::DebugAttentionRequest empty = Prompt(kN);
  empty.mutable_keys()->set_begin(50);
  empty.mutable_keys()->set_end(50);
  EXPECT_THAT(debugger->Run(empty, Ok).status().message(),
              HasSubstr("keys: [50, 50) is not a non-empty range"));
}

TEST(AttentionViewsTest, OverviewsPoolTheWholeMaps) {
  std::unique_ptr<AttentionDebugger> debugger = MakeDebugger();
  const Gathered whole = RunPass(*debugger, Prompt(kN), kN);
  for (pb::Pooling pooling : {pb::POOLING_MAX, pb::POOLING_MEAN}) {
    pb::DebugAttentionRequest request = Prompt(kN);
    request.mutable_overview()->set_cells(7);
    request.mutable_overview()->set_pooling(pooling);
    const int step = (kN + 6) / 7, cells = (kN + step - 1) / step;
    const Gathered pooled = RunPass(*debugger, request, cells);
    for (const auto& [key, map] : whole.maps) {
      const std::vector<float>& got = pooled.maps.at(key);
      ASSERT_EQ(got.size(), static_cast<size_t>(cells * cells));
      for (int i = 0; i < cells; ++i) {
        for (int j = 0; j < cells; ++j) {
          double max = 0, sum = 0;
          int count = 0;
          for (int q = i * step; q < std::min(kN, (i + 1) * step); ++q) {
            for (int k = j * step; k < std::min(q + 1, (j + 1) * step); ++k) {
              max = std::max<double>(max, map[q * kN + k]);
              sum += map[q * kN + k];
              ++count;
            }
          }
          const double want =
              pooling == pb::POOLING_MAX ? max : (count ? sum / count : 0);
          EXPECT_NEAR(got[i * cells + j], want, 1e-6 * want + 1e-9)
              << key.first << "," << key.second << " cell " << i << "," << j;
        }
      }
    }
  }
}

TEST(AttentionViewsTest, CompactMapsDecodeWithinTheirBoundAndLeaveOutTheMask) {
  std::unique_ptr<AttentionDebugger> debugger = MakeDebugger();
  const Gathered whole = RunPass(*debugger, Prompt(kN), kN);
  pb::DebugAttentionRequest request = Prompt(kN);
  request.set_encoding(pb::ATTENTION_ENCODING_UINT8);
  absl::StatusOr<std::vector<pb::DebugAttentionResponse>> reply =
      debugger->Run(request, Ok);
  ASSERT_TRUE(reply.ok());
  for (const pb::DebugAttentionResponse& message : *reply) {
    for (const pb::AttentionMap& piece : message.maps()) {
      ASSERT_TRUE(piece.weights().empty());
      for (int r = 0; r < piece.rows(); ++r) {
        // Row q has the q + 1 keys it sees.
        EXPECT_EQ(piece.compact().row_keys(r), piece.first_query() + r + 1);
      }
    }
  }
  const Gathered compact = Gather(*reply, kN);
  for (const auto& [key, map] : whole.maps) {
    for (int q = 0; q < kN; ++q) {
      const float* want = map.data() + q * kN;
      const float max = *std::max_element(want, want + kN);
      for (int k = 0; k < kN; ++k) {
        EXPECT_LE(std::abs(compact.maps.at(key)[q * kN + k] - want[k]),
                  max / 510 * 1.0001f);
      }
    }
  }
}

TEST(AttentionViewsTest, SummariesAndTheRolloutAreThoseOfTheWholeMaps) {
  std::unique_ptr<AttentionDebugger> debugger = MakeDebugger();
  const Gathered whole = RunPass(*debugger, Prompt(kN), kN);
  pb::DebugAttentionRequest request = Prompt(kN);
  request.set_summary_only(true);
  const Gathered got = RunPass(*debugger, request, kN);
  EXPECT_TRUE(got.maps.empty());
  ASSERT_EQ(got.summaries.size(), static_cast<size_t>(kLayers * kHeads));
  for (const pb::AttentionSummary& summary : got.summaries) {
    const std::vector<float>& map =
        whole.maps.at({summary.layer(), summary.head()});
    double entropy = 0, sink = 0, distance = 0, max = 0;
    std::vector<double> profile(8);
    for (int q = 0; q < kN; ++q) {
      double row_max = 0;
      for (int k = 0; k <= q; ++k) {
        const double w = map[q * kN + k];
        if (w > 0) entropy -= w * std::log(w);
        distance += w * (q - k);
        row_max = std::max(row_max, w);
        const int d = q - k;
        const int bucket = d == 0 ? 0 : 1 + static_cast<int>(std::log2(d));
        profile[bucket] += w;
      }
      sink += map[q * kN];
      max += row_max;
    }
    EXPECT_NEAR(summary.entropy(), entropy / kN, 1e-4);
    EXPECT_NEAR(summary.sink(), sink / kN, 1e-5);
    EXPECT_NEAR(summary.mean_distance(), distance / kN, 1e-3);
    EXPECT_NEAR(summary.max_weight(), max / kN, 1e-5);
    ASSERT_EQ(summary.distance_profile_size(), 8);  // Distances up to 99.
    for (int b = 0; b < 8; ++b) {
      EXPECT_NEAR(summary.distance_profile(b), profile[b] / kN, 1e-5) << b;
    }
  }
  // R = Π (½ Ā_l + ½ I), rows renormalised, layer 0 first.
  std::vector<double> rollout(kN * kN, 0);
  for (int i = 0; i < kN; ++i) rollout[i * kN + i] = 1;
  for (int l = 0; l < kLayers; ++l) {
    std::vector<double> step(kN * kN, 0), next(kN * kN, 0);
    for (int h = 0; h < kHeads; ++h) {
      for (int i = 0; i < kN * kN; ++i) {
        step[i] += 0.5 * whole.maps.at({l, h})[i] / kHeads;
      }
    }
    for (int q = 0; q < kN; ++q) {
      step[q * kN + q] += 0.5;
      double sum = 0;
      for (int k = 0; k < kN; ++k) sum += step[q * kN + k];
      for (int k = 0; k < kN; ++k) step[q * kN + k] /= sum;
    }
    for (int q = 0; q < kN; ++q) {
      for (int j = 0; j < kN; ++j) {
        for (int k = 0; k < kN; ++k) {
          next[q * kN + k] += step[q * kN + j] * rollout[j * kN + k];
        }
      }
    }
    rollout = next;
  }
  ASSERT_EQ(got.rollout.weights_size(), kN * kN);
  for (int i = 0; i < kN * kN; ++i) {
    EXPECT_NEAR(got.rollout.weights(i), rollout[i], 1e-5) << i;
  }
}

TEST(AttentionViewsTest, TwoThreadsKeepWhatOneKeeps) {
  std::unique_ptr<AttentionDebugger> one = MakeDebugger({}, 1);
  std::unique_ptr<AttentionDebugger> two = MakeDebugger({}, 2);
  pb::DebugAttentionRequest request = Prompt(kN);
  request.set_summary(true);
  request.mutable_overview()->set_cells(9);
  request.mutable_overview()->set_pooling(pb::POOLING_MEAN);
  absl::StatusOr<std::vector<pb::DebugAttentionResponse>> a =
      one->Run(request, Ok);
  absl::StatusOr<std::vector<pb::DebugAttentionResponse>> b =
      two->Run(request, Ok);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), b->size());
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].SerializeAsString(), (*b)[i].SerializeAsString()) << i;
  }
}

TEST(AttentionViewsTest, WhatWouldNotFitIsRefusedBeforeThePass) {
  DebugAttentionOptions options;
  options.max_map_bytes = 20000;  // Under 3 × 4 × 100² floats.
  std::unique_ptr<AttentionDebugger> debugger = MakeDebugger(options);
  EXPECT_THAT(debugger->Run(Prompt(kN), Ok).status().message(),
              HasSubstr("or an overview"));
  pb::DebugAttentionRequest overview = Prompt(kN);
  overview.mutable_overview()->set_cells(16);
  EXPECT_TRUE(debugger->Run(overview, Ok).ok());
  overview.mutable_overview()->set_cells(2000);
  EXPECT_THAT(debugger->Run(overview, Ok).status().message(),
              HasSubstr("overview.cells: 2000 is outside 1..1024"));
}

}  // namespace
}  // namespace textgen
