#include "model/text/hf_tokenizer_json.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/json_int.h"
#include "base/status_macros.h"

namespace textgen {
namespace {

using nlohmann::json;

// Errors name the file and the component: `tokenizer.json: pre_tokenizer
// "Digits" is not supported`.
class Parser {
 public:
  explicit Parser(std::string source) : source_(std::move(source)) {}

  template <typename... Parts>
  absl::Status Error(const Parts&... parts) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": ", parts...));
  }
  absl::Status Unsupported(const std::string& component,
                           const std::string& type) const {
    return Error(component, " \"", type, "\" is not supported");
  }

  // The "type" of a component object, or an error.
  absl::StatusOr<std::string> TypeOf(const json& j,
                                     const std::string& component) const {
    if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
      return Error(component, " must be an object with a \"type\"");
    }
    return j["type"].get<std::string>();
  }

  // j[key] as T, or `fallback` when absent or null. An int must be a JSON
  // integer in int's range (JsonInt).
  template <typename T>
  absl::StatusOr<T> Get(const json& j, const char* key, T fallback,
                        const std::string& component) const {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return fallback;
    if constexpr (std::is_same_v<T, int>) {
      if (std::optional<int> value = JsonInt(*it)) return *value;
      return Error(component, ": \"", key, "\" is not an integer in range (",
                   it->dump(), ")");
    } else {
      try {
        return it->template get<T>();
      } catch (const json::exception&) {
        return Error(component, ": \"", key, "\" has the wrong type (",
                     it->dump(), ")");
      }
    }
  }

  // A {"String": s} or {"Regex": r} pattern.
  absl::Status Pattern(const json& j, const std::string& component,
                       std::string& pattern, bool& is_regex) const {
    auto it = j.find("pattern");
    if (it != j.end() && it->is_object()) {
      if (auto s = it->find("String"); s != it->end() && s->is_string()) {
        pattern = s->get<std::string>();
        is_regex = false;
        return absl::OkStatus();
      }
      if (auto r = it->find("Regex"); r != it->end() && r->is_string()) {
        pattern = r->get<std::string>();
        is_regex = true;
        return absl::OkStatus();
      }
    }
    return Error(component, ": \"pattern\" must be {\"String\": ...} or ",
                 "{\"Regex\": ...}");
  }

  // A component of type "Sequence": `parse` on each element of its list
  // `list_key`, in order.
  template <typename Parse>
  absl::Status EachInSequence(const json& j, const char* component,
                              const char* list_key, Parse parse) const {
    auto it = j.find(list_key);
    if (it == j.end() || !it->is_array()) {
      return Error(component, " Sequence has no \"", list_key, "\" list");
    }
    for (const json& child : *it) TEXTGEN_RETURN_IF_ERROR(parse(child));
    return absl::OkStatus();
  }

  absl::StatusOr<PrependScheme> Scheme(const json& j,
                                       const std::string& component) const {
    if (auto it = j.find("prepend_scheme"); it != j.end() && it->is_string()) {
      const std::string s = it->get<std::string>();
      if (s == "always") return PrependScheme::kAlways;
      if (s == "first") return PrependScheme::kFirst;
      if (s == "never") return PrependScheme::kNever;
      return Error(component, ": prepend_scheme \"", s, "\" is not supported");
    }
    // Files from before prepend_scheme say add_prefix_space.
    TEXTGEN_ASSIGN_OR_RETURN(bool add,
                             Get<bool>(j, "add_prefix_space", true, component));
    return add ? PrependScheme::kAlways : PrependScheme::kNever;
  }

  absl::Status Normalizers(const json& j, BpeTokenizerSpec& spec) const {
    if (j.is_null()) return absl::OkStatus();
    TEXTGEN_ASSIGN_OR_RETURN(std::string type, TypeOf(j, "normalizer"));
    NormalizerSpec n;
    if (type == "Sequence") {
      return EachInSequence(
          j, "normalizer", "normalizers",
          [&](const json& child) { return Normalizers(child, spec); });
    } else if (type == "NFC") {
      n.kind = NormalizerSpec::Kind::kNfc;
    } else if (type == "Prepend") {
      n.kind = NormalizerSpec::Kind::kPrepend;
      TEXTGEN_ASSIGN_OR_RETURN(
          n.content, Get<std::string>(j, "prepend", "", "normalizer Prepend"));
    } else if (type == "Replace") {
      n.kind = NormalizerSpec::Kind::kReplace;
      TEXTGEN_RETURN_IF_ERROR(
          Pattern(j, "normalizer Replace", n.pattern, n.pattern_is_regex));
      TEXTGEN_ASSIGN_OR_RETURN(
          n.content, Get<std::string>(j, "content", "", "normalizer Replace"));
    } else {
      return Unsupported("normalizer", type);
    }
    spec.normalizers.push_back(std::move(n));
    return absl::OkStatus();
  }

  absl::Status PreTokenizers(const json& j, BpeTokenizerSpec& spec) const {
    if (j.is_null()) return absl::OkStatus();
    TEXTGEN_ASSIGN_OR_RETURN(std::string type, TypeOf(j, "pre_tokenizer"));
    PreTokenizerSpec p;
    if (type == "Sequence") {
      return EachInSequence(
          j, "pre_tokenizer", "pretokenizers",
          [&](const json& child) { return PreTokenizers(child, spec); });
    } else if (type == "ByteLevel") {
      p.kind = PreTokenizerSpec::Kind::kByteLevel;
      TEXTGEN_ASSIGN_OR_RETURN(
          p.add_prefix_space,
          Get<bool>(j, "add_prefix_space", true, "pre_tokenizer ByteLevel"));
      TEXTGEN_ASSIGN_OR_RETURN(
          p.use_regex,
          Get<bool>(j, "use_regex", true, "pre_tokenizer ByteLevel"));
    } else if (type == "Split") {
      p.kind = PreTokenizerSpec::Kind::kSplit;
      TEXTGEN_RETURN_IF_ERROR(
          Pattern(j, "pre_tokenizer Split", p.pattern, p.pattern_is_regex));
      TEXTGEN_ASSIGN_OR_RETURN(
          std::string behavior,
          Get<std::string>(j, "behavior", "", "pre_tokenizer Split"));
      if (behavior == "Removed") {
        p.behavior = SplitBehavior::kRemoved;
      } else if (behavior == "Isolated") {
        p.behavior = SplitBehavior::kIsolated;
      } else if (behavior == "MergedWithPrevious") {
        p.behavior = SplitBehavior::kMergedWithPrevious;
      } else if (behavior == "MergedWithNext") {
        p.behavior = SplitBehavior::kMergedWithNext;
      } else if (behavior == "Contiguous") {
        p.behavior = SplitBehavior::kContiguous;
      } else {
        return Error("pre_tokenizer Split: behavior \"", behavior,
                     "\" is not supported");
      }
      TEXTGEN_ASSIGN_OR_RETURN(
          p.invert, Get<bool>(j, "invert", false, "pre_tokenizer Split"));
    } else if (type == "Metaspace") {
      p.kind = PreTokenizerSpec::Kind::kMetaspace;
      TEXTGEN_ASSIGN_OR_RETURN(p.replacement,
                               Get<std::string>(j, "replacement", kMetaspace,
                                                "pre_tokenizer Metaspace"));
      TEXTGEN_ASSIGN_OR_RETURN(p.prepend_scheme,
                               Scheme(j, "pre_tokenizer Metaspace"));
      TEXTGEN_ASSIGN_OR_RETURN(
          p.split, Get<bool>(j, "split", true, "pre_tokenizer Metaspace"));
    } else {
      return Unsupported("pre_tokenizer", type);
    }
    spec.pre_tokenizers.push_back(std::move(p));
    return absl::OkStatus();
  }

  absl::Status Decoders(const json& j, BpeTokenizerSpec& spec) const {
    if (j.is_null()) return absl::OkStatus();
    TEXTGEN_ASSIGN_OR_RETURN(std::string type, TypeOf(j, "decoder"));
    TokenDecoderSpec d;
    if (type == "Sequence") {
      return EachInSequence(j, "decoder", "decoders", [&](const json& child) {
        return Decoders(child, spec);
      });
    } else if (type == "ByteLevel") {
      d.kind = TokenDecoderSpec::Kind::kByteLevel;
    } else if (type == "ByteFallback") {
      d.kind = TokenDecoderSpec::Kind::kByteFallback;
    } else if (type == "Fuse") {
      d.kind = TokenDecoderSpec::Kind::kFuse;
    } else if (type == "Strip") {
      d.kind = TokenDecoderSpec::Kind::kStrip;
      TEXTGEN_ASSIGN_OR_RETURN(
          d.content, Get<std::string>(j, "content", " ", "decoder Strip"));
      TEXTGEN_ASSIGN_OR_RETURN(d.start,
                               Get<int>(j, "start", 0, "decoder Strip"));
      TEXTGEN_ASSIGN_OR_RETURN(d.stop, Get<int>(j, "stop", 0, "decoder Strip"));
      if (d.start < 0 || d.stop < 0) {
        return Error("decoder Strip: start and stop must be >= 0");
      }
    } else if (type == "Replace") {
      d.kind = TokenDecoderSpec::Kind::kReplace;
      TEXTGEN_RETURN_IF_ERROR(
          Pattern(j, "decoder Replace", d.pattern, d.pattern_is_regex));
      TEXTGEN_ASSIGN_OR_RETURN(
          d.content, Get<std::string>(j, "content", "", "decoder Replace"));
    } else if (type == "Metaspace") {
      d.kind = TokenDecoderSpec::Kind::kMetaspace;
      TEXTGEN_ASSIGN_OR_RETURN(
          d.replacement,
          Get<std::string>(j, "replacement", kMetaspace, "decoder Metaspace"));
      TEXTGEN_ASSIGN_OR_RETURN(d.prepend_scheme,
                               Scheme(j, "decoder Metaspace"));
    } else {
      return Unsupported("decoder", type);
    }
    spec.decoders.push_back(std::move(d));
    return absl::OkStatus();
  }

  // The token the single-sequence template puts first, if it does; only the
  // BOS matters, as Encode adds nothing.
  absl::Status PostProcessor(const json& j, std::string& template_bos) const {
    if (j.is_null()) return absl::OkStatus();
    TEXTGEN_ASSIGN_OR_RETURN(std::string type, TypeOf(j, "post_processor"));
    if (type == "Sequence") {
      return EachInSequence(j, "post_processor", "processors",
                            [&](const json& child) {
                              return PostProcessor(child, template_bos);
                            });
    }
    if (type == "ByteLevel") return absl::OkStatus();  // Offsets only.
    if (type != "TemplateProcessing") {
      return Unsupported("post_processor", type);
    }
    auto single = j.find("single");
    if (single == j.end() || !single->is_array() || single->empty()) {
      return Error("post_processor TemplateProcessing has no \"single\"");
    }
    const json& first = (*single)[0];
    if (first.is_object() && first.contains("SpecialToken") &&
        first["SpecialToken"].is_object() &&
        first["SpecialToken"].contains("id") &&
        first["SpecialToken"]["id"].is_string()) {
      template_bos = first["SpecialToken"]["id"].get<std::string>();
    }
    return absl::OkStatus();
  }

  absl::Status Model(const json& m, BpeTokenizerSpec& spec) const {
    if (!m.is_object()) return Error("\"model\" must be an object");
    const std::string type = m.contains("type") && m["type"].is_string()
                                 ? m["type"].get<std::string>()
                                 : "BPE";
    if (type != "BPE") return Unsupported("model", type);
    if (auto d = m.find("dropout");
        d != m.end() && !d->is_null() &&
        !(d->is_number() && d->get<double>() == 0.0)) {
      return Error("model BPE: dropout is not supported (it samples)");
    }
    auto vocab = m.find("vocab");
    if (vocab == m.end() || !vocab->is_object() || vocab->empty()) {
      return Error("model BPE: \"vocab\" must be a non-empty object");
    }
    int64_t max_id = -1;
    for (const auto& [token, id] : vocab->items()) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
          id.get<int64_t>() > (1 << 24)) {
        return Error("model BPE: token \"", token, "\" has id ", id.dump(),
                     ", not an integer in 0..2^24");
      }
      max_id = std::max(max_id, id.get<int64_t>());
    }
    spec.vocab.assign(max_id + 1, "");
    for (const auto& [token, id] : vocab->items()) {
      std::string& slot = spec.vocab[id.get<int64_t>()];
      if (!slot.empty()) {
        return Error("model BPE: id ", id.get<int64_t>(), " is used twice");
      }
      if (token.empty()) return Error("model BPE: a token is empty");
      slot = token;
    }
    auto merges = m.find("merges");
    if (merges != m.end() && !merges->is_null()) {
      if (!merges->is_array()) {
        return Error("model BPE: \"merges\" must be a list");
      }
      spec.merges.reserve(merges->size());
      for (const json& merge : *merges) {
        if (merge.is_string()) {
          const std::string s = merge.get<std::string>();
          const size_t space = s.find(' ');
          if (space == s.npos || s.find(' ', space + 1) != s.npos) {
            return Error("model BPE: merge \"", s,
                         "\" is not two tokens separated by one space");
          }
          spec.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
        } else if (merge.is_array() && merge.size() == 2 &&
                   merge[0].is_string() && merge[1].is_string()) {
          spec.merges.emplace_back(merge[0].get<std::string>(),
                                   merge[1].get<std::string>());
        } else {
          return Error("model BPE: merge ", merge.dump(),
                       " is neither \"a b\" nor [\"a\", \"b\"]");
        }
      }
    }
    TEXTGEN_ASSIGN_OR_RETURN(spec.unk_token,
                             Get<std::string>(m, "unk_token", "", "model BPE"));
    TEXTGEN_ASSIGN_OR_RETURN(spec.byte_fallback,
                             Get<bool>(m, "byte_fallback", false, "model BPE"));
    TEXTGEN_ASSIGN_OR_RETURN(spec.fuse_unk,
                             Get<bool>(m, "fuse_unk", false, "model BPE"));
    TEXTGEN_ASSIGN_OR_RETURN(spec.ignore_merges,
                             Get<bool>(m, "ignore_merges", false, "model BPE"));
    TEXTGEN_ASSIGN_OR_RETURN(
        spec.continuing_subword_prefix,
        Get<std::string>(m, "continuing_subword_prefix", "", "model BPE"));
    TEXTGEN_ASSIGN_OR_RETURN(
        spec.end_of_word_suffix,
        Get<std::string>(m, "end_of_word_suffix", "", "model BPE"));
    return absl::OkStatus();
  }

  absl::Status AddedTokens(const json& j, BpeTokenizerSpec& spec) const {
    if (j.is_null()) return absl::OkStatus();
    if (!j.is_array()) return Error("\"added_tokens\" must be a list");
    for (const json& a : j) {
      if (!a.is_object())
        return Error("added token ", a.dump(), " is not an object");
      AddedToken t;
      TEXTGEN_ASSIGN_OR_RETURN(t.id, Get<int>(a, "id", -1, "added_tokens"));
      TEXTGEN_ASSIGN_OR_RETURN(
          t.content, Get<std::string>(a, "content", "", "added_tokens"));
      TEXTGEN_ASSIGN_OR_RETURN(t.special,
                               Get<bool>(a, "special", false, "added_tokens"));
      TEXTGEN_ASSIGN_OR_RETURN(
          t.single_word, Get<bool>(a, "single_word", false, "added_tokens"));
      TEXTGEN_ASSIGN_OR_RETURN(t.lstrip,
                               Get<bool>(a, "lstrip", false, "added_tokens"));
      TEXTGEN_ASSIGN_OR_RETURN(t.rstrip,
                               Get<bool>(a, "rstrip", false, "added_tokens"));
      TEXTGEN_ASSIGN_OR_RETURN(
          t.normalized, Get<bool>(a, "normalized", !t.special, "added_tokens"));
      if (t.id < 0 || t.id > (1 << 24)) {
        return Error("added token \"", t.content, "\" has no valid id");
      }
      spec.added_tokens.push_back(std::move(t));
    }
    return absl::OkStatus();
  }

 private:
  std::string source_;
};

// A config's token: "text", {"content": "text", ...} or null.
std::string TokenText(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j["content"].is_string()) {
    return j["content"].get<std::string>();
  }
  return "";
}

// The id of a token's text: added tokens first, then the vocabulary.
int IdOfText(const BpeTokenizerSpec& spec, const std::string& text) {
  if (text.empty()) return -1;
  for (const AddedToken& a : spec.added_tokens) {
    if (a.content == text) return a.id;
  }
  for (size_t id = 0; id < spec.vocab.size(); ++id) {
    if (spec.vocab[id] == text) return static_cast<int>(id);
  }
  return -1;
}

absl::StatusOr<json> ParseObject(std::string_view text,
                                 const std::string& source) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not valid JSON"));
  }
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": expected a JSON object"));
  }
  return j;
}

// BOS and EOS as transformers decides them (see the header), from the
// configs' contents ("" when absent) and the token the post_processor's
// template puts first ("" if none).
absl::Status SetSequenceBoundaries(std::string_view tokenizer_config,
                                   std::string_view generation_config,
                                   const std::string& template_bos,
                                   BpeTokenizerSpec& spec) {
  json config = json::object(), generation = json::object();
  if (!tokenizer_config.empty()) {
    TEXTGEN_ASSIGN_OR_RETURN(
        config, ParseObject(tokenizer_config, "tokenizer_config.json"));
  }
  if (!generation_config.empty()) {
    TEXTGEN_ASSIGN_OR_RETURN(
        generation, ParseObject(generation_config, "generation_config.json"));
  }
  bool add_bos = !template_bos.empty();
  if (auto it = config.find("add_bos_token");
      it != config.end() && it->is_boolean()) {
    add_bos = it->get<bool>();
  }
  if (add_bos) {
    int bos = IdOfText(spec, TokenText(config.value("bos_token", json())));
    if (bos < 0) bos = IdOfText(spec, template_bos);
    if (bos < 0) {
      if (auto it = generation.find("bos_token_id"); it != generation.end()) {
        bos = JsonInt(*it).value_or(-1);
      }
    }
    if (bos < 0) {
      return absl::InvalidArgumentError(
          "tokenizer_config.json: add_bos_token is true but no BOS token is "
          "named (bos_token, the post_processor or generation_config.json's "
          "bos_token_id)");
    }
    spec.bos_id = bos;
  }
  if (const int eos =
          IdOfText(spec, TokenText(config.value("eos_token", json())));
      eos >= 0) {
    spec.eos_ids.push_back(eos);
  }
  if (auto it = generation.find("eos_token_id"); it != generation.end()) {
    const json list = it->is_array() ? *it : json::array({*it});
    for (const json& id : list) {
      if (id.is_null()) continue;
      const std::optional<int> eos_id = JsonInt(id);
      if (!eos_id.has_value()) {
        return absl::InvalidArgumentError(
            absl::StrCat("generation_config.json: eos_token_id ", id.dump(),
                         " is not an id"));
      }
      spec.eos_ids.push_back(*eos_id);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BpeTokenizerSpec> ParseTokenizerJson(
    std::string_view tokenizer_json, const std::string& source,
    std::string_view tokenizer_config, std::string_view generation_config) {
  TEXTGEN_ASSIGN_OR_RETURN(json root, ParseObject(tokenizer_json, source));
  Parser parser(source);
  BpeTokenizerSpec spec;
  spec.source = source;
  if (!root.contains("model")) return parser.Error("has no \"model\"");
  TEXTGEN_RETURN_IF_ERROR(parser.Model(root["model"], spec));
  TEXTGEN_RETURN_IF_ERROR(
      parser.AddedTokens(root.value("added_tokens", json()), spec));
  TEXTGEN_RETURN_IF_ERROR(
      parser.Normalizers(root.value("normalizer", json()), spec));
  TEXTGEN_RETURN_IF_ERROR(
      parser.PreTokenizers(root.value("pre_tokenizer", json()), spec));
  TEXTGEN_RETURN_IF_ERROR(parser.Decoders(root.value("decoder", json()), spec));
  std::string template_bos;
  TEXTGEN_RETURN_IF_ERROR(
      parser.PostProcessor(root.value("post_processor", json()), template_bos));
  // truncation and padding are ignored: transformers turns them off too
  // unless a call asks for them.

  TEXTGEN_RETURN_IF_ERROR(SetSequenceBoundaries(
      tokenizer_config, generation_config, template_bos, spec));
  return spec;
}

absl::StatusOr<std::unique_ptr<BpeTokenizer>> LoadTokenizerJson(
    const std::string& path) {
  TEXTGEN_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  auto read_if_there = [&](const char* name) -> absl::StatusOr<std::string> {
    const std::string p = (dir / name).string();
    std::error_code ec;
    if (!std::filesystem::is_regular_file(p, ec)) return std::string();
    return ReadFileToString(p);
  };
  TEXTGEN_ASSIGN_OR_RETURN(std::string config,
                           read_if_there("tokenizer_config.json"));
  TEXTGEN_ASSIGN_OR_RETURN(std::string generation,
                           read_if_there("generation_config.json"));
  // Without generation_config.json, transformers takes bos_token_id and
  // eos_token_id from config.json (GenerationConfig.from_model_config).
  if (generation.empty()) {
    TEXTGEN_ASSIGN_OR_RETURN(generation, read_if_there("config.json"));
  }
  TEXTGEN_ASSIGN_OR_RETURN(BpeTokenizerSpec spec,
                           ParseTokenizerJson(text, path, config, generation));
  return BpeTokenizer::Create(std::move(spec));
}

}  // namespace textgen
