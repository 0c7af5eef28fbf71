#include "model/text/bpe_tokenizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "base/utf8.h"
#include "model/text/gpt2_bpe_tokenizer.h"
#include "model/text/pair_merge.h"
#include "model/text/pcre2_regex.h"

namespace textgen {
namespace {

// A stretch of text on its way through the pipeline. `at_start`: it begins
// where the input began (Metaspace's PrependScheme::kFirst asks).
struct Piece {
  std::string text;
  bool at_start;
};

// Rust's char::is_whitespace: Unicode White_Space.
bool IsWhiteSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// The code point that ends before `end` (valid UTF-8, end > 0).
char32_t CodePointBefore(std::string_view text, size_t& end) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80)
    --start;
  size_t pos = start;
  const char32_t c = NextCodePoint(text, pos);
  end = start;
  return c;
}

// Rust's char::is_alphanumeric, near enough for single_word: ASCII letters
// and digits, and every non-ASCII letter or number (utf8proc's category).
bool IsWordChar(char32_t c) {
  if (c < 0x80) return std::isalnum(static_cast<int>(c)) != 0;
  const utf8proc_category_t cat =
      utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO
             ? true
             : (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
}

size_t CodePointCount(std::string_view s) {
  return std::count_if(s.begin(), s.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  });
}

std::string ReplaceLiteral(std::string_view text, std::string_view pattern,
                           std::string_view content) {
  if (pattern.empty()) return std::string(text);
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = text.find(pattern, pos)) != text.npos;) {
    out.append(text.substr(pos, hit - pos));
    out.append(content);
    pos = hit + pattern.size();
  }
  out.append(text.substr(pos));
  return out;
}

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

// (start, end, is_match) ranges that cover a piece, in order.
struct Range {
  size_t start;
  size_t end;
  bool is_match;
};

// The library's NormalizedString::split for one behaviour.
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

}  // namespace

// The compiled pipeline: the regexes the spec's components need, and the
// added tokens, grouped by first byte for matching.
class BpeTokenizer::Impl {
 public:
  struct CompiledNormalizer {
    Normalizer spec;
    std::unique_ptr<Pcre2Regex> regex;  // kReplace with a regex.
  };
  struct CompiledPreTokenizer {
    PreTokenizer spec;
    std::unique_ptr<Pcre2Regex> regex;  // kSplit with a regex, kByteLevel.
  };
  struct Matcher {
    // First byte -> indices into tokens, longest content first.
    std::vector<std::vector<int>> by_first_byte =
        std::vector<std::vector<int>>(256);
    std::vector<AddedToken> tokens;
    bool empty() const { return tokens.empty(); }
  };

  std::vector<CompiledNormalizer> normalizers;
  std::vector<CompiledPreTokenizer> pre_tokenizers;
  Matcher raw_added;             // Matched in the input text.
  Matcher normalized_added;      // Matched after normalization.
  std::vector<int> added_id_of;  // id -> index in spec.added_tokens or -1.

  static void Add(Matcher& m, const AddedToken& t) {
    m.tokens.push_back(t);
    auto& list = m.by_first_byte[static_cast<unsigned char>(t.content[0])];
    list.push_back(static_cast<int>(m.tokens.size()) - 1);
    std::stable_sort(list.begin(), list.end(), [&m](int a, int b) {
      return m.tokens[a].content.size() > m.tokens[b].content.size();
    });
  }

  // An added token, or a stretch of text between them.
  struct Segment {
    int added_id;  // -1 for text.
    Piece piece;
  };
  // Appends to `out` the segments of `piece` split at the added tokens of
  // `m`: leftmost, then longest, as the library's aho-corasick
  // LeftmostLongest finds them; a match that fails single_word is skipped
  // (its text stays text), as there.
  static void SplitAdded(const Matcher& m, const Piece& piece,
                         std::vector<Segment>& out) {
    const std::string_view s = piece.text;
    if (m.empty()) {
      out.push_back({-1, piece});
      return;
    }
    size_t text_start = 0;  // Start of the text not yet emitted.
    size_t pos = 0;
    while (pos < s.size()) {
      const AddedToken* found = nullptr;
      for (int i : m.by_first_byte[static_cast<unsigned char>(s[pos])]) {
        const AddedToken& t = m.tokens[i];
        if (s.compare(pos, t.content.size(), t.content) == 0) {
          found = &t;
          break;
        }
      }
      if (found == nullptr) {
        ++pos;
        continue;
      }
      size_t start = pos, end = pos + found->content.size();
      pos = end;
      if (found->single_word) {
        size_t before = start;
        const bool word_before =
            start > 0 && IsWordChar(CodePointBefore(s, before));
        size_t after = end;
        const bool word_after =
            end < s.size() && IsWordChar(NextCodePoint(s, after));
        if (word_before || word_after) continue;
      }
      if (found->lstrip) {
        while (start > text_start) {
          size_t before = start;
          if (!IsWhiteSpace(CodePointBefore(s, before))) break;
          start = before;
        }
      }
      if (found->rstrip) {
        while (end < s.size()) {
          size_t after = end;
          if (!IsWhiteSpace(NextCodePoint(s, after))) break;
          end = after;
        }
        pos = end;
      }
      if (start > text_start) {
        out.push_back({-1,
                       {std::string(s.substr(text_start, start - text_start)),
                        piece.at_start && text_start == 0}});
      }
      out.push_back({found->id, {}});
      text_start = end;
    }
    if (text_start < s.size()) {
      out.push_back({-1,
                     {std::string(s.substr(text_start)),
                      piece.at_start && text_start == 0}});
    }
  }

  absl::StatusOr<std::string> Normalize(std::string text) const {
    for (const CompiledNormalizer& n : normalizers) {
      switch (n.spec.kind) {
        case Normalizer::Kind::kNfc: {
          utf8proc_uint8_t* result = nullptr;
          const utf8proc_ssize_t size = utf8proc_map(
              reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
              static_cast<utf8proc_ssize_t>(text.size()), &result,
              static_cast<utf8proc_option_t>(UTF8PROC_STABLE |
                                             UTF8PROC_COMPOSE));
          if (size < 0) {
            return absl::InternalError(
                absl::StrCat("NFC: ", utf8proc_errmsg(size)));
          }
          text.assign(reinterpret_cast<const char*>(result), size);
          std::free(result);
          break;
        }
        case Normalizer::Kind::kPrepend:
          if (!text.empty()) text = n.spec.content + text;
          break;
        case Normalizer::Kind::kReplace:
          if (n.regex) {
            std::string out;
            size_t pos = 0;
            TEXTGEN_RETURN_IF_ERROR(
                n.regex->ForEachMatch(text, [&](size_t start, size_t end) {
                  out.append(text, pos, start - pos);
                  out += n.spec.content;
                  pos = end;
                }));
            out.append(text, pos);
            text = std::move(out);
          } else {
            text = ReplaceLiteral(text, n.spec.pattern, n.spec.content);
          }
          break;
      }
    }
    return text;
  }

  // One pre-tokenizer over every piece.
  absl::Status PreTokenize(const CompiledPreTokenizer& p,
                           std::vector<Piece>& pieces) const {
    std::vector<Piece> out;
    out.reserve(pieces.size());
    for (Piece& piece : pieces) {
      switch (p.spec.kind) {
        case PreTokenizer::Kind::kSplit:
          TEXTGEN_RETURN_IF_ERROR(
              Split(piece, p, p.spec.behavior, p.spec.invert, out));
          break;
        case PreTokenizer::Kind::kByteLevel: {
          if (p.spec.add_prefix_space && piece.text[0] != ' ') {
            piece.text.insert(0, 1, ' ');
          }
          std::vector<Piece> split;
          if (p.spec.use_regex) {
            TEXTGEN_RETURN_IF_ERROR(
                Split(piece, p, SplitBehavior::kIsolated, false, split));
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
          break;
        }
        case PreTokenizer::Kind::kMetaspace: {
          const std::string& rep = p.spec.replacement;
          std::string text = ReplaceLiteral(piece.text, " ", rep);
          const bool starts = text.compare(0, rep.size(), rep) == 0;
          if (!starts && (p.spec.prepend_scheme == PrependScheme::kAlways ||
                          (p.spec.prepend_scheme == PrependScheme::kFirst &&
                           piece.at_start))) {
            text.insert(0, rep);
          }
          Piece replaced{std::move(text), piece.at_start};
          if (p.spec.split) {
            TEXTGEN_RETURN_IF_ERROR(
                Split(replaced, p, SplitBehavior::kMergedWithNext, false, out));
          } else {
            out.push_back(std::move(replaced));
          }
          break;
        }
      }
    }
    pieces = std::move(out);
    return absl::OkStatus();
  }

 private:
  // Splits at the matches of p's regex (or, without one, its literal
  // pattern / Metaspace's replacement).
  static absl::Status Split(const Piece& piece, const CompiledPreTokenizer& p,
                            SplitBehavior behavior, bool invert,
                            std::vector<Piece>& out) {
    const std::string& s = piece.text;
    std::vector<Range> ranges;
    size_t previous = 0;
    auto on_match = [&](size_t start, size_t end) {
      if (start != previous) ranges.push_back({previous, start, false});
      ranges.push_back({start, end, true});
      previous = end;
    };
    if (p.regex) {
      TEXTGEN_RETURN_IF_ERROR(p.regex->ForEachMatch(s, on_match));
    } else {
      const std::string& literal = p.spec.kind == PreTokenizer::Kind::kMetaspace
                                       ? p.spec.replacement
                                       : p.spec.pattern;
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
};

void UseByteLevelPipeline(BpeTokenizerSpec& spec,
                          std::string_view split_pattern) {
  spec.normalizers.clear();
  spec.pre_tokenizers.clear();
  PreTokenizer split;
  split.kind = PreTokenizer::Kind::kSplit;
  split.pattern = std::string(split_pattern);
  split.behavior = SplitBehavior::kIsolated;
  spec.pre_tokenizers.push_back(split);
  PreTokenizer byte_level;
  byte_level.kind = PreTokenizer::Kind::kByteLevel;
  byte_level.use_regex = false;
  spec.pre_tokenizers.push_back(byte_level);
  spec.decoders = {TokenDecoder{}};  // kByteLevel
  spec.byte_fallback = false;
}

void UseSentencePiecePipeline(BpeTokenizerSpec& spec) {
  Normalizer prepend;
  prepend.kind = Normalizer::Kind::kPrepend;
  prepend.content = kMetaspace;
  Normalizer replace;
  replace.kind = Normalizer::Kind::kReplace;
  replace.pattern = " ";
  replace.content = kMetaspace;
  spec.normalizers = {prepend, replace};
  spec.pre_tokenizers.clear();
  spec.byte_fallback = true;
  spec.fuse_unk = true;
  if (spec.unk_token.empty() && std::find(spec.vocab.begin(), spec.vocab.end(),
                                          "<unk>") != spec.vocab.end()) {
    spec.unk_token = "<unk>";
  }
  TokenDecoder to_space;
  to_space.kind = TokenDecoder::Kind::kReplace;
  to_space.pattern = kMetaspace;
  to_space.content = " ";
  TokenDecoder bytes;
  bytes.kind = TokenDecoder::Kind::kByteFallback;
  TokenDecoder fuse;
  fuse.kind = TokenDecoder::Kind::kFuse;
  TokenDecoder strip;
  strip.kind = TokenDecoder::Kind::kStrip;
  strip.content = " ";
  strip.start = 1;
  spec.decoders = {to_space, bytes, fuse, strip};
}

BpeTokenizer::BpeTokenizer() = default;
BpeTokenizer::~BpeTokenizer() = default;

namespace {

// A decoder chain compiled for one token at a time (see the header).
struct DecodeChain {
  std::vector<TokenDecoder> steps;
  std::vector<std::unique_ptr<Pcre2Regex>> regexes;  // Per step, kReplace.

  // The bytes of token string `s`, as the first token of a sequence or not.
  absl::StatusOr<std::string> Run(std::string s, bool first) const {
    bool fused = false;
    for (size_t i = 0; i < steps.size(); ++i) {
      const TokenDecoder& d = steps[i];
      switch (d.kind) {
        case TokenDecoder::Kind::kByteLevel: {
          std::string bytes;
          bool all = true;
          for (size_t pos = 0; pos < s.size();) {
            const int b = Gpt2UnicodeToByte(NextCodePoint(s, pos));
            if (b < 0) {
              all = false;
              break;
            }
            bytes += static_cast<char>(b);
          }
          if (all) s = std::move(bytes);
          break;
        }
        case TokenDecoder::Kind::kByteFallback:
          if (const int b = ByteOfFallbackToken(s); b >= 0) {
            s = std::string(1, static_cast<char>(b));
          }
          break;
        case TokenDecoder::Kind::kFuse:
          fused = true;
          break;
        case TokenDecoder::Kind::kStrip: {
          if (fused && !first) break;
          std::string_view view = s;
          for (int n = 0;
               n < d.start && view.substr(0, d.content.size()) == d.content &&
               !view.empty();
               ++n) {
            view.remove_prefix(d.content.size());
          }
          for (int n = 0;
               !fused && n < d.stop && !view.empty() &&
               view.size() >= d.content.size() &&
               view.substr(view.size() - d.content.size()) == d.content;
               ++n) {
            view.remove_suffix(d.content.size());
          }
          s = std::string(view);
          break;
        }
        case TokenDecoder::Kind::kReplace:
          if (regexes[i]) {
            std::string out;
            size_t pos = 0;
            TEXTGEN_RETURN_IF_ERROR(
                regexes[i]->ForEachMatch(s, [&](size_t start, size_t end) {
                  out.append(s, pos, start - pos);
                  out += d.content;
                  pos = end;
                }));
            out.append(s, pos);
            s = std::move(out);
          } else {
            s = ReplaceLiteral(s, d.pattern, d.content);
          }
          break;
        case TokenDecoder::Kind::kMetaspace:
          // The library drops every replacement character of the first
          // token (not only a leading one) unless nothing was prepended.
          s = ReplaceLiteral(
              s, d.replacement,
              first && d.prepend_scheme != PrependScheme::kNever ? "" : " ");
          break;
      }
    }
    return s;
  }
};

const char* DecoderName(TokenDecoder::Kind kind) {
  switch (kind) {
    case TokenDecoder::Kind::kByteLevel:
      return "ByteLevel";
    case TokenDecoder::Kind::kByteFallback:
      return "ByteFallback";
    case TokenDecoder::Kind::kFuse:
      return "Fuse";
    case TokenDecoder::Kind::kStrip:
      return "Strip";
    case TokenDecoder::Kind::kReplace:
      return "Replace";
    case TokenDecoder::Kind::kMetaspace:
      return "Metaspace";
  }
  return "?";
}

}  // namespace

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::Create(
    BpeTokenizerSpec spec) {
  auto error = [&spec](auto&&... parts) {
    return absl::InvalidArgumentError(
        absl::StrCat(spec.source, ": ", parts...));
  };
  std::unique_ptr<BpeTokenizer> t(new BpeTokenizer);
  t->impl_ = std::make_unique<Impl>();
  Impl& impl = *t->impl_;
  t->source_ = spec.source;

  // The vocabulary.
  if (spec.vocab.empty()) return error("the vocabulary is empty");
  if (!spec.scores.empty() && spec.scores.size() != spec.vocab.size()) {
    return error("has ", spec.scores.size(), " scores for ", spec.vocab.size(),
                 " tokens");
  }
  if (!spec.types.empty() && spec.types.size() != spec.vocab.size()) {
    return error("has ", spec.types.size(), " token types for ",
                 spec.vocab.size(), " tokens");
  }
  int size = static_cast<int>(spec.vocab.size());
  t->ids_.reserve(spec.vocab.size());
  for (int id = 0; id < static_cast<int>(spec.vocab.size()); ++id) {
    const std::string& s = spec.vocab[id];
    if (s.empty()) continue;
    if (!IsValidUtf8(s)) return error("token ", id, " is not valid UTF-8");
    if (auto [it, inserted] = t->ids_.emplace(s, id); !inserted) {
      return error("token \"", s, "\" has two ids, ", it->second, " and ", id);
    }
  }
  // Token types add the control and user-defined tokens to the added ones.
  for (int id = 0; id < static_cast<int>(spec.types.size()); ++id) {
    const TokenType type = spec.types[id];
    if (type != TokenType::kControl && type != TokenType::kUserDefined)
      continue;
    if (spec.vocab[id].empty()) continue;
    const bool listed =
        std::any_of(spec.added_tokens.begin(), spec.added_tokens.end(),
                    [id](const AddedToken& a) { return a.id == id; });
    if (listed) continue;
    AddedToken added;
    added.id = id;
    added.content = spec.vocab[id];
    added.special = type == TokenType::kControl;
    spec.added_tokens.push_back(added);
  }
  for (const AddedToken& a : spec.added_tokens) {
    if (a.id < 0) return error("added token \"", a.content, "\" has no id");
    if (a.content.empty()) return error("added token ", a.id, " is empty");
    if (!IsValidUtf8(a.content)) {
      return error("added token ", a.id, " is not valid UTF-8");
    }
    size = std::max(size, a.id + 1);
  }
  t->strings_.assign(size, "");
  for (int id = 0; id < static_cast<int>(spec.vocab.size()); ++id) {
    t->strings_[id] = spec.vocab[id];
  }
  impl.added_id_of.assign(size, -1);
  for (size_t i = 0; i < spec.added_tokens.size(); ++i) {
    const AddedToken& a = spec.added_tokens[i];
    if (impl.added_id_of[a.id] >= 0) {
      return error("added token id ", a.id, " is listed twice");
    }
    if (a.id < static_cast<int>(spec.vocab.size()) &&
        !spec.vocab[a.id].empty() && spec.vocab[a.id] != a.content) {
      return error("added token ", a.id, " \"", a.content, "\" is \"",
                   spec.vocab[a.id], "\" in the vocabulary");
    }
    impl.added_id_of[a.id] = static_cast<int>(i);
    t->strings_[a.id] = a.content;
    Impl::Add(a.normalized ? impl.normalized_added : impl.raw_added, a);
  }

  // The BPE model's options.
  if (!spec.unk_token.empty()) {
    auto it = t->ids_.find(spec.unk_token);
    if (it == t->ids_.end()) {
      return error("unk_token \"", spec.unk_token,
                   "\" is not in the vocabulary");
    }
    t->unk_id_ = it->second;
  }
  t->byte_fallback_ = spec.byte_fallback;
  t->fuse_unk_ = spec.fuse_unk;
  t->ignore_merges_ = spec.ignore_merges;
  t->continuing_subword_prefix_ = spec.continuing_subword_prefix;
  t->end_of_word_suffix_ = spec.end_of_word_suffix;

  // Merges: listed, or from scores.
  auto id_of = [&t](const std::string& s) {
    auto it = t->ids_.find(s);
    return it == t->ids_.end() ? -1 : it->second;
  };
  if (!spec.merges.empty()) {
    t->merges_.reserve(spec.merges.size());
    for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
      const auto& [left, right] = spec.merges[rank];
      const int l = id_of(left), r = id_of(right);
      const int m = id_of(left + right);
      if (l < 0 || r < 0 || m < 0) {
        return error("merge ", rank, " \"", left, " ", right, "\": token \"",
                     l < 0   ? left
                     : r < 0 ? right
                             : left + right,
                     "\" is not in the vocabulary");
      }
      // A repeated pair takes its last rank, as the library's map does.
      const uint64_t key = (static_cast<uint64_t>(l) << 32) | uint32_t(r);
      t->merges_[key] = Merge{static_cast<int>(rank), m};
    }
  } else if (!spec.scores.empty()) {
    std::vector<float> distinct = spec.scores;
    std::sort(distinct.begin(), distinct.end(), std::greater<>());
    distinct.erase(std::unique(distinct.begin(), distinct.end()),
                   distinct.end());
    for (int id = 0; id < static_cast<int>(spec.vocab.size()); ++id) {
      const std::string& s = spec.vocab[id];
      if (s.empty() || impl.added_id_of[id] >= 0) continue;
      if (!spec.types.empty() && spec.types[id] != TokenType::kNormal &&
          spec.types[id] != TokenType::kUserDefined) {
        continue;
      }
      const int rank =
          static_cast<int>(std::lower_bound(distinct.begin(), distinct.end(),
                                            spec.scores[id], std::greater<>()) -
                           distinct.begin());
      for (size_t cut = 1; cut < s.size(); ++cut) {
        if ((static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) continue;
        const int l = id_of(s.substr(0, cut)), r = id_of(s.substr(cut));
        if (l < 0 || r < 0) continue;
        t->merges_.emplace((static_cast<uint64_t>(l) << 32) | uint32_t(r),
                           Merge{rank, id});
      }
    }
  }

  // Byte fallback pieces.
  t->byte_tokens_.assign(256, -1);
  for (int b = 0; b < 256; ++b) {
    t->byte_tokens_[b] = id_of(absl::StrFormat("<0x%02X>", b));
  }

  // Normalizers and pre-tokenizers.
  for (const Normalizer& n : spec.normalizers) {
    Impl::CompiledNormalizer c{n, nullptr};
    if (n.kind == Normalizer::Kind::kReplace && n.pattern_is_regex) {
      TEXTGEN_ASSIGN_OR_RETURN(std::string pattern,
                               OnigurumaToPcre2(n.pattern));
      TEXTGEN_ASSIGN_OR_RETURN(
          c.regex,
          Pcre2Regex::Compile(
              pattern, absl::StrCat(spec.source, ": normalizer Replace")));
    }
    impl.normalizers.push_back(std::move(c));
  }
  for (const PreTokenizer& p : spec.pre_tokenizers) {
    Impl::CompiledPreTokenizer c{p, nullptr};
    std::string pattern;
    if (p.kind == PreTokenizer::Kind::kSplit && p.pattern_is_regex) {
      pattern = p.pattern;
    } else if (p.kind == PreTokenizer::Kind::kByteLevel && p.use_regex) {
      pattern = kGpt2SplitPattern;
    }
    if (p.kind == PreTokenizer::Kind::kSplit && !p.pattern_is_regex &&
        p.pattern.empty()) {
      return error("pre_tokenizer Split has an empty pattern");
    }
    if (p.kind == PreTokenizer::Kind::kMetaspace && p.replacement.empty()) {
      return error("pre_tokenizer Metaspace has an empty replacement");
    }
    if (!pattern.empty()) {
      TEXTGEN_ASSIGN_OR_RETURN(std::string translated,
                               OnigurumaToPcre2(pattern));
      TEXTGEN_ASSIGN_OR_RETURN(
          c.regex,
          Pcre2Regex::Compile(translated,
                              absl::StrCat(spec.source, ": pre_tokenizer")));
    }
    impl.pre_tokenizers.push_back(std::move(c));
  }

  // Decoding: each token's bytes, as a sequence's first token and not.
  DecodeChain chain;
  bool fused = false;
  for (const TokenDecoder& d : spec.decoders) {
    std::unique_ptr<Pcre2Regex> regex;
    if (d.kind == TokenDecoder::Kind::kReplace && d.pattern_is_regex) {
      TEXTGEN_ASSIGN_OR_RETURN(std::string pattern,
                               OnigurumaToPcre2(d.pattern));
      TEXTGEN_ASSIGN_OR_RETURN(
          regex, Pcre2Regex::Compile(
                     pattern, absl::StrCat(spec.source, ": decoder Replace")));
    }
    // After Fuse a decoder sees the whole text at once; token by token that
    // is the same only for these (Strip at the end would need the future).
    if (fused) {
      const bool per_character_replace =
          d.kind == TokenDecoder::Kind::kReplace && !d.pattern_is_regex &&
          CodePointCount(d.pattern) == 1;
      const bool ok = d.kind == TokenDecoder::Kind::kFuse ||
                      d.kind == TokenDecoder::Kind::kByteLevel ||
                      per_character_replace ||
                      (d.kind == TokenDecoder::Kind::kStrip && d.stop == 0);
      if (!ok) {
        return error("decoder \"", DecoderName(d.kind),
                     "\" after \"Fuse\" is not supported");
      }
    }
    if (d.kind == TokenDecoder::Kind::kStrip && d.content.empty()) {
      return error("decoder Strip has no content");
    }
    if (d.kind == TokenDecoder::Kind::kFuse) fused = true;
    chain.steps.push_back(d);
    chain.regexes.push_back(std::move(regex));
  }
  t->bytes_.resize(size);
  t->first_bytes_.resize(size);
  t->first_differs_.assign(size, false);
  t->special_.assign(size, false);
  for (const AddedToken& a : spec.added_tokens) t->special_[a.id] = a.special;
  for (int id = 0; id < size; ++id) {
    // Special tokens decode to nothing (see the header).
    if (t->strings_[id].empty() || t->special_[id]) continue;
    TEXTGEN_ASSIGN_OR_RETURN(t->bytes_[id],
                             chain.Run(t->strings_[id], /*first=*/false));
    TEXTGEN_ASSIGN_OR_RETURN(std::string first,
                             chain.Run(t->strings_[id], /*first=*/true));
    if (first != t->bytes_[id]) {
      t->first_differs_[id] = true;
      t->first_bytes_[id] = std::move(first);
    }
  }

  // Sequence boundaries.
  if (spec.bos_id >= size) return error("BOS id ", spec.bos_id, " is unknown");
  t->bos_id_ = spec.bos_id;
  for (int eos : spec.eos_ids) {
    if (eos < 0 || eos >= size) return error("EOS id ", eos, " is unknown");
    if (std::find(t->eos_ids_.begin(), t->eos_ids_.end(), eos) ==
        t->eos_ids_.end()) {
      t->eos_ids_.push_back(eos);
    }
  }
  return t;
}

int BpeTokenizer::TokenId(std::string_view token) const {
  for (const auto* m : {&impl_->raw_added, &impl_->normalized_added}) {
    for (const AddedToken& a : m->tokens) {
      if (a.content == token) return a.id;
    }
  }
  auto it = ids_.find(std::string(token));
  return it == ids_.end() ? -1 : it->second;
}

std::string BpeTokenizer::Describe() const {
  return absl::StrCat(
      "bpe: ", strings_.size(), " tokens, ", merges_.size(), " merges, ",
      impl_->raw_added.tokens.size() + impl_->normalized_added.tokens.size(),
      " added tokens (", source_, ")");
}

std::string_view BpeTokenizer::TokenBytes(int id, int previous) const {
  // `previous` may be any id of the model's (possibly larger) vocabulary.
  const bool first =
      previous < 0 ||
      (previous < static_cast<int>(special_.size()) && special_[previous]);
  return first && first_differs_[id] ? first_bytes_[id] : bytes_[id];
}

absl::StatusOr<std::vector<int>> BpeTokenizer::Encode(
    std::string_view text) const {
  TEXTGEN_RETURN_IF_ERROR(CheckUtf8(text));
  std::vector<int> ids;
  if (text.empty()) return ids;
  ids.reserve(text.size() / 3 + 1);
  std::vector<Impl::Segment> raw;
  Impl::SplitAdded(impl_->raw_added, {std::string(text), true}, raw);
  std::vector<Impl::Segment> segments;
  for (Impl::Segment& s : raw) {
    if (s.added_id >= 0) {
      segments.push_back(std::move(s));
      continue;
    }
    TEXTGEN_ASSIGN_OR_RETURN(std::string normalized,
                             impl_->Normalize(std::move(s.piece.text)));
    if (normalized.empty()) continue;
    Impl::SplitAdded(impl_->normalized_added,
                     {std::move(normalized), s.piece.at_start}, segments);
  }
  std::vector<Piece> pieces;
  for (Impl::Segment& s : segments) {
    if (s.added_id >= 0) {
      ids.push_back(s.added_id);
      continue;
    }
    pieces.clear();
    pieces.push_back(std::move(s.piece));
    for (const auto& p : impl_->pre_tokenizers) {
      TEXTGEN_RETURN_IF_ERROR(impl_->PreTokenize(p, pieces));
    }
    for (const Piece& piece : pieces) EncodeWord(piece.text, ids);
  }
  return ids;
}

void BpeTokenizer::EncodeWord(std::string_view word,
                              std::vector<int>& ids) const {
  if (ignore_merges_) {
    if (auto it = ids_.find(std::string(word)); it != ids_.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  // One symbol per character (the library's BPE::merge_word).
  std::vector<int> initial;
  initial.reserve(word.size());
  int unk_pending = -1;  // fuse_unk: an unk not yet emitted.
  std::string key;
  for (size_t pos = 0; pos < word.size();) {
    const size_t start = pos;
    NextCodePoint(word, pos);
    key.clear();
    if (start > 0) key += continuing_subword_prefix_;
    key.append(word.substr(start, pos - start));
    if (pos == word.size()) key += end_of_word_suffix_;
    if (auto it = ids_.find(key); it != ids_.end()) {
      if (unk_pending >= 0) initial.push_back(unk_pending);
      unk_pending = -1;
      initial.push_back(it->second);
      continue;
    }
    if (byte_fallback_) {
      const bool all = std::all_of(key.begin(), key.end(), [this](char b) {
        return byte_tokens_[static_cast<unsigned char>(b)] >= 0;
      });
      if (all) {
        // Like the library, a pending unk is not flushed first: it lands
        // after these bytes.
        for (char b : key) {
          initial.push_back(byte_tokens_[static_cast<unsigned char>(b)]);
        }
        continue;
      }
    }
    if (unk_id_ >= 0) {
      if (unk_pending >= 0 && !fuse_unk_) initial.push_back(unk_pending);
      unk_pending = unk_id_;
    }
  }
  if (unk_pending >= 0) initial.push_back(unk_pending);

  // The library's Word::merge_all.
  MergeAdjacentPairs<int>(initial, [this](int left, int right) {
    const Merge* m = FindMerge(left, right);
    return m == nullptr ? std::nullopt
                        : std::optional(PairMerge<int>{m->rank, m->result});
  });
  ids.insert(ids.end(), initial.begin(), initial.end());
}

}  // namespace textgen
