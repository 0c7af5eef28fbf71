#include "server/http/openai_response.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "server/http/json_dump.h"

namespace textgen {
namespace {

namespace pb = ::textgen::v1;
using Json = nlohmann::json;

std::string DataEvent(const Json& json) {
  return absl::StrCat("data: ", DumpJson(json), "\n\n");
}

// `text` as a JSON string, as DumpJson would write it: printable ASCII as
// is (quote and backslash escaped, control characters as \u00XX) without a
// JSON value per token; anything else through DumpJson, for its replacement
// of invalid UTF-8.
void AppendJsonString(absl::string_view text, std::string& out) {
  const bool ascii = std::all_of(text.begin(), text.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x80;
  });
  if (!ascii) {
    out += DumpJson(Json(std::string(text)));
    return;
  }
  out += '"';
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppend(&out, "\\u00", absl::Hex(c, absl::kZeroPad2));
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

}  // namespace

CompletionBuilder::CompletionBuilder(std::string id, std::string model,
                                     int64_t created, bool logprobs,
                                     bool include_usage, int completions,
                                     int per_prompt)
    : id_(std::move(id)),
      model_(std::move(model)),
      created_(created),
      logprobs_(logprobs),
      include_usage_(include_usage),
      completions_(completions),
      per_prompt_(per_prompt > 0 ? per_prompt : completions) {}

namespace {

// OpenAI's legacy logprobs object for `tokens`: parallel arrays of the
// tokens' texts, log-probabilities (null for a prompt token that was not
// scored: the first one, or any without prompt_logprobs, which is when it has
// no alternatives), alternatives and text offsets (from `offset`).
Json LogprobsJson(const std::vector<TokenEvent>& tokens, size_t offset) {
  Json out = {{"tokens", Json::array()},
              {"token_logprobs", Json::array()},
              {"top_logprobs", Json::array()},
              {"text_offset", Json::array()}};
  for (const TokenEvent& token : tokens) {
    out["tokens"].push_back(token.text);
    const bool scored = !token.is_prompt || !token.top_logprobs.empty();
    out["token_logprobs"].push_back(scored ? Json(token.logprob)
                                           : Json(nullptr));
    if (!scored) {
      out["top_logprobs"].push_back(nullptr);
    } else {
      Json top = Json::object();
      for (const TokenLogprob& alt : token.top_logprobs) {
        // Two ids with one text keep the likelier (listed first).
        if (!top.contains(alt.text)) top[alt.text] = alt.logprob;
      }
      out["top_logprobs"].push_back(std::move(top));
    }
    out["text_offset"].push_back(offset);
    offset += token.text.size();
  }
  return out;
}

// What every completion object and chunk starts with.
Json Envelope(const std::string& id, int64_t created,
              const std::string& model) {
  return {{"id", id},
          {"object", "text_completion"},
          {"created", created},
          {"model", model}};
}

}  // namespace

Json UsageJson(const Usage& usage) {
  // An encoder-decoder model's `prompt` was its source: that is what the
  // client sent (the decoder's [BOS] start is the server's business).
  const int prompt =
      usage.source_tokens > 0 ? usage.source_tokens : usage.prompt_tokens;
  return {{"prompt_tokens", prompt},
          {"completion_tokens", usage.generated_tokens},
          {"total_tokens", prompt + usage.generated_tokens}};
}

std::string CompletionBuilder::Event(const TokenEvent& token) {
  Json choice = {{"index", token.completion_index},
                 {"text", token.text},
                 {"logprobs", nullptr},
                 {"finish_reason", nullptr},
                 // textgen's extra: the token behind the text (ids are what
                 // the gRPC API reports; text alone can be empty).
                 {"token_ids", {token.id}}};
  if (logprobs_) choice["logprobs"] = LogprobsJson({token}, 0);
  // textgen's extra with a constraint: how many tokens it allowed here.
  if (token.allowed_tokens >= 0)
    choice["allowed_tokens"] = token.allowed_tokens;
  Json chunk = Envelope(id_, created_, model_);
  chunk["choices"] = Json::array({std::move(choice)});
  if (!token.attention.empty()) {
    Json rows = Json::array();
    for (const AttentionRow& row : token.attention) {
      Json weights = Json::array();
      for (float w : row.weights) weights.push_back(RoundWeight(w));
      Json out = {{"layer", row.layer},
                  {"head", row.head},
                  {"weights", std::move(weights)}};
      // Cross rows (encoder-decoder models) weigh the source's tokens.
      if (row.kind == AttentionKind::kCross) out["kind"] = "cross";
      rows.push_back(std::move(out));
    }
    chunk["choices"][0]["attention"] = std::move(rows);
    chunk["choices"][0]["position"] = token.position;
  }
  if (include_usage_) chunk["usage"] = nullptr;
  return DataEvent(chunk);
}

bool CompletionBuilder::Finish(const FinishEvent& finish) {
  finishes_.push_back(finish);
  return done();
}

Usage TotalUsage(const std::vector<FinishEvent>& finishes, int per_prompt) {
  Usage total;
  for (const FinishEvent& f : finishes) {
    if (f.completion_index % std::max(per_prompt, 1) == 0) {
      total.prompt_tokens += f.usage.prompt_tokens;
      total.source_tokens += f.usage.source_tokens;
    }
    total.generated_tokens += f.usage.generated_tokens;
  }
  return total;
}

std::string CompletionBuilder::FinishEvents(const FinishEvent& finish) {
  Finish(finish);
  Json last = Envelope(id_, created_, model_);
  last["seed"] = finish.seed;
  last["choices"] =
      Json::array({Json{{"index", finish.completion_index},
                        {"text", ""},
                        {"logprobs", nullptr},
                        {"finish_reason", OpenAiFinishReason(finish.reason)}}});
  if (include_usage_) last["usage"] = nullptr;
  std::string out = DataEvent(last);
  if (!done()) return out;
  if (include_usage_) {
    Json usage = Envelope(id_, created_, model_);
    usage["choices"] = Json::array();
    usage["usage"] = UsageJson(TotalUsage(finishes_, per_prompt_));
    absl::StrAppend(&out, DataEvent(usage));
  }
  absl::StrAppend(&out, "data: [DONE]\n\n");
  return out;
}

void CompletionBuilder::Add(const TokenEvent& token) {
  if (token.completion_index >= static_cast<int>(tokens_.size())) {
    tokens_.resize(token.completion_index + 1);
  }
  std::vector<TokenEvent>& tokens = tokens_[token.completion_index];
  tokens.push_back(token);
  tokens.back().attention.clear();  // Not part of the non-streamed reply.
}

std::string CompletionBuilder::Response() const {
  Json choices = Json::array();
  for (int i = 0; i < completions_; ++i) {
    // The engine sends an echoed prompt once, with its prompt's first
    // completion; every choice of that prompt starts with it, as OpenAI's do.
    std::vector<TokenEvent> tokens;
    const int first = i - i % per_prompt_;
    if (i != first && first < static_cast<int>(tokens_.size())) {
      for (const TokenEvent& t : tokens_[first]) {
        if (t.is_prompt) tokens.push_back(t);
      }
    }
    if (i < static_cast<int>(tokens_.size())) {
      tokens.insert(tokens.end(), tokens_[i].begin(), tokens_[i].end());
    }
    std::string text;
    Json ids = Json::array();
    for (const TokenEvent& token : tokens) {
      text += token.text;
      ids.push_back(token.id);
    }
    const FinishEvent* finish = nullptr;
    for (const FinishEvent& f : finishes_) {
      if (f.completion_index == i) finish = &f;
    }
    Json choice = {{"index", i},
                   {"text", std::move(text)},
                   {"logprobs", nullptr},
                   {"finish_reason",
                    finish != nullptr ? Json(OpenAiFinishReason(finish->reason))
                                      : Json(nullptr)},
                   {"token_ids", std::move(ids)}};
    if (logprobs_) {
      // The tokens of a stop string carry none of the text (the string is
      // cut): they are left out of logprobs, as OpenAI and vLLM leave them.
      size_t scored = tokens.size();
      if (finish != nullptr && finish->reason == FinishReason::kStop) {
        while (scored > 0 && !tokens[scored - 1].is_prompt &&
               tokens[scored - 1].text.empty()) {
          --scored;
        }
      }
      choice["logprobs"] = LogprobsJson(
          std::vector<TokenEvent>(tokens.begin(), tokens.begin() + scored), 0);
    }
    choices.push_back(std::move(choice));
  }
  Json response = Envelope(id_, created_, model_);
  // A prompt's completion j used seed + j.
  response["seed"] = finishes_.empty()
                         ? 0
                         : finishes_.front().seed -
                               finishes_.front().completion_index % per_prompt_;
  response["choices"] = std::move(choices);
  response["usage"] = UsageJson(TotalUsage(finishes_, per_prompt_));
  return DumpJson(response);
}

const char* OpenAiFinishReason(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
    case FinishReason::kEos:
      return "stop";
    case FinishReason::kLength:
    case FinishReason::kContextFull:
      return "length";
  }
  return "stop";
}

std::string AttentionJson(
    const std::vector<pb::DebugAttentionResponse>& responses,
    const pb::ModelInfo& info, AttentionEncoding encoding) {
  AttentionData data;
  data.model = info.name();
  // The model's counts: a DebugAttentionResponse's are those of the maps it
  // carries.
  data.num_layers = info.num_layers();
  data.num_heads = info.num_heads();
  data.num_encoder_layers = info.num_encoder_layers();
  for (const pb::DebugAttentionResponse& response : responses) {
    for (const pb::PromptToken& token : response.tokens()) {
      data.token_ids.push_back(token.id());
      data.token_texts.push_back(token.text());
    }
    for (const pb::PromptToken& token : response.source_tokens()) {
      data.source_ids.push_back(token.id());
      data.source_texts.push_back(token.text());
    }
  }
  // The pieces (whole rows from first_query on) into one map per (kind,
  // layer, head), in the order the maps came: T×T, S×S or T×S by kind.
  const size_t t = data.token_ids.size(), s = data.source_ids.size();
  std::map<std::tuple<int, int, int>, size_t> index;
  for (const pb::DebugAttentionResponse& response : responses) {
    for (const pb::AttentionMap& map : response.maps()) {
      const bool encoder = map.kind() == pb::ATTENTION_KIND_ENCODER_SELF;
      const bool cross = map.kind() == pb::ATTENTION_KIND_CROSS;
      const size_t rows = encoder ? s : t;
      const size_t keys = encoder || cross ? s : t;
      auto [it, inserted] = index.try_emplace(
          {map.kind(), map.layer(), map.head()}, data.maps.size());
      if (inserted) {
        data.maps.push_back({map.layer(), map.head(),
                             encoder ? "encoder_self"
                             : cross ? "cross"
                                     : "decoder_self",
                             std::vector<float>(rows * keys)});
      }
      std::vector<float>& weights = data.maps[it->second].weights;
      const size_t offset = static_cast<size_t>(map.first_query()) * keys;
      for (int i = 0; i < map.weights_size() && offset + i < weights.size();
           ++i) {
        weights[offset + i] = map.weights(i);
      }
    }
  }
  return AttentionDataJson(data, encoding);
}

namespace {

Json ModelObject(const pb::ModelInfo& info, int64_t created) {
  return {{"id", info.name()},
          {"object", "model"},
          {"created", created},
          {"owned_by", "textgen"},
          // vLLM's name for the context, which clients read.
          {"max_model_len", info.context_length()},
          {"architecture", info.architecture()},
          // For the attention explorer (and any client that draws maps).
          {"num_layers", info.num_layers()},
          {"num_heads", info.num_heads()},
          // Encoder-decoder models: a completion's prompt is the source.
          {"num_encoder_layers", info.num_encoder_layers()},
          {"max_attention_tokens", info.limits().max_attention_tokens()},
          {"debug_attention", info.limits().debug_attention_enabled()},
          {"tokenizer", info.tokenizer()},
          // How much of the vocabulary a constraint masks (the explorer).
          {"vocab_size", info.vocab_size()},
          // A chat template is loaded: /v1/chat/completions answers.
          {"chat", info.chat()}};
}

}  // namespace

std::string ModelJson(const pb::ModelInfo& info, int64_t created) {
  return DumpJson(ModelObject(info, created));
}

std::string ModelsJson(const pb::ModelInfo& info, int64_t created) {
  Json out = {{"object", "list"}, {"data", {ModelObject(info, created)}}};
  return DumpJson(out);
}

std::string DetokenizeJson(const std::string& text) {
  return DumpJson(Json{{"prompt", text}});
}

std::string TokenizerInfoJson(const pb::ModelInfo& info,
                              const TextServiceOptions& options) {
  auto or_null = [](const std::string& s) {
    return s.empty() ? Json(nullptr) : Json(s);
  };
  return DumpJson(Json{{"tokenizer_class", info.tokenizer()},
                       {"bos_token", or_null(options.bos_token)},
                       {"eos_token", or_null(options.eos_token)},
                       {"pad_token", nullptr},
                       {"model_max_length", info.context_length()},
                       {"chat_template", or_null(options.chat_template)}});
}

std::string TokenizeJson(const pb::TokenizeResponse& response,
                         int max_model_len) {
  // Written out directly: as a JSON tree, each of up to 256 Ki tokens was two
  // nlohmann values (and a string), ~60 MB for a reply of a few MB, which
  // the HTTP threads' malloc arenas then kept.
  std::string out;
  out.reserve(64 + static_cast<size_t>(response.tokens_size()) * 16);
  absl::StrAppend(&out, "{\"count\":", response.tokens_size(),
                  ",\"max_model_len\":", max_model_len, ",\"tokens\":[");
  for (int i = 0; i < response.tokens_size(); ++i) {
    if (i > 0) out += ',';
    absl::StrAppend(&out, response.tokens(i).id());
  }
  out += "],\"token_strs\":[";
  for (int i = 0; i < response.tokens_size(); ++i) {
    if (i > 0) out += ',';
    AppendJsonString(response.tokens(i).text(), out);
  }
  out += "]}";
  return out;
}

}  // namespace textgen
