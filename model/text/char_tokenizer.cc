#include "model/text/char_tokenizer.h"

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "base/utf8.h"

namespace textgen {

absl::StatusOr<std::unique_ptr<CharTokenizer>> CharTokenizer::Load(
    const std::string& path) {
  TEXTGEN_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return FromJson(text, path);
}

absl::StatusOr<std::unique_ptr<CharTokenizer>> CharTokenizer::FromJson(
    const std::string& json_text, const std::string& source) {
  using nlohmann::json;
  auto fail = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", parts...));
  };
  const json root =
      json::parse(json_text, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return fail("not valid JSON");
  if (!root.is_object()) return fail("expected a JSON object");
  auto type = root.find("type");
  if (type == root.end() || !type->is_string() || *type != "char") {
    return fail("expected \"type\": \"char\" (a character vocabulary)");
  }
  auto chars = root.find("chars");
  if (chars == root.end() || !chars->is_array()) {
    return fail("missing \"chars\": an array of single characters");
  }
  std::vector<std::string> list;
  for (size_t i = 0; i < chars->size(); ++i) {
    const json& c = (*chars)[i];
    if (!c.is_string()) {
      return fail("\"chars\"[", i, "] must be a string, got ", c.dump());
    }
    list.push_back(c.get<std::string>());
  }
  std::vector<std::string> control;
  if (auto it = root.find("control_tokens"); it != root.end()) {
    if (!it->is_array()) {
      return fail("\"control_tokens\" must be an array of names");
    }
    for (size_t i = 0; i < it->size(); ++i) {
      const json& c = (*it)[i];
      if (!c.is_string()) {
        return fail("\"control_tokens\"[", i, "] must be a string, got ",
                    c.dump());
      }
      control.push_back(c.get<std::string>());
    }
  }
  std::string bos, eos;
  for (auto [key, out] :
       {std::pair<const char*, std::string*>{"bos_token", &bos},
        {"eos_token", &eos}}) {
    auto it = root.find(key);
    if (it == root.end() || it->is_null()) continue;
    if (!it->is_string()) {
      return fail("\"", key, "\" must be a string, got ", it->dump());
    }
    *out = it->get<std::string>();
  }
  return FromChars(list, source, control, bos, eos);
}

absl::StatusOr<std::unique_ptr<CharTokenizer>> CharTokenizer::FromChars(
    const std::vector<std::string>& chars, const std::string& source,
    const std::vector<std::string>& control_tokens, const std::string& bos,
    const std::string& eos) {
  auto fail = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", parts...));
  };
  if (chars.empty()) return fail("the vocabulary is empty");
  std::unique_ptr<CharTokenizer> t(new CharTokenizer);
  for (size_t id = 0; id < chars.size(); ++id) {
    const std::string& s = chars[id];
    size_t pos = 0;
    if (s.empty() || !IsValidUtf8(s) ||
        (NextCodePoint(s, pos), pos != s.size())) {
      return fail("entry ", id, " (\"", SanitizeUtf8(s),
                  "\") must be exactly one Unicode character");
    }
    pos = 0;
    const char32_t c = NextCodePoint(s, pos);
    auto [it, inserted] = t->id_of_char_.emplace(c, static_cast<int>(id));
    if (!inserted) {
      return fail("entry ", id, " repeats entry ", it->second, " (",
                  DescribeCodePoint(c), ")");
    }
    t->chars_.push_back(s);
  }
  for (size_t k = 0; k < control_tokens.size(); ++k) {
    const std::string& name = control_tokens[k];
    if (name.empty() || !IsValidUtf8(name)) {
      return fail("control token ", k, " must be a non-empty UTF-8 name");
    }
    for (size_t j = 0; j < k; ++j) {
      if (control_tokens[j] == name) {
        return fail("control token ", k, " repeats control token ", j, " (\"",
                    name, "\")");
      }
    }
    t->control_tokens_.push_back(name);
  }
  for (auto [name, id] :
       {std::pair<const std::string*, int*>{&bos, &t->bos_id_},
        {&eos, &t->eos_id_}}) {
    if (name->empty()) continue;
    for (size_t k = 0; k < control_tokens.size(); ++k) {
      if (control_tokens[k] == *name) *id = static_cast<int>(chars.size() + k);
    }
    if (*id < 0) {
      return fail("\"", SanitizeUtf8(*name),
                  "\" is not one of the control tokens (bos_token and "
                  "eos_token must name one)");
    }
  }
  return t;
}

std::string CharTokenizer::Describe() const {
  return absl::StrCat(
      "char: ", chars_.size(), " characters",
      control_tokens_.empty()
          ? ""
          : absl::StrCat(" + ", control_tokens_.size(), " control tokens"));
}

absl::StatusOr<std::vector<int>> CharTokenizer::Encode(
    std::string_view text) const {
  TEXTGEN_RETURN_IF_ERROR(CheckUtf8(text));
  std::vector<int> ids;
  ids.reserve(text.size());
  size_t index = 0;  // In characters, which is what a user counts.
  for (size_t pos = 0; pos < text.size(); ++index) {
    const size_t at = pos;
    const char32_t c = NextCodePoint(text, pos);
    auto it = id_of_char_.find(c);
    if (it == id_of_char_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("character ", DescribeCodePoint(c), " at position ",
                       index, " (byte offset ", at, ") is not in the model's ",
                       chars_.size(), "-character vocabulary"));
    }
    ids.push_back(it->second);
  }
  return ids;
}

}  // namespace textgen
