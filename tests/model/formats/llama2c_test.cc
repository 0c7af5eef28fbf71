// llama2.c checkpoints (model/formats/llama2c_checkpoint.h): a random model
// written here in llama2.c's .bin format must give, through
// LoadLlama2cCheckpoint and the shared Decoder, the logits of a direct
// transcription of llama2.c's own forward pass (run.c: interleaved RoPE, GQA by
// h / kv_mul, RMSNorm, SwiGLU); damaged files are errors that name the file and
// the problem.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "model/decoder.h"
#include "model/formats/llama2c_checkpoint.h"
#include "model/formats/model_loader.h"
#include "model/kv_cache.h"
#include "tests/testing/test_util.h"

namespace textgen {
namespace {

using ::testing::HasSubstr;

struct Dims {
  int dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
  bool shared = true;
};

// A llama2.c model held as its tensors, in run.c's names.
struct Llama2c {
  Dims d;
  std::vector<float> tok_emb, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3,
      rms_final, freq_real, freq_imag, wcls;

  int head_size() const { return d.dim / d.n_heads; }
  int kv_dim() const { return d.n_kv_heads * head_size(); }
  const std::vector<float>& classifier() const {
    return d.shared ? tok_emb : wcls;
  }

  static Llama2c Random(const Dims& d, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    auto fill = [&](size_t n, float scale, float offset = 0.0f) {
      std::vector<float> v(n);
      for (float& x : v) x = offset + scale * normal(rng);
      return v;
    };
    Llama2c m;
    m.d = d;
    const size_t C = d.dim, F = d.hidden_dim, L = d.n_layers, V = d.vocab_size;
    const size_t KV = m.kv_dim(), D = m.head_size();
    const float s = 1.0f / std::sqrt(static_cast<float>(C));
    m.tok_emb = fill(V * C, 1.0f);
    m.rms_att = fill(L * C, 0.1f, 1.0f);
    m.wq = fill(L * C * C, s);
    m.wk = fill(L * KV * C, s);
    m.wv = fill(L * KV * C, s);
    m.wo = fill(L * C * C, s);
    m.rms_ffn = fill(L * C, 0.1f, 1.0f);
    m.w1 = fill(L * F * C, s);
    m.w2 = fill(L * C * F, 1.0f / std::sqrt(static_cast<float>(F)));
    m.w3 = fill(L * F * C, s);
    m.rms_final = fill(C, 0.1f, 1.0f);
    for (int p = 0; p < d.seq_len; ++p) {
      for (size_t i = 0; i < D / 2; ++i) {
        const double freq = std::pow(10000.0, -2.0 * i / D);
        m.freq_real.push_back(static_cast<float>(std::cos(p * freq)));
        m.freq_imag.push_back(static_cast<float>(std::sin(p * freq)));
      }
    }
    if (!d.shared) m.wcls = fill(V * C, 1.0f);
    return m;
  }

  std::string Serialize() const {
    const int32_t header[7] = {
        d.dim,     d.hidden_dim, d.n_layers,
        d.n_heads, d.n_kv_heads, d.shared ? d.vocab_size : -d.vocab_size,
        d.seq_len};
    std::string out(reinterpret_cast<const char*>(header), sizeof(header));
    for (const auto* t : {&tok_emb, &rms_att, &wq, &wk, &wv, &wo, &rms_ffn, &w1,
                          &w2, &w3, &rms_final, &freq_real, &freq_imag}) {
      out.append(reinterpret_cast<const char*>(t->data()), t->size() * 4);
    }
    if (!d.shared) {
      out.append(reinterpret_cast<const char*>(wcls.data()), wcls.size() * 4);
    }
    return out;
  }
};

// llama2.c's forward(), transcribed from run.c (in double, for a reference
// that rounding cannot move): one token at `pos`, keys and values cached.
class ReferenceLlama2c {
 public:
  explicit ReferenceLlama2c(const Llama2c& m)
      : m_(m),
        key_cache_(static_cast<size_t>(m.d.n_layers) * m.d.seq_len *
                   m.kv_dim()),
        value_cache_(key_cache_.size()) {}

  std::vector<double> Forward(int token, int pos) {
    const Dims& p = m_.d;
    const int C = p.dim, F = p.hidden_dim, D = m_.head_size();
    const int kv_dim = m_.kv_dim(), kv_mul = p.n_heads / p.n_kv_heads;
    std::vector<double> x(m_.tok_emb.begin() + token * C,
                          m_.tok_emb.begin() + (token + 1) * C);
    std::vector<double> xb(C), q(C), att(pos + 1), hb(F), hb2(F), xb2(C);
    for (int l = 0; l < p.n_layers; ++l) {
      RmsNorm(xb, x, &m_.rms_att[l * C]);
      double* k =
          &key_cache_[(static_cast<size_t>(l) * p.seq_len + pos) * kv_dim];
      double* v =
          &value_cache_[(static_cast<size_t>(l) * p.seq_len + pos) * kv_dim];
      MatVec(q.data(), xb, &m_.wq[static_cast<size_t>(l) * C * C], C, C);
      MatVec(k, xb, &m_.wk[static_cast<size_t>(l) * C * kv_dim], C, kv_dim);
      MatVec(v, xb, &m_.wv[static_cast<size_t>(l) * C * kv_dim], C, kv_dim);
      // RoPE: rotate each interleaved pair (i, i+1).
      for (int i = 0; i < C; i += 2) {
        const int head_dim = i % D;
        const double freq = 1.0 / std::pow(10000.0, head_dim / double(D));
        const double fcr = std::cos(pos * freq), fci = std::sin(pos * freq);
        for (int which = 0; which < (i < kv_dim ? 2 : 1); ++which) {
          double* vec = which == 0 ? q.data() : k;
          const double v0 = vec[i], v1 = vec[i + 1];
          vec[i] = v0 * fcr - v1 * fci;
          vec[i + 1] = v0 * fci + v1 * fcr;
        }
      }
      for (int h = 0; h < p.n_heads; ++h) {
        const double* qh = &q[h * D];
        double max = -INFINITY;
        for (int t = 0; t <= pos; ++t) {
          const double* kt =
              &key_cache_[(static_cast<size_t>(l) * p.seq_len + t) * kv_dim +
                          (h / kv_mul) * D];
          double score = 0;
          for (int i = 0; i < D; ++i) score += qh[i] * kt[i];
          att[t] = score / std::sqrt(double(D));
          max = std::max(max, att[t]);
        }
        double sum = 0;
        for (int t = 0; t <= pos; ++t) sum += (att[t] = std::exp(att[t] - max));
        double* out = &xb[h * D];
        std::fill(out, out + D, 0.0);
        for (int t = 0; t <= pos; ++t) {
          const double* vt =
              &value_cache_[(static_cast<size_t>(l) * p.seq_len + t) * kv_dim +
                            (h / kv_mul) * D];
          for (int i = 0; i < D; ++i) out[i] += att[t] / sum * vt[i];
        }
      }
      MatVec(xb2.data(), xb, &m_.wo[static_cast<size_t>(l) * C * C], C, C);
      for (int i = 0; i < C; ++i) x[i] += xb2[i];
      RmsNorm(xb, x, &m_.rms_ffn[l * C]);
      MatVec(hb.data(), xb, &m_.w1[static_cast<size_t>(l) * C * F], C, F);
      MatVec(hb2.data(), xb, &m_.w3[static_cast<size_t>(l) * C * F], C, F);
      for (int i = 0; i < F; ++i)
        hb[i] = hb[i] / (1 + std::exp(-hb[i])) * hb2[i];
      std::vector<double> ff(C);
      MatVec(ff.data(), hb, &m_.w2[static_cast<size_t>(l) * F * C], F, C);
      for (int i = 0; i < C; ++i) x[i] += ff[i];
    }
    RmsNorm(xb, x, m_.rms_final.data());
    std::vector<double> logits(p.vocab_size);
    MatVec(logits.data(), xb, m_.classifier().data(), C, p.vocab_size);
    return logits;
  }

 private:
  static void RmsNorm(std::vector<double>& out, const std::vector<double>& x,
                      const float* weight) {
    double ss = 0;
    for (double v : x) ss += v * v;
    ss = 1.0 / std::sqrt(ss / x.size() + 1e-5);
    for (size_t i = 0; i < x.size(); ++i) out[i] = weight[i] * ss * x[i];
  }
  // out[d] = Σ_n W[d, n] x[n]; W is (out, in) row-major, like nn.Linear.
  static void MatVec(double* out, const std::vector<double>& x, const float* w,
                     int n, int d) {
    for (int i = 0; i < d; ++i) {
      double s = 0;
      for (int j = 0; j < n; ++j) s += w[static_cast<size_t>(i) * n + j] * x[j];
      out[i] = s;
    }
  }

  const Llama2c& m_;
  std::vector<double> key_cache_, value_cache_;
};

// Max |Δ| between the decoder's logits for `tokens` (one pass) and the
// reference's, token by token.
double MaxLogitDifference(const Llama2c& model, Decoder& decoder,
                          const std::vector<int>& tokens) {
  const Activations logits = testing::AllTokenLogits(decoder, tokens);
  ReferenceLlama2c reference(model);
  double max_diff = 0;
  for (size_t t = 0; t < tokens.size(); ++t) {
    const std::vector<double> expected =
        reference.Forward(tokens[t], static_cast<int>(t));
    for (size_t v = 0; v < expected.size(); ++v) {
      max_diff = std::max(max_diff, std::abs(expected[v] - logits(t, v)));
    }
  }
  return max_diff;
}

// Names the shape in test logs (instead of gtest's bytes dump).
void PrintTo(const Dims& d, std::ostream* os) {
  *os << "dim " << d.dim << ", " << d.n_heads << "/" << d.n_kv_heads
      << " heads, " << (d.shared ? "tied" : "separate") << " classifier";
}

class Llama2cTest : public ::testing::TestWithParam<Dims> {};

TEST_P(Llama2cTest, DecoderMatchesLlama2csForwardPass) {
  const Llama2c model = Llama2c::Random(GetParam(), 123);
  const std::string bytes = model.Serialize();
  Llama2cHeader header = *ParseLlama2cHeader(bytes, "m.bin");
  ASSERT_EQ(header.ExpectedFileBytes(), bytes.size());
  auto checkpoint = Llama2cCheckpointFromBytes(bytes, "m.bin");
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  const ModelConfig& c = checkpoint->config;
  EXPECT_EQ(c.family, Family::kLlama);
  EXPECT_EQ(c.positions, PositionKind::kRotary);
  EXPECT_EQ(c.norm, NormKind::kRmsNorm);
  EXPECT_EQ(c.feed_forward, FeedForwardKind::kSwiGlu);
  EXPECT_EQ(c.norm_eps, 1e-5f);
  EXPECT_EQ(c.context_length, GetParam().seq_len);
  EXPECT_EQ(c.tied_lm_head, GetParam().shared);
  EXPECT_EQ(c.n_kv_heads, GetParam().n_kv_heads);

  Decoder decoder(*std::move(checkpoint));
  std::mt19937 rng(5);
  std::vector<int> tokens(GetParam().seq_len);
  for (int& t : tokens) t = rng() % GetParam().vocab_size;
  const double diff = MaxLogitDifference(model, decoder, tokens);
  std::printf(
      "[llama2c] dim %d heads %d/%d %s: max|Δ logits| vs run.c = %.3g\n",
      GetParam().dim, GetParam().n_heads, GetParam().n_kv_heads,
      GetParam().shared ? "tied" : "separate", diff);
  EXPECT_LE(diff, 1e-4);
}

std::string ShapeName(const ::testing::TestParamInfo<Dims>& info) {
  const Dims& d = info.param;
  return "dim" + std::to_string(d.dim) + "_heads" + std::to_string(d.n_heads) +
         "_kv" + std::to_string(d.n_kv_heads) +
         (d.shared ? "_tied" : "_separate");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Llama2cTest,
    ::testing::Values(
        // GQA (2 query heads per KV head), tied classifier: stories260K's
        // shape.
        Dims{32, 40, 2, 8, 4, 50, 24, true},
        // Multi-head, separate classifier (negative vocab_size in the header).
        Dims{24, 36, 3, 3, 3, 37, 20, false},
        // Multi-query: one KV head.
        Dims{16, 20, 1, 4, 1, 11, 16, true}),
    ShapeName);

class Llama2cErrorsTest : public ::testing::Test {
 protected:
  std::string Error(const std::string& bytes) {
    auto c = Llama2cCheckpointFromBytes(bytes, "model.bin");
    EXPECT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(c.status().message());
  }
  static std::string WithHeader(std::string bytes,
                                const std::vector<int32_t>& header) {
    std::memcpy(bytes.data(), header.data(), header.size() * 4);
    return bytes;
  }

  const Llama2c model_ = Llama2c::Random({16, 20, 1, 4, 2, 11, 8}, 9);
  const std::string good_ = model_.Serialize();
};

TEST_F(Llama2cErrorsTest, SizeMustMatchTheHeaderExactly) {
  EXPECT_THAT(Error(good_.substr(0, good_.size() - 4)),
              HasSubstr("model.bin: llama2.c checkpoint is " +
                        std::to_string(good_.size() - 4) +
                        " bytes, but its header (dim 16, hidden_dim 20, "
                        "n_layers 1, n_heads 4, n_kv_heads 2, vocab_size 11, "
                        "seq_len 8) calls for exactly " +
                        std::to_string(good_.size()) + " bytes (truncated?)"));
  EXPECT_THAT(Error(good_ + "xxxx"), HasSubstr("(trailing data?)"));
  // A classifier claimed but not present: the size tells.
  EXPECT_THAT(Error(WithHeader(good_, {16, 20, 1, 4, 2, -11, 8})),
              HasSubstr("vocab_size -11, seq_len 8) calls for exactly"));
  EXPECT_THAT(Error("short"), HasSubstr("model.bin: not a llama2.c "
                                        "checkpoint: 5 bytes is too short"));
}

TEST_F(Llama2cErrorsTest, DimensionsMustBePositiveAndConsistent) {
  EXPECT_THAT(Error(WithHeader(good_, {0, 20, 1, 4, 2, 11, 8})),
              HasSubstr("model.bin: not a llama2.c checkpoint: header dim = 0 "
                        "is out of range"));
  EXPECT_THAT(Error(WithHeader(good_, {16, 20, -1, 4, 2, 11, 8})),
              HasSubstr("header n_layers = -1 is out of range"));
  EXPECT_THAT(Error(WithHeader(good_, {16, 20, 1, 4, 2, 11, 1 << 30})),
              HasSubstr("header seq_len = 1073741824 is out of range"));
  EXPECT_THAT(Error(WithHeader(good_, {16, 20, 1, 5, 5, 11, 8})),
              HasSubstr("header dim 16 is not divisible by n_heads 5"));
  EXPECT_THAT(Error(WithHeader(good_, {16, 20, 1, 4, 3, 11, 8})),
              HasSubstr("n_kv_heads 3 must divide n_heads 4"));
  EXPECT_THAT(Error(WithHeader(good_, {12, 20, 1, 4, 2, 11, 8})),
              HasSubstr("head size 3 (dim / n_heads) must be even"));
  EXPECT_THAT(Error(WithHeader(good_, {16, 20, 1, 16, 16, 11, 8})),
              HasSubstr("head size 1"));
}

TEST_F(Llama2cErrorsTest, NewerExportVersionsAreRecognized) {
  std::string v1(256, '\0');
  const uint32_t magic = 0x616b3432;
  const int32_t version = 1;
  std::memcpy(v1.data(), &magic, 4);
  std::memcpy(v1.data() + 4, &version, 4);
  EXPECT_THAT(Error(v1), HasSubstr("model.bin: llama2.c export version 1 "
                                   "(magic \"ak42\") is not supported"));
}

TEST(LoadModelTest, FindsTheTokenizerBesideALlama2cCheckpoint) {
  namespace fs = std::filesystem;
  const fs::path dir = testing::FreshTempDir("llama2c_load_model");
  const Llama2c model = Llama2c::Random({16, 20, 1, 4, 2, 11, 8}, 3);
  testing::WriteFile((dir / "m.bin").string(), model.Serialize());

  // No tokenizer beside it: the model still loads, for token ids.
  auto loaded = LoadModel((dir / "m.bin").string());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->tokenizer, nullptr);

  // tok<vocab>.bin (llama2.c's naming) is found; 11 tokens as the model has.
  auto tokenizer_bin = [](int n) {
    std::string out(4, '\0');
    const int32_t max_len = 8;
    std::memcpy(out.data(), &max_len, 4);
    for (int i = 0; i < n; ++i) {
      const std::string piece = i == 0 ? "<unk>" : std::string(1, 'a' + i);
      const float score = -i;
      const int32_t len = static_cast<int32_t>(piece.size());
      out.append(reinterpret_cast<const char*>(&score), 4);
      out.append(reinterpret_cast<const char*>(&len), 4);
      out += piece;
    }
    return out;
  };
  testing::WriteFile((dir / "tok11.bin").string(), tokenizer_bin(11));
  loaded = LoadModel((dir / "m.bin").string());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_NE(loaded->tokenizer, nullptr);
  EXPECT_EQ(loaded->tokenizer->vocab_size(), 11);
  EXPECT_EQ(loaded->tokenizer_path, (dir / "tok11.bin").string());

  // An explicit tokenizer of another size is refused, naming it.
  testing::WriteFile((dir / "other.bin").string(), tokenizer_bin(12));
  auto mismatched =
      LoadModel((dir / "m.bin").string(), (dir / "other.bin").string());
  EXPECT_THAT(mismatched.status().message(),
              HasSubstr("other.bin: has 12 tokens but the model's vocabulary "
                        "has 11"));
  EXPECT_EQ(LoadModel((dir / "none").string()).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace textgen
