#include "server/api/tool_calls.h"

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"
#include "model/constraint/json_schema_to_gbnf.h"
#include "model/constraint/regex_to_gbnf.h"

namespace textgen {
namespace {

using Json = nlohmann::ordered_json;

constexpr absl::string_view kHermesOpen = "<tool_call>";
constexpr absl::string_view kHermesClose = "</tool_call>";
constexpr absl::string_view kMistralMarker = "[TOOL_CALLS]";
constexpr absl::string_view kPythonTag = "<|python_tag|>";
constexpr absl::string_view kMistralArgs = "[ARGS]";
constexpr absl::string_view kMistralCallId = "[CALL_ID]";
// The sentence every Llama 3.1 / 3.2 / 3.3 template writes when it has tools.
// `"parameters"` alone is not enough: Command R's template says it too and
// writes its calls in an "Action:" block.
constexpr absl::string_view kLlama3Instruction =
    "{\"name\": function name, \"parameters\"";

// Mistral's call ids: nine letters or digits (its templates check).
constexpr absl::string_view kMistralIdGbnf = "[a-zA-Z0-9]{9}";

bool IsMistral(ToolCallFormat format) {
  return format == ToolCallFormat::kMistral ||
         format == ToolCallFormat::kMistralArgs;
}

// A stable id from the request's id and the call's index (FNV-1a): OpenAI's
// "call_" and 24 alphanumerics, or Mistral's 9 (its templates check).
std::string CallId(absl::string_view seed, int index, ToolCallFormat format) {
  uint64_t h = 1469598103934665603ull;
  for (char c : absl::StrCat(seed, "/", index)) {
    h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  }
  static constexpr char kDigits[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  const int n = IsMistral(format) ? 9 : 24;
  std::string out;
  for (int i = 0; i < n; ++i) {
    out += kDigits[h % 62];
    h = h / 62 + (h % 62) * 0x9E3779B97F4A7C15ull;
  }
  return IsMistral(format) ? out : "call_" + out;
}

// {"name": ..., "arguments" (or "parameters"): {...} or its JSON text} as a
// call; false if it is not one.
bool ReadCall(const Json& j, ParsedToolCall& out) {
  if (!j.is_object()) return false;
  const auto name = j.find("name");
  if (name == j.end() || !name->is_string()) return false;
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  Json arguments = Json::object();
  if (args != j.end()) {
    if (args->is_string()) {
      arguments = Json::parse(args->get<std::string>(), nullptr, false);
    } else {
      arguments = *args;
    }
  }
  if (!arguments.is_object()) return false;
  out.name = name->get<std::string>();
  out.arguments = arguments.dump();
  return true;
}

Json ParseJson(absl::string_view text) {
  return Json::parse(text.begin(), text.end(), nullptr, false);
}

std::string Trimmed(absl::string_view s) {
  return std::string(absl::StripAsciiWhitespace(s));
}

// A function name as OpenAI allows them ([a-zA-Z0-9_-]+, and '.' some
// servers use): in Mistral's [ARGS] notation the name is bare text, so
// anything else (prose, a newline) means the text is not a call.
bool IsFunctionName(absl::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '-' && c != '.') {
      return false;
    }
  }
  return true;
}

// `calls` as "[TOOL_CALLS]name[ARGS]{...}" repeated (a "[CALL_ID]id" before
// [ARGS], as the template writes past calls, is skipped); false unless all
// of it is calls.
bool ReadMistralArgsCalls(absl::string_view calls,
                          std::vector<ParsedToolCall>& out) {
  while (!calls.empty()) {
    if (!absl::ConsumePrefix(&calls, kMistralMarker)) return false;
    const size_t next = calls.find(kMistralMarker);
    absl::string_view piece = calls.substr(0, next);
    calls.remove_prefix(piece.size());
    const size_t args = piece.find(kMistralArgs);
    if (args == absl::string_view::npos) return false;
    absl::string_view name = piece.substr(0, args);
    name = name.substr(0, name.find(kMistralCallId));
    ParsedToolCall call;
    if (!IsFunctionName(name) ||
        !ReadCall(Json{{"name", std::string(name)},
                       {"arguments",
                        ParseJson(piece.substr(args + kMistralArgs.size()))}},
                  call)) {
      return false;
    }
    out.push_back(std::move(call));
  }
  return !out.empty();
}

}  // namespace

ToolCallFormat DetectToolCallFormat(absl::string_view source) {
  if (absl::StrContains(source, kHermesOpen)) return ToolCallFormat::kHermes;
  if (absl::StrContains(source, kMistralMarker)) {
    return absl::StrContains(source, kMistralArgs)
               ? ToolCallFormat::kMistralArgs
               : ToolCallFormat::kMistral;
  }
  if (absl::StrContains(source, kPythonTag) ||
      absl::StrContains(source, kLlama3Instruction)) {
    return ToolCallFormat::kLlama3Json;
  }
  return ToolCallFormat::kNone;
}

const char* ToolCallFormatName(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return "hermes";
    case ToolCallFormat::kLlama3Json:
      return "llama3_json";
    case ToolCallFormat::kMistral:
      return "mistral";
    case ToolCallFormat::kMistralArgs:
      return "mistral_args";
    case ToolCallFormat::kNone:
      break;
  }
  return "none";
}

ParsedAnswer ParseToolCalls(absl::string_view answer, ToolCallFormat format,
                            absl::string_view id_seed) {
  ParsedAnswer out;
  auto add = [&](ParsedToolCall call) {
    call.id = CallId(id_seed, static_cast<int>(out.calls.size()), format);
    out.calls.push_back(std::move(call));
  };
  switch (format) {
    case ToolCallFormat::kHermes: {
      size_t pos = 0;
      while (pos < answer.size()) {
        const size_t open = answer.find(kHermesOpen, pos);
        if (open == absl::string_view::npos) break;
        const size_t body = open + kHermesOpen.size();
        const size_t close = answer.find(kHermesClose, body);
        ParsedToolCall call;
        if (close == absl::string_view::npos ||
            !ReadCall(ParseJson(answer.substr(body, close - body)), call)) {
          // Not a call: text, up to and with the marker.
          absl::StrAppend(&out.content, answer.substr(pos, body - pos));
          pos = body;
          continue;
        }
        absl::StrAppend(&out.content, answer.substr(pos, open - pos));
        add(std::move(call));
        pos = close + kHermesClose.size();
      }
      if (pos < answer.size())
        absl::StrAppend(&out.content, answer.substr(pos));
      break;
    }
    case ToolCallFormat::kLlama3Json: {
      absl::string_view body = absl::StripAsciiWhitespace(answer);
      if (absl::StartsWith(body, kPythonTag))
        body.remove_prefix(kPythonTag.size());
      ParsedToolCall call;
      if (ReadCall(ParseJson(body), call)) {
        add(std::move(call));
      } else {
        out.content = std::string(answer);
      }
      break;
    }
    case ToolCallFormat::kMistral: {
      const size_t marker = answer.find(kMistralMarker);
      if (marker == absl::string_view::npos) {
        out.content = std::string(answer);
        break;
      }
      const Json calls =
          ParseJson(answer.substr(marker + kMistralMarker.size()));
      std::vector<ParsedToolCall> parsed;
      bool ok = calls.is_array() && !calls.empty();
      for (size_t i = 0; ok && i < calls.size(); ++i) {
        ParsedToolCall call;
        ok = ReadCall(calls[i], call);
        parsed.push_back(std::move(call));
      }
      if (!ok) {
        out.content = std::string(answer);
        break;
      }
      out.content = std::string(answer.substr(0, marker));
      for (ParsedToolCall& call : parsed) add(std::move(call));
      break;
    }
    case ToolCallFormat::kMistralArgs: {
      const size_t marker = answer.find(kMistralMarker);
      std::vector<ParsedToolCall> parsed;
      if (marker == absl::string_view::npos ||
          !ReadMistralArgsCalls(answer.substr(marker), parsed)) {
        out.content = std::string(answer);
        break;
      }
      out.content = std::string(answer.substr(0, marker));
      for (ParsedToolCall& call : parsed) add(std::move(call));
      break;
    }
    case ToolCallFormat::kNone:
      out.content = std::string(answer);
      break;
  }
  if (!out.calls.empty()) out.content = Trimmed(out.content);
  return out;
}

size_t ToolCallStart(absl::string_view text, ToolCallFormat format) {
  absl::string_view marker;
  switch (format) {
    case ToolCallFormat::kHermes:
      marker = kHermesOpen;
      break;
    case ToolCallFormat::kMistral:
    case ToolCallFormat::kMistralArgs:
      marker = kMistralMarker;
      break;
    case ToolCallFormat::kLlama3Json: {
      // The whole answer is the call: hold it all while it may be one.
      const size_t first = text.find_first_not_of(" \t\r\n");
      if (first == absl::string_view::npos) return 0;
      const absl::string_view rest = text.substr(first);
      if (rest[0] == '{' ||
          absl::StartsWith(kPythonTag, rest.substr(0, kPythonTag.size())) ||
          absl::StartsWith(rest, kPythonTag)) {
        return 0;
      }
      return text.size();
    }
    case ToolCallFormat::kNone:
      return text.size();
  }
  const size_t at = text.find(marker);
  if (at != absl::string_view::npos) return at;
  // A marker cut at the end of the text so far.
  for (size_t n = std::min(marker.size() - 1, text.size()); n > 0; --n) {
    if (absl::EndsWith(text, marker.substr(0, n))) return text.size() - n;
  }
  return text.size();
}

absl::StatusOr<std::string> ToolCallGbnf(const Json& tools,
                                         const ToolChoice& choice,
                                         ToolCallFormat format, bool parallel) {
  if (format == ToolCallFormat::kNone) {
    return absl::InvalidArgumentError(
        "tool_choice: this model's chat template shows no tool-call format, "
        "so a call cannot be required");
  }
  if (!tools.is_array() || tools.empty()) {
    return absl::InvalidArgumentError("tool_choice: needs tools");
  }
  std::string grammar;
  std::vector<std::string> calls;
  bool found = false;
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& tool = tools[i];
    const Json* function = tool.is_object() && tool.contains("function")
                               ? &tool["function"]
                               : nullptr;
    if (function == nullptr || !function->is_object() ||
        !function->contains("name") || !(*function)["name"].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tools[", i,
                       "]: needs {\"type\": \"function\", \"function\": "
                       "{\"name\", \"parameters\"}}"));
    }
    const std::string name = (*function)["name"].get<std::string>();
    if (choice.kind == ToolChoice::kFunction && name != choice.function)
      continue;
    found = true;
    Json schema = Json{{"type", "object"}};
    if (function->contains("parameters") &&
        !(*function)["parameters"].is_null()) {
      schema = (*function)["parameters"];
    }
    JsonSchemaOptions options;
    options.root_rule = absl::StrCat("args-", i);
    options.rule_prefix = absl::StrCat("args-", i, "-");
    absl::StatusOr<std::string> args = JsonSchemaToGbnf(schema, options);
    if (!args.ok()) {
      return absl::Status(
          args.status().code(),
          absl::StrCat("tools[", i, "] (", name,
                       ").function.parameters: ", args.status().message()));
    }
    grammar += *args;
    const std::string quoted = Json(name).dump();
    std::string call;
    switch (format) {
      case ToolCallFormat::kHermes:
        call = absl::StrCat(
            GbnfLiteral(absl::StrCat("<tool_call>\n{\"name\": ", quoted,
                                     ", \"arguments\": ")),
            " ", options.root_rule, " ", GbnfLiteral("}\n</tool_call>"));
        break;
      case ToolCallFormat::kLlama3Json:
        call = absl::StrCat(GbnfLiteral(absl::StrCat("{\"name\": ", quoted,
                                                     ", \"parameters\": ")),
                            " ", options.root_rule, " ", GbnfLiteral("}"));
        break;
      case ToolCallFormat::kMistral:
        // Nemo's template writes each past call's id after its arguments:
        // the model may too.
        call = absl::StrCat(GbnfLiteral(absl::StrCat("{\"name\": ", quoted,
                                                     ", \"arguments\": ")),
                            " ", options.root_rule, " ( ",
                            GbnfLiteral(", \"id\": \""), " ", kMistralIdGbnf,
                            " ", GbnfLiteral("\""), " )? ", GbnfLiteral("}"));
        break;
      case ToolCallFormat::kMistralArgs:
        if (!IsFunctionName(name)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "tools[", i, "] (", name,
              ").function.name: this model's template writes the name bare "
              "([TOOL_CALLS]name[ARGS]), so it must be letters, digits, "
              "'_', '-' or '.'"));
        }
        // Small 3.2's template writes [CALL_ID]id before a past call's
        // [ARGS]: the model may too.
        call = absl::StrCat(GbnfLiteral(absl::StrCat(kMistralMarker, name)),
                            " ( ", GbnfLiteral(std::string(kMistralCallId)),
                            " ", kMistralIdGbnf, " )? ",
                            GbnfLiteral(std::string(kMistralArgs)), " ",
                            options.root_rule);
        break;
      case ToolCallFormat::kNone:
        break;
    }
    calls.push_back(call);
  }
  if (!found) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tool_choice: no tool is named \"", choice.function, "\""));
  }
  std::string root;
  const std::string call =
      absl::StrCat("( ", absl::StrJoin(calls, " | "), " )");
  // Llama 3's JSON notation has one call per answer.
  const bool several = parallel && choice.kind == ToolChoice::kRequired &&
                       format != ToolCallFormat::kLlama3Json;
  switch (format) {
    case ToolCallFormat::kHermes:
      root = several ? absl::StrCat("tool-call ( \"\\n\" tool-call )*")
                     : "tool-call";
      break;
    case ToolCallFormat::kLlama3Json:
      root = "tool-call";
      break;
    case ToolCallFormat::kMistral:
      // Mistral 7B v0.3's template writes "[TOOL_CALLS] [", Nemo's
      // "[TOOL_CALLS][": the model writes what it was taught.
      root = absl::StrCat("\"[TOOL_CALLS]\" \" \"? \"[\" tool-call",
                          several ? " ( \", \" tool-call )*" : "", " \"]\"");
      break;
    case ToolCallFormat::kMistralArgs:
      root = several ? "tool-call ( tool-call )*" : "tool-call";
      break;
    case ToolCallFormat::kNone:
      break;
  }
  return absl::StrCat("root ::= ", root, "\ntool-call ::= ", call, "\n",
                      grammar);
}

}  // namespace textgen
