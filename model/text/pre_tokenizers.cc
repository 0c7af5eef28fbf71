#include "model/text/pre_tokenizers.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "base/status_macros.h"
#include "base/utf8.h"
#include "model/text/gpt2_bpe_tokenizer.h"
#include "model/text/pcre2_regex.h"

namespace textgen {
namespace {

// (start, end, is_match) ranges that cover a piece, in order.
struct Range {
  size_t start;
  size_t end;
  bool is_match;
};

// The library's NormalizedString::split for one behaviour: which ranges
// become pieces (is_match false) and which are dropped (is_match true).
std::vector<Range> ApplyBehavior(std::vector<Range> ranges,
                                 SplitBehavior behavior) {
  std::vector<Range> out;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      return ranges;
    case SplitBehavior::kIsolated:
      for (Range& r : ranges) r.is_match = false;
      return ranges;
    case SplitBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const Range& r : ranges) {
        if (r.is_match && !previous_match && !out.empty()) {
          out.back().end = r.end;
        } else {
          out.push_back({r.start, r.end, false});
        }
        previous_match = r.is_match;
      }
      return out;
    }
    case SplitBehavior::kMergedWithNext: {
      bool previous_match = false;
      for (auto it = ranges.rbegin(); it != ranges.rend(); ++it) {
        if (it->is_match && !previous_match && !out.empty()) {
          out.back().start = it->start;
        } else {
          out.push_back({it->start, it->end, false});
        }
        previous_match = it->is_match;
      }
      std::reverse(out.begin(), out.end());
      return out;
    }
    case SplitBehavior::kContiguous: {
      bool previous_match = false;
      for (const Range& r : ranges) {
        if (r.is_match == previous_match && !out.empty()) {
          out.back().end = r.end;
        } else {
          out.push_back({r.start, r.end, false});
        }
        previous_match = r.is_match;
      }
      return out;
    }
  }
  return out;
}

// Appends to `out` the non-empty pieces of `piece` split at the matches of
// `regex` or, when it is null, of `literal` (none if empty).
absl::Status SplitAtMatches(const Piece& piece, const Pcre2Regex* regex,
                            std::string_view literal, SplitBehavior behavior,
                            bool invert, std::vector<Piece>& out) {
  const std::string& s = piece.text;
  std::vector<Range> ranges;
  size_t previous = 0;
  auto on_match = [&](size_t start, size_t end) {
    if (start != previous) ranges.push_back({previous, start, false});
    ranges.push_back({start, end, true});
    previous = end;
  };
  if (regex != nullptr) {
    TEXTGEN_RETURN_IF_ERROR(regex->ForEachMatch(s, on_match));
  } else {
    for (size_t hit;
         !literal.empty() && (hit = s.find(literal, previous)) != s.npos;) {
      on_match(hit, hit + literal.size());
    }
  }
  if (previous != s.size()) ranges.push_back({previous, s.size(), false});
  if (invert) {
    for (Range& r : ranges) r.is_match = !r.is_match;
  }
  for (const Range& r : ApplyBehavior(std::move(ranges), behavior)) {
    if (r.is_match || r.end == r.start) continue;
    out.push_back(
        {s.substr(r.start, r.end - r.start), piece.at_start && r.start == 0});
  }
  return absl::OkStatus();
}

// A pre-tokenizer that splits each piece on its own.
class PieceByPiece : public PreTokenizer {
 public:
  absl::Status PreTokenize(std::vector<Piece>& pieces) const final {
    std::vector<Piece> out;
    out.reserve(pieces.size());
    for (Piece& piece : pieces) {
      TEXTGEN_RETURN_IF_ERROR(Split(std::move(piece), out));
    }
    pieces = std::move(out);
    return absl::OkStatus();
  }

 protected:
  // Appends the pieces `piece` splits into.
  virtual absl::Status Split(Piece piece, std::vector<Piece>& out) const = 0;
};

class SplitPreTokenizer : public PieceByPiece {
 public:
  SplitPreTokenizer(const PreTokenizerSpec& spec,
                    std::unique_ptr<Pcre2Regex> regex)
      : literal_(spec.pattern_is_regex ? "" : spec.pattern),
        regex_(std::move(regex)),
        behavior_(spec.behavior),
        invert_(spec.invert) {}

 protected:
  absl::Status Split(Piece piece, std::vector<Piece>& out) const override {
    return SplitAtMatches(piece, regex_.get(), literal_, behavior_, invert_,
                          out);
  }

 private:
  std::string literal_;
  std::unique_ptr<Pcre2Regex> regex_;  // Null for a literal.
  SplitBehavior behavior_;
  bool invert_;
};

class ByteLevelPreTokenizer : public PieceByPiece {
 public:
  ByteLevelPreTokenizer(const PreTokenizerSpec& spec,
                        std::unique_ptr<Pcre2Regex> regex)
      : add_prefix_space_(spec.add_prefix_space), regex_(std::move(regex)) {}

 protected:
  absl::Status Split(Piece piece, std::vector<Piece>& out) const override {
    if (add_prefix_space_ && piece.text[0] != ' ') {
      piece.text.insert(0, 1, ' ');
    }
    std::vector<Piece> split;
    if (regex_ != nullptr) {
      TEXTGEN_RETURN_IF_ERROR(SplitAtMatches(piece, regex_.get(), "",
                                             SplitBehavior::kIsolated,
                                             /*invert=*/false, split));
    } else {
      split.push_back(std::move(piece));
    }
    for (Piece& s : split) {
      std::string mapped;
      mapped.reserve(s.text.size() * 2);
      for (unsigned char b : s.text) {
        AppendUtf8(Gpt2ByteToUnicode()[b], mapped);
      }
      out.push_back({std::move(mapped), s.at_start});
    }
    return absl::OkStatus();
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Pcre2Regex> regex_;  // kGpt2SplitPattern with use_regex.
};

class MetaspacePreTokenizer : public PieceByPiece {
 public:
  explicit MetaspacePreTokenizer(const PreTokenizerSpec& spec)
      : replacement_(spec.replacement),
        prepend_scheme_(spec.prepend_scheme),
        split_(spec.split) {}

 protected:
  absl::Status Split(Piece piece, std::vector<Piece>& out) const override {
    std::string text = absl::StrReplaceAll(piece.text, {{" ", replacement_}});
    const bool starts = text.compare(0, replacement_.size(), replacement_) == 0;
    if (!starts &&
        (prepend_scheme_ == PrependScheme::kAlways ||
         (prepend_scheme_ == PrependScheme::kFirst && piece.at_start))) {
      text.insert(0, replacement_);
    }
    Piece replaced{std::move(text), piece.at_start};
    if (!split_) {
      out.push_back(std::move(replaced));
      return absl::OkStatus();
    }
    return SplitAtMatches(replaced, nullptr, replacement_,
                          SplitBehavior::kMergedWithNext, /*invert=*/false,
                          out);
  }

 private:
  std::string replacement_;
  PrependScheme prepend_scheme_;
  bool split_;
};

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(
      std::vector<std::unique_ptr<PreTokenizer>> steps)
      : steps_(std::move(steps)) {}
  absl::Status PreTokenize(std::vector<Piece>& pieces) const override {
    for (const auto& step : steps_) {
      TEXTGEN_RETURN_IF_ERROR(step->PreTokenize(pieces));
    }
    return absl::OkStatus();
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

absl::StatusOr<std::unique_ptr<PreTokenizer>> CreateStep(
    const PreTokenizerSpec& spec, const std::string& source) {
  // The regex this step splits with, if any.
  std::string pattern;
  if (spec.kind == PreTokenizerSpec::Kind::kSplit && spec.pattern_is_regex) {
    pattern = spec.pattern;
  } else if (spec.kind == PreTokenizerSpec::Kind::kByteLevel &&
             spec.use_regex) {
    pattern = kGpt2SplitPattern;
  }
  if (spec.kind == PreTokenizerSpec::Kind::kSplit && !spec.pattern_is_regex &&
      spec.pattern.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": pre_tokenizer Split has an empty pattern"));
  }
  if (spec.kind == PreTokenizerSpec::Kind::kMetaspace &&
      spec.replacement.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": pre_tokenizer Metaspace has an empty replacement"));
  }
  std::unique_ptr<Pcre2Regex> regex;
  if (!pattern.empty()) {
    TEXTGEN_ASSIGN_OR_RETURN(
        regex,
        CompileOniguruma(pattern, absl::StrCat(source, ": pre_tokenizer")));
  }
  switch (spec.kind) {
    case PreTokenizerSpec::Kind::kSplit:
      return std::make_unique<SplitPreTokenizer>(spec, std::move(regex));
    case PreTokenizerSpec::Kind::kByteLevel:
      return std::make_unique<ByteLevelPreTokenizer>(spec, std::move(regex));
    case PreTokenizerSpec::Kind::kMetaspace:
      return std::make_unique<MetaspacePreTokenizer>(spec);
  }
  return absl::InternalError("unknown pre_tokenizer kind");
}

}  // namespace

absl::StatusOr<std::unique_ptr<PreTokenizer>> CreatePreTokenizer(
    const std::vector<PreTokenizerSpec>& specs, const std::string& source) {
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  for (const PreTokenizerSpec& spec : specs) {
    TEXTGEN_ASSIGN_OR_RETURN(std::unique_ptr<PreTokenizer> step,
                             CreateStep(spec, source));
    steps.push_back(std::move(step));
  }
  return std::make_unique<SequencePreTokenizer>(std::move(steps));
}

}  // namespace textgen
