#include "model/text/decoders.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "base/status_macros.h"
#include "base/utf8.h"
#include "model/text/gpt2_bpe_tokenizer.h"
#include "model/text/normalizers.h"

namespace textgen {
namespace {

class ByteLevelDecoder : public TokenDecoder {
 public:
  absl::Status Decode(std::string& token, bool /*first*/) const override {
    // A token with a character outside GPT-2's table stays as it is.
    std::string bytes;
    for (size_t pos = 0; pos < token.size();) {
      const int b = Gpt2UnicodeToByte(NextCodePoint(token, pos));
      if (b < 0) return absl::OkStatus();
      bytes += static_cast<char>(b);
    }
    token = std::move(bytes);
    return absl::OkStatus();
  }
};

// "<0xAB>" -> 0xAB, else -1 (the library's ByteFallback test).
int ByteOfFallbackToken(std::string_view s) {
  if (s.size() != 6 || s.substr(0, 3) != "<0x" || s[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(s[3]), lo = hex(s[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

class ByteFallbackDecoder : public TokenDecoder {
 public:
  absl::Status Decode(std::string& token, bool /*first*/) const override {
    if (const int b = ByteOfFallbackToken(token); b >= 0) {
      token = std::string(1, static_cast<char>(b));
    }
    return absl::OkStatus();
  }
};

// Fuse itself does nothing token by token; what it changes is how a Strip
// after it acts (see StripDecoder).
class FuseDecoder : public TokenDecoder {
 public:
  absl::Status Decode(std::string& /*token*/, bool /*first*/) const override {
    return absl::OkStatus();
  }
};

class StripDecoder : public TokenDecoder {
 public:
  // `after_fuse`: a Fuse came before, so this Strip sees the whole text: its
  // start is the first token's, and its end is unknown yet (stop is 0).
  StripDecoder(const TokenDecoderSpec& spec, bool after_fuse)
      : content_(spec.content),
        start_(spec.start),
        stop_(spec.stop),
        after_fuse_(after_fuse) {}

  absl::Status Decode(std::string& token, bool first) const override {
    if (after_fuse_ && !first) return absl::OkStatus();
    std::string_view view = token;
    for (int n = 0; n < start_ && view.substr(0, content_.size()) == content_ &&
                    !view.empty();
         ++n) {
      view.remove_prefix(content_.size());
    }
    for (int n = 0; !after_fuse_ && n < stop_ && !view.empty() &&
                    view.size() >= content_.size() &&
                    view.substr(view.size() - content_.size()) == content_;
         ++n) {
      view.remove_suffix(content_.size());
    }
    token = std::string(view);
    return absl::OkStatus();
  }

 private:
  std::string content_;
  int start_;
  int stop_;
  bool after_fuse_;
};

class ReplaceDecoder : public TokenDecoder {
 public:
  explicit ReplaceDecoder(Replace replace) : replace_(std::move(replace)) {}
  absl::Status Decode(std::string& token, bool /*first*/) const override {
    return replace_.Apply(token);
  }

 private:
  Replace replace_;
};

class MetaspaceDecoder : public TokenDecoder {
 public:
  explicit MetaspaceDecoder(const TokenDecoderSpec& spec)
      : replacement_(spec.replacement), prepend_scheme_(spec.prepend_scheme) {}

  absl::Status Decode(std::string& token, bool first) const override {
    // The library drops every replacement character of the first token (not
    // only a leading one) unless nothing was prepended.
    const bool drop = first && prepend_scheme_ != PrependScheme::kNever;
    token = absl::StrReplaceAll(token, {{replacement_, drop ? "" : " "}});
    return absl::OkStatus();
  }

 private:
  std::string replacement_;
  PrependScheme prepend_scheme_;
};

class SequenceDecoder : public TokenDecoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<TokenDecoder>> steps)
      : steps_(std::move(steps)) {}
  absl::Status Decode(std::string& token, bool first) const override {
    for (const auto& step : steps_) {
      TEXTGEN_RETURN_IF_ERROR(step->Decode(token, first));
    }
    return absl::OkStatus();
  }

 private:
  std::vector<std::unique_ptr<TokenDecoder>> steps_;
};

const char* DecoderName(TokenDecoderSpec::Kind kind) {
  switch (kind) {
    case TokenDecoderSpec::Kind::kByteLevel:
      return "ByteLevel";
    case TokenDecoderSpec::Kind::kByteFallback:
      return "ByteFallback";
    case TokenDecoderSpec::Kind::kFuse:
      return "Fuse";
    case TokenDecoderSpec::Kind::kStrip:
      return "Strip";
    case TokenDecoderSpec::Kind::kReplace:
      return "Replace";
    case TokenDecoderSpec::Kind::kMetaspace:
      return "Metaspace";
  }
  return "?";
}

size_t CodePointCount(std::string_view s) {
  return std::count_if(s.begin(), s.end(),
                       [](char c) { return !IsUtf8ContinuationByte(c); });
}

// Whether `spec` decodes the same token by token as on the whole text, which
// is what it sees after a Fuse (see the top of the header).
bool WorksAfterFuse(const TokenDecoderSpec& spec) {
  switch (spec.kind) {
    case TokenDecoderSpec::Kind::kFuse:
    case TokenDecoderSpec::Kind::kByteLevel:
      return true;
    case TokenDecoderSpec::Kind::kReplace:
      return !spec.pattern_is_regex && CodePointCount(spec.pattern) == 1;
    case TokenDecoderSpec::Kind::kStrip:
      return spec.stop == 0;
    default:
      return false;
  }
}

absl::StatusOr<std::unique_ptr<TokenDecoder>> CreateStep(
    const TokenDecoderSpec& spec, bool after_fuse, const std::string& source) {
  auto error = [&source](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", parts...));
  };
  std::optional<Replace> replace;
  if (spec.kind == TokenDecoderSpec::Kind::kReplace) {
    TEXTGEN_ASSIGN_OR_RETURN(
        replace,
        Replace::Create(spec.pattern, spec.pattern_is_regex, spec.content,
                        absl::StrCat(source, ": decoder Replace")));
  }
  if (after_fuse && !WorksAfterFuse(spec)) {
    return error("decoder \"", DecoderName(spec.kind),
                 "\" after \"Fuse\" is not supported");
  }
  switch (spec.kind) {
    case TokenDecoderSpec::Kind::kByteLevel:
      return std::make_unique<ByteLevelDecoder>();
    case TokenDecoderSpec::Kind::kByteFallback:
      return std::make_unique<ByteFallbackDecoder>();
    case TokenDecoderSpec::Kind::kFuse:
      return std::make_unique<FuseDecoder>();
    case TokenDecoderSpec::Kind::kStrip:
      if (spec.content.empty()) return error("decoder Strip has no content");
      return std::make_unique<StripDecoder>(spec, after_fuse);
    case TokenDecoderSpec::Kind::kReplace:
      return std::make_unique<ReplaceDecoder>(*std::move(replace));
    case TokenDecoderSpec::Kind::kMetaspace:
      return std::make_unique<MetaspaceDecoder>(spec);
  }
  return absl::InternalError("unknown decoder kind");
}

}  // namespace

absl::StatusOr<std::unique_ptr<TokenDecoder>> CreateTokenDecoder(
    const std::vector<TokenDecoderSpec>& specs, const std::string& source) {
  std::vector<std::unique_ptr<TokenDecoder>> steps;
  bool after_fuse = false;
  for (const TokenDecoderSpec& spec : specs) {
    TEXTGEN_ASSIGN_OR_RETURN(std::unique_ptr<TokenDecoder> step,
                             CreateStep(spec, after_fuse, source));
    steps.push_back(std::move(step));
    if (spec.kind == TokenDecoderSpec::Kind::kFuse) after_fuse = true;
  }
  return std::make_unique<SequenceDecoder>(std::move(steps));
}

}  // namespace textgen
