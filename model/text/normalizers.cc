#include "model/text/normalizers.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "base/status_macros.h"
#include "base/utf8.h"
#include "model/text/code_range.h"

namespace textgen {

absl::StatusOr<Replace> Replace::Create(std::string pattern,
                                        bool pattern_is_regex,
                                        std::string content,
                                        std::string_view what) {
  Replace r;
  if (pattern_is_regex) {
    TEXTGEN_ASSIGN_OR_RETURN(r.regex_, CompileOniguruma(pattern, what));
  } else {
    r.literal_ = std::move(pattern);
  }
  r.content_ = std::move(content);
  return r;
}

absl::Status Replace::Apply(std::string& text) const {
  if (regex_ == nullptr) {
    // An empty literal matches nowhere (absl skips it).
    text = absl::StrReplaceAll(text, {{literal_, content_}});
    return absl::OkStatus();
  }
  std::string out;
  size_t pos = 0;
  TEXTGEN_RETURN_IF_ERROR(
      regex_->ForEachMatch(text, [&](size_t start, size_t end) {
        out.append(text, pos, start - pos);
        out += content_;
        pos = end;
      }));
  out.append(text, pos);
  text = std::move(out);
  return absl::OkStatus();
}

namespace {

#include "model/text/unicode_nfc_unknown.inc"

// Whether the library's NFC tables lack `c` (it is then a plain character to
// it: nothing reorders around it or composes with it).
bool UnknownToLibraryNfc(char32_t c) {
  const auto it = std::upper_bound(
      std::begin(kNfcUnknown), std::end(kNfcUnknown), c,
      [](char32_t value, const CodeRange& r) { return value < r.first; });
  return it != std::begin(kNfcUnknown) && c <= std::prev(it)->last;
}

// Appends utf8proc's NFC of `text`.
absl::Status AppendNfc(std::string_view text, std::string& out) {
  if (text.empty()) return absl::OkStatus();
  utf8proc_uint8_t* result = nullptr;
  const utf8proc_ssize_t size = utf8proc_map(
      reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
      static_cast<utf8proc_ssize_t>(text.size()), &result,
      static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (size < 0) {
    return absl::InternalError(absl::StrCat("NFC: ", utf8proc_errmsg(size)));
  }
  out.append(reinterpret_cast<const char*>(result), size);
  std::free(result);  // utf8proc_map's buffer is malloc'd.
  return absl::OkStatus();
}

// utf8proc's NFC (Unicode 15.0) between the characters the library's older
// tables lack (unicode_nfc_unknown.inc, tools/make_unicode_nfc.py), which are
// copied as they are: the library's NFC.
class NfcNormalizer : public Normalizer {
 public:
  absl::Status Normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size());
    size_t segment = 0;
    for (size_t pos = 0; pos < text.size();) {
      const size_t start = pos;
      const char32_t c = NextCodePoint(text, pos);
      if (c < kNfcUnknown[0].first || !UnknownToLibraryNfc(c)) continue;
      TEXTGEN_RETURN_IF_ERROR(AppendNfc(
          std::string_view(text).substr(segment, start - segment), out));
      out.append(text, start, pos - start);
      segment = pos;
    }
    TEXTGEN_RETURN_IF_ERROR(
        AppendNfc(std::string_view(text).substr(segment), out));
    text = std::move(out);
    return absl::OkStatus();
  }
};

class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string content)
      : content_(std::move(content)) {}
  absl::Status Normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, content_);
    return absl::OkStatus();
  }

 private:
  std::string content_;
};

class ReplaceNormalizer : public Normalizer {
 public:
  explicit ReplaceNormalizer(Replace replace) : replace_(std::move(replace)) {}
  absl::Status Normalize(std::string& text) const override {
    return replace_.Apply(text);
  }

 private:
  Replace replace_;
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps)
      : steps_(std::move(steps)) {}
  absl::Status Normalize(std::string& text) const override {
    for (const auto& step : steps_) {
      TEXTGEN_RETURN_IF_ERROR(step->Normalize(text));
    }
    return absl::OkStatus();
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

absl::StatusOr<std::unique_ptr<Normalizer>> CreateStep(
    const NormalizerSpec& spec, const std::string& source) {
  switch (spec.kind) {
    case NormalizerSpec::Kind::kNfc:
      return std::make_unique<NfcNormalizer>();
    case NormalizerSpec::Kind::kPrepend:
      return std::make_unique<PrependNormalizer>(spec.content);
    case NormalizerSpec::Kind::kReplace: {
      TEXTGEN_ASSIGN_OR_RETURN(
          Replace replace,
          Replace::Create(spec.pattern, spec.pattern_is_regex, spec.content,
                          absl::StrCat(source, ": normalizer Replace")));
      return std::make_unique<ReplaceNormalizer>(std::move(replace));
    }
  }
  return absl::InternalError("unknown normalizer kind");
}

}  // namespace

absl::StatusOr<std::unique_ptr<Normalizer>> CreateNormalizer(
    const std::vector<NormalizerSpec>& specs, const std::string& source) {
  std::vector<std::unique_ptr<Normalizer>> steps;
  for (const NormalizerSpec& spec : specs) {
    TEXTGEN_ASSIGN_OR_RETURN(std::unique_ptr<Normalizer> step,
                             CreateStep(spec, source));
    steps.push_back(std::move(step));
  }
  return std::make_unique<SequenceNormalizer>(std::move(steps));
}

}  // namespace textgen
