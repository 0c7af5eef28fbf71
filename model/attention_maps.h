// Attention probabilities as the model computes them, for pictures and
// tests: which attention a map shows, and the [layer][head][query][key]
// layout of a sequence's maps.
#ifndef TEXTGEN_MODEL_ATTENTION_MAPS_H_
#define TEXTGEN_MODEL_ATTENTION_MAPS_H_

#include <cstddef>
#include <vector>

namespace textgen {

// Which attention a map shows.
enum class AttentionKind {
  kDecoderSelf,  // Causal self-attention of the (decoder's) tokens.
  kEncoderSelf,  // The encoder's, over the source: every key visible.
  kCross,        // Decoder queries over the source's positions.
};

// "decoder_self", "encoder_self" or "cross".
const char* AttentionKindName(AttentionKind kind);

// Attention probabilities (after softmax) of one sequence's new tokens, laid
// out [layer][head][query][key] row-major, as BertViz and TransformerLens use.
// kDecoderSelf: query q is the token at position first_position + q; keys are
// positions 0 .. n_keys - 1; entries above the causal diagonal are exactly 0.
// kEncoderSelf: queries and keys are the source's positions. kCross: queries
// as kDecoderSelf, keys the source's positions (n_keys = its length).
struct AttentionMaps {
  AttentionKind kind = AttentionKind::kDecoderSelf;
  int n_layers = 0;
  int n_heads = 0;
  int n_queries = 0;
  int n_keys = 0;
  int first_position = 0;
  std::vector<float> weights;

  // The n_keys weights of one query; a head's queries follow one another, so
  // row(layer, head, 0) starts its whole [n_queries, n_keys] map.
  const float* row(int layer, int head, int query) const {
    return weights.data() + offset(layer, head, query);
  }
  float* row(int layer, int head, int query) {
    return weights.data() + offset(layer, head, query);
  }
  float at(int layer, int head, int query, int key) const {
    return row(layer, head, query)[key];
  }

 private:
  size_t offset(int layer, int head, int query) const {
    return ((static_cast<size_t>(layer) * n_heads + head) * n_queries + query) *
           n_keys;
  }
};

// Receives a pass's causal self-attention probabilities as they are computed
// (ForwardOptions::attention_sink), so that a caller can keep what it needs
// of a pass too long to hold whole: 24 layers × 14 heads over 4,096 tokens are
// 5.6 G weights, while a pooled overview of them is a few MB.
class AttentionSink {
 public:
  virtual ~AttentionSink() = default;

  // The rows of `slot`'s map of (layer, head) for the query positions
  // first_query .. first_query + n_queries - 1: query q's weights over keys
  // 0 .. first_query + q (the keys it sees; all later ones are 0 and not
  // written: n_keys, the last query's count, bounds the row) at weights +
  // q * stride. Called from the pass's worker threads, for several heads at
  // once; each (slot, layer, head) once per pass, a layer's calls after the
  // layer before's. `weights` is valid only during the call. `entropies`:
  // the rows' entropies (nats), entropies[q] for query q, when
  // wants_entropy() says so, else null.
  virtual void Rows(int slot, int layer, int head, int first_query,
                    int n_queries, int n_keys, const float* weights, int stride,
                    const float* entropies) = 0;
  // Whether Rows should be given each row's entropy, which the softmax
  // computes nearly for free (kernels::Softmax) where a pass over the
  // weights would need a logarithm each.
  virtual bool wants_entropy() const { return false; }
};

}  // namespace textgen

#endif  // TEXTGEN_MODEL_ATTENTION_MAPS_H_
