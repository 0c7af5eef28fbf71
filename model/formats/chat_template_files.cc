#include "model/formats/chat_template_files.h"

#include <filesystem>
#include <fstream>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "model/formats/gguf.h"
#include "nlohmann/json.hpp"

namespace textgen {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

bool IsFile(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

absl::StatusOr<Json> ReadJson(const fs::path& path) {
  TEXTGEN_ASSIGN_OR_RETURN(const std::string text,
                           ReadFileToString(path.string()));
  Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path.string(), ": not a JSON object"));
  }
  return json;
}

// A "chat_template" value: a string, or transformers' list of named ones.
absl::Status AddTemplates(const Json& value, const std::string& origin,
                          std::map<std::string, std::string>& out) {
  if (value.is_string()) {
    out["default"] = value.get<std::string>();
    return absl::OkStatus();
  }
  if (value.is_array()) {
    for (const Json& entry : value) {
      if (!entry.is_object() || !entry.contains("name") ||
          !entry["name"].is_string() || !entry.contains("template") ||
          !entry["template"].is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(
            origin,
            ": chat_template must be a string or a list of {\"name\", "
            "\"template\"} objects"));
      }
      out[entry["name"].get<std::string>()] =
          entry["template"].get<std::string>();
    }
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      origin, ": chat_template must be a string or a list of templates"));
}

// tokenizer_config.json's "bos_token" / "eos_token": a string or an
// AddedToken object {"content": ...}.
std::string TokenString(const Json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") &&
      (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return "";
}

bool IsGguf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::string(magic, 4) == "GGUF";
}

absl::Status FromGguf(const std::string& path, ChatTemplateFiles& out) {
  TEXTGEN_ASSIGN_OR_RETURN(const GgufFile file, GgufFile::Open(path));
  const bool fill_templates = out.templates.empty();
  for (const GgufKeyValue& kv : file.metadata()) {
    if (!fill_templates) break;
    if (kv.key == "tokenizer.chat_template") {
      TEXTGEN_ASSIGN_OR_RETURN(out.templates["default"],
                               file.GetString(kv.key));
    } else if (absl::StartsWith(kv.key, "tokenizer.chat_template.")) {
      TEXTGEN_ASSIGN_OR_RETURN(
          out.templates[kv.key.substr(sizeof("tokenizer.chat_template.") - 1)],
          file.GetString(kv.key));
    }
  }
  if (fill_templates && !out.templates.empty()) {
    out.origin = absl::StrCat(path, " (tokenizer.chat_template)");
  }
  if (!out.bos_token.empty() || !out.eos_token.empty()) return absl::OkStatus();
  absl::StatusOr<std::vector<absl::string_view>> tokens =
      file.GetStringArray("tokenizer.ggml.tokens");
  if (!tokens.ok()) return absl::OkStatus();  // No vocabulary: no strings.
  auto token_at = [&](const char* key) -> std::string {
    absl::StatusOr<uint64_t> id = file.GetUint(key);
    if (!id.ok() || *id >= tokens->size()) return "";
    return std::string((*tokens)[*id]);
  };
  out.bos_token = token_at("tokenizer.ggml.bos_token_id");
  out.eos_token = token_at("tokenizer.ggml.eos_token_id");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ChatTemplateFiles> FindChatTemplate(
    const std::string& model_path, const std::string& tokenizer_path,
    const std::string& override_path) {
  ChatTemplateFiles out;
  // The directory beside the model's files, where transformers keeps them.
  std::error_code ec;
  std::optional<fs::path> dir;
  if (!tokenizer_path.empty() && !IsGguf(tokenizer_path)) {
    dir = fs::path(tokenizer_path).parent_path();
  } else if (fs::is_directory(model_path, ec)) {
    dir = fs::path(model_path);
  }
  std::optional<Json> config;
  if (dir && IsFile(*dir / "tokenizer_config.json")) {
    TEXTGEN_ASSIGN_OR_RETURN(config, ReadJson(*dir / "tokenizer_config.json"));
    out.bos_token = TokenString(*config, "bos_token");
    out.eos_token = TokenString(*config, "eos_token");
  }

  if (!override_path.empty()) {
    if (!IsFile(override_path)) {
      return absl::NotFoundError(
          absl::StrCat("--chat_template ", override_path, ": no such file"));
    }
    if (absl::EndsWith(override_path, ".json")) {
      TEXTGEN_ASSIGN_OR_RETURN(const Json json, ReadJson(override_path));
      if (!json.contains("chat_template")) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--chat_template ", override_path, ": no \"chat_template\" key"));
      }
      TEXTGEN_RETURN_IF_ERROR(
          AddTemplates(json["chat_template"], override_path, out.templates));
    } else {
      TEXTGEN_ASSIGN_OR_RETURN(out.templates["default"],
                               ReadFileToString(override_path));
    }
    out.origin = override_path;
  } else if (dir && IsFile(*dir / "chat_template.jinja")) {
    const fs::path path = *dir / "chat_template.jinja";
    TEXTGEN_ASSIGN_OR_RETURN(out.templates["default"],
                             ReadFileToString(path.string()));
    out.origin = path.string();
  } else if (dir && IsFile(*dir / "chat_template.json")) {
    const fs::path path = *dir / "chat_template.json";
    TEXTGEN_ASSIGN_OR_RETURN(const Json json, ReadJson(path));
    if (json.contains("chat_template")) {
      TEXTGEN_RETURN_IF_ERROR(
          AddTemplates(json["chat_template"], path.string(), out.templates));
      out.origin = path.string();
    }
  }
  if (out.templates.empty() && config && config->contains("chat_template")) {
    const fs::path path = *dir / "tokenizer_config.json";
    TEXTGEN_RETURN_IF_ERROR(
        AddTemplates((*config)["chat_template"], path.string(), out.templates));
    out.origin = path.string();
  }
  for (const std::string& gguf : {model_path, tokenizer_path}) {
    if (!gguf.empty() && IsFile(gguf) && IsGguf(gguf)) {
      TEXTGEN_RETURN_IF_ERROR(FromGguf(gguf, out));
    }
  }
  return out;
}

}  // namespace textgen
