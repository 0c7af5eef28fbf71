// Speculative decoding's second proposer (engine/speculation.h): a small
// model with the target's tokenizer, run ahead of each speculating sequence
// to guess its next tokens greedily.
//
// The draft keeps a KV slot per engine slot and remembers which tokens each
// holds. Before proposing for a sequence it keeps the longest common prefix
// of those tokens and the sequence's history (rejected guesses and a slot
// handed to another request fall away there) and feeds the rest in one
// chunk: its prompt on the first step, then the tokens the last step
// accepted. Then it picks its k guesses one by one, each fed back. All the
// step's sequences go through each of those passes together.
//
// Its guesses only decide how fast the target's tokens come, never which
// (engine/speculation.h), so the draft may be any model with the same
// vocabulary, in any dtype.
//
// Not thread-safe: the engine thread's.
#ifndef TEXTGEN_ENGINE_DRAFT_MODEL_H_
#define TEXTGEN_ENGINE_DRAFT_MODEL_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/decoder.h"
#include "model/kv_cache.h"
#include "model/text/tokenizer.h"

namespace textgen {

class DraftModel {
 public:
  // A draft for a target `target` whose KV cache has `target_cache`'s slots
  // and blocks: the draft's own cache gets as many of each (a sequence's
  // guesses stay within the positions the target reserved for it, so a
  // pool the target's size holds every running sequence). A sequence's
  // guesses stop at the first the draft gives less than `min_probability`
  // (llama.cpp's --draft-p-min; 0 guesses as many as allowed).
  // INVALID_ARGUMENT unless the two are decoder-only and have the same
  // vocabulary size (the server also checks that their tokenizers agree),
  // or for a min_probability outside [0, 1).
  static absl::StatusOr<std::unique_ptr<DraftModel>> Create(
      std::unique_ptr<Decoder> draft, const ModelConfig& target,
      const KvCacheOptions& target_cache, float min_probability = 0);

  // OK if `draft` reads and writes tokens as `target` does: both null, or
  // the same vocabulary with the same bytes for every id. Else
  // INVALID_ARGUMENT naming the first difference. (The server loads the two
  // models' tokenizers separately.)
  static absl::Status CheckTokenizers(const Tokenizer* target,
                                      const Tokenizer* draft);

  // One sequence's part of a Propose call.
  struct Want {
    int slot = 0;                     // The target's slot of the sequence.
    absl::Span<const int> history;    // Its prompt and generated tokens.
    int limit = 0;                    // Guesses wanted at most (> 0).
    std::vector<int>* out = nullptr;  // Receives 0 .. limit guesses.
  };
  // Guesses for every entry of `wants` (slots distinct). A sequence longer
  // than the draft's context gets none. On a forward error the step gets
  // no guesses (and the slots are forgotten), never a wrong token.
  void Propose(absl::Span<const Want> wants);

  // Forgets what `slot` holds (its sequence ended), giving its blocks back.
  void Release(int slot);

  const ModelConfig& config() const { return decoder_->config(); }
  const Decoder& decoder() const { return *decoder_; }

 private:
  DraftModel(std::unique_ptr<Decoder> draft, const KvCacheOptions& cache,
             float min_probability);
  // Drops every slot's contents after an error.
  void Forget();

  const float min_probability_;
  std::unique_ptr<Decoder> decoder_;
  KvCache cache_;
  std::vector<std::vector<int>> held_;  // Per slot: the tokens in its cache.
  // Propose's scratch: the sequences still guessing, in the order of the
  // pass's chunks.
  struct Guessing {
    const Want* want;
    int limit;  // Guesses it gets at most.
    int next;   // Its last guess, fed in the next pass.
  };
  std::vector<SequenceChunk> chunks_;
  std::vector<Guessing> active_;
  ForwardResult result_;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_DRAFT_MODEL_H_
