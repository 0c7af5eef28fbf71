#include "model/generate.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model/kv_cache.h"

namespace textgen {

absl::StatusOr<GenerateEnd> Generate(
    Decoder& decoder, absl::Span<const int> prompt,
    const GenerateOptions& options,
    absl::FunctionRef<void(const GeneratedToken&)> on_token) {
  const int context = decoder.config().context_length;
  if (prompt.empty()) return absl::InvalidArgumentError("the prompt is empty");
  if (static_cast<int>(prompt.size()) > context) {
    return absl::InvalidArgumentError(
        absl::StrCat("the prompt is ", prompt.size(),
                     " tokens; the model's context holds ", context));
  }
  const bool encoder_decoder = decoder.config().is_encoder_decoder();
  if (encoder_decoder && options.source.empty()) {
    return absl::FailedPreconditionError(
        "this model is encoder-decoder: it needs a source");
  }
  if (!encoder_decoder && !options.source.empty()) {
    return absl::InvalidArgumentError(
        "a source was given, but this model is decoder-only");
  }
  if (options.max_new_tokens <= 0) return GenerateEnd::kLength;

  KvCache cache(decoder.config(), /*num_slots=*/1, options.kv_dtype);
  if (encoder_decoder) {
    const SourceChunk source{0, options.source};
    EncodeResult encoded;
    TEXTGEN_RETURN_IF_ERROR(decoder.Encode({&source, 1}, cache, {}, encoded));
  }
  Sampler sampler(options.sampling, options.seed);
  ForwardOptions forward;
  forward.capture_attention = options.capture_attention;
  ForwardResult result;
  // The tokens so far (the repetition penalty reads them) and those to feed.
  std::vector<int> history(prompt.begin(), prompt.end());
  std::vector<int> chunk = history;
  for (int index = 0;; ++index) {
    const SequenceChunk sequence{0, chunk};
    TEXTGEN_RETURN_IF_ERROR(
        decoder.Forward({&sequence, 1}, cache, forward, result));
    GeneratedToken token;
    token.logits =
        absl::MakeConstSpan(result.logits.row(0).data(), result.logits.cols());
    token.id = sampler.Sample(token.logits, history);
    token.index = index;
    if (options.capture_attention) {
      token.attention = &result.attention[0];
      if (encoder_decoder) token.cross_attention = &result.cross_attention[0];
    }
    token.is_end_token = options.is_end_token && options.is_end_token(token.id);
    history.push_back(token.id);
    on_token(token);
    if (token.is_end_token) return GenerateEnd::kEndToken;
    if (index + 1 == options.max_new_tokens) return GenerateEnd::kLength;
    if (static_cast<int>(history.size()) >= context) {
      return GenerateEnd::kContextFull;
    }
    chunk.assign(1, token.id);
  }
}

}  // namespace textgen
