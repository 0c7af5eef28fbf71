// Speculative decoding: a cheap proposer guesses the next few tokens of a
// decoding sequence, and one forward pass of the model checks them all.
//
// The model reads the sequence's last sampled token and the k proposed ones
// as one chunk of k + 1 positions and returns k + 1 rows of logits. The
// sequence then samples from them in order, exactly as one-token steps
// would: row 0 gives the token after the last one; if it equals proposal 1,
// row 1 (which saw proposal 1 as its input) gives the next; and so on, until
// a sampled token differs from its proposal or the rows run out. Every
// token sampled is kept, so a step yields 1 .. k + 1 tokens, and the KV
// positions of the proposals after the first mismatch are rewound.
//
// The output is plain decoding's, token for token and bit for bit, because
//   - the kernels are batch-invariant (model/kernels/kernels.h): a row's
//     logits do not depend on how many positions its chunk or batch holds,
//     so row i of the chunk equals the logits of a one-token step after the
//     same tokens;
//   - the sampler draws once per token it picks (none for greedy), in order,
//     so the draw for the p-th generated token is the p-th draw of the
//     sequence's own generator, seeded by (seed, completion): the same
//     however many steps it took to get there. No rejection sampling.
// What a proposer guesses changes only how fast the tokens come.
//
// Proposers: prompt lookup (ProposeByLookup below: continue the latest
// earlier occurrence of the sequence's last tokens, as llama.cpp's lookup
// decoding and vLLM's `ngram` do) and a draft model (engine/draft_model.h).
#ifndef TEXTGEN_ENGINE_SPECULATION_H_
#define TEXTGEN_ENGINE_SPECULATION_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace textgen {

enum class SpeculativeMode {
  kOff,
  kNgram,  // Prompt lookup.
  kDraft,  // A smaller model with the same tokenizer (engine/draft_model.h).
};

// "off", "ngram" or "draft"; anything else is INVALID_ARGUMENT.
absl::StatusOr<SpeculativeMode> ParseSpeculativeMode(absl::string_view name);
const char* SpeculativeModeName(SpeculativeMode mode);

struct SpeculationOptions {
  SpeculativeMode mode = SpeculativeMode::kOff;
  // Tokens proposed per step for one sequence, at most (k); 0 means the
  // mode's default (Tokens()). A request may ask for fewer
  // (GenerationRequest::speculative_tokens).
  int tokens = 0;
  // Prompt lookup: the longest and the shortest run of last tokens looked
  // up, longest first.
  int ngram_max = 3;
  int ngram_min = 1;
  // Proposals are made only while at most this many sequences decode in a
  // step: a larger batch is already compute-bound, and verifying guesses
  // would take time from the other sequences' tokens.
  int max_batch = 4;
  // Draft model: a sequence's guesses stop at the first the draft itself
  // gives less than this probability (llama.cpp's --draft-p-min): an unsure
  // guess is likely wrong, and verifying it and those after it costs rows.
  // 0 (off) by default: on the shipped model and its draft, 0.2 .. 0.85
  // raised the acceptance rate but made fewer tokens per step, and no value
  // was faster (bench/README.md "Speculative decoding").
  float draft_min_probability = 0.0f;

  // INVALID_ARGUMENT naming the first option out of range.
  absl::Status Validate() const;

  // k: `tokens`, or the mode's default. Prompt lookup's guesses cost
  // nothing to make, so it may guess further (5); each of a draft model's
  // guesses costs a pass of the draft, and on the shipped model and its
  // draft 3 was the fastest of 2 .. 5 (bench/README.md "Speculative
  // decoding"). 0 when off.
  int Tokens() const {
    if (mode == SpeculativeMode::kOff) return 0;
    if (tokens > 0) return tokens;
    return mode == SpeculativeMode::kDraft ? 3 : 5;
  }
};

// Prompt lookup: finds the latest earlier occurrence in `history` of its
// last n tokens, for n from `ngram_max` down to `ngram_min`, and writes to
// `out` the `k` tokens that followed it, copied as LZ77 copies (past the end
// of the history the copy continues from its own start, so a loop goes on
// looping). Empty when nothing matches. Pure: the same history, the same
// proposal.
void ProposeByLookup(absl::Span<const int> history, int k, int ngram_min,
                     int ngram_max, std::vector<int>& out);

// When a sequence proposes, and how many: the adaptive rule that keeps a
// sequence whose guesses keep failing from paying for them. Each sequence
// has its own.
//   - The length starts at the maximum. After a step that accepted a of k
//     proposals it becomes a + 1 when a < k (the guesses run out about
//     there) and grows by 2 when all were accepted.
//   - After `kMissesBeforePause` proposals in a row with none accepted, the
//     sequence stops proposing for a pause of steps that doubles with each
//     further miss (up to kMaxPause) and resets when a proposal is accepted.
// Not thread-safe (the engine thread's, like its Sequence).
class DraftLength {
 public:
  static constexpr int kMissesBeforePause = 2;
  static constexpr int kMaxPause = 64;

  explicit DraftLength(int max) : max_(max), length_(max) {}

  // Tokens to propose this step (0: skip this step). Counts the step.
  int Next();
  // Records what verifying `proposed` (> 0) tokens accepted.
  void Record(int proposed, int accepted);

 private:
  int max_;
  int length_;
  int misses_ = 0;  // Proposals in a row with nothing accepted.
  int pause_ = 0;   // Steps left without proposing.
  int next_pause_ = 1;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_SPECULATION_H_
