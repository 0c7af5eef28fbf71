#include "server/http/openai_convert.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "base/json_int.h"
#include "explorer/attention_json.h"
#include "nlohmann/json.hpp"

namespace textgen {
namespace {

namespace pb = ::textgen::v1;
using Json = nlohmann::json;

// Where an error's param travels, from the parser to ErrorJson.
constexpr absl::string_view kParamPayload = "textgen.dev/http/param";

absl::Status Invalid(absl::string_view param, absl::string_view message) {
  absl::Status status =
      absl::InvalidArgumentError(absl::StrCat(param, ": ", message));
  status.SetPayload(kParamPayload, absl::Cord(param));
  return status;
}

absl::StatusOr<Json> ParseObject(absl::string_view body) {
  Json json = Json::parse(body.begin(), body.end(), nullptr,
                          /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return absl::InvalidArgumentError(
        "the request body is not valid JSON (send Content-Type: "
        "application/json and a JSON object)");
  }
  if (!json.is_object()) {
    return absl::InvalidArgumentError("the request body must be a JSON object");
  }
  return json;
}

// `json[name]` if present and not null.
const Json* Field(const Json& json, const char* name) {
  auto it = json.find(name);
  return it == json.end() || it->is_null() ? nullptr : &*it;
}

absl::Status CheckModel(const Json& json, absl::string_view model_name) {
  const Json* model = Field(json, "model");
  if (model == nullptr) return absl::OkStatus();
  if (!model->is_string()) return Invalid("model", "must be a string");
  const std::string& name = model->get_ref<const std::string&>();
  if (name.empty() || name == model_name) return absl::OkStatus();
  absl::Status status = absl::NotFoundError(absl::StrCat(
      "The model `", name, "` does not exist; this server serves `", model_name,
      "` (GET /v1/models)"));
  status.SetPayload(kParamPayload, absl::Cord("model"));
  return status;
}

absl::StatusOr<int> Int(const Json& value, const char* param) {
  if (std::optional<int> i = JsonInt(value)) return *i;
  return Invalid(param, "must be a 32-bit integer");
}

absl::StatusOr<float> Number(const Json& value, const char* param) {
  if (!value.is_number()) return Invalid(param, "must be a number");
  return value.get<float>();
}

absl::StatusOr<bool> Bool(const Json& value, const char* param) {
  if (!value.is_boolean()) return Invalid(param, "must be true or false");
  return value.get<bool>();
}

absl::StatusOr<std::vector<int>> IntList(const Json& value, const char* param) {
  if (!value.is_array()) return Invalid(param, "must be an array of integers");
  std::vector<int> out;
  for (const Json& item : value) {
    absl::StatusOr<int> i = Int(item, param);
    if (!i.ok()) return i.status();
    out.push_back(*i);
  }
  return out;
}

// OpenAI's prompt: a string, an array of token ids, or a one-element array of
// either (a batch of one; larger batches are n > 1 in disguise).
absl::Status ParsePrompt(const Json& json, pb::Prompt& prompt) {
  const Json* value = Field(json, "prompt");
  if (value == nullptr) {
    return Invalid("prompt", "is required (a string or an array of token ids)");
  }
  if (value->is_array() && value->size() == 1 &&
      ((*value)[0].is_string() || (*value)[0].is_array())) {
    value = &(*value)[0];
  }
  if (value->is_string()) {
    prompt.set_text(value->get<std::string>());
    return absl::OkStatus();
  }
  if (value->is_array() && (value->empty() || (*value)[0].is_number())) {
    absl::StatusOr<std::vector<int>> ids = IntList(*value, "prompt");
    if (!ids.ok()) return ids.status();
    prompt.mutable_token_ids()->mutable_ids()->Add(ids->begin(), ids->end());
    // An empty list still selects token_ids, so the engine's "empty" message
    // applies.
    return absl::OkStatus();
  }
  if (value->is_array()) {
    return Invalid("prompt",
                   "a batch of several prompts is not supported; send one "
                   "prompt per request");
  }
  return Invalid("prompt", "must be a string or an array of token ids");
}

// Token texts are whole UTF-8 (or U+FFFD), but a stray byte must not throw
// in a handler: it is written as U+FFFD.
std::string Dump(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string DataEvent(const Json& json) {
  return absl::StrCat("data: ", Dump(json), "\n\n");
}

const char* ErrorType(int http_status) {
  switch (http_status) {
    case 400:
    case 404:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 413:
      return "invalid_request_error";
    case 429:
      return "rate_limit_error";
    case 503:
      return "service_unavailable";
    default:
      return "server_error";
  }
}

}  // namespace

absl::StatusOr<CompletionRequest> ParseCompletionRequest(
    absl::string_view body, absl::string_view model_name,
    bool encoder_decoder) {
  absl::StatusOr<Json> parsed = ParseObject(body);
  if (!parsed.ok()) return parsed.status();
  const Json& json = *parsed;
  if (absl::Status s = CheckModel(json, model_name); !s.ok()) return s;
  CompletionRequest out;
  pb::GenerateRequest& request = out.generate;
  // An encoder-decoder model reads the prompt as its source and answers
  // from its decoder start token.
  if (absl::Status s =
          ParsePrompt(json, encoder_decoder ? *request.mutable_source()
                                            : *request.mutable_prompt());
      !s.ok()) {
    return s;
  }
  if (const Json* n = Field(json, "n")) {
    absl::StatusOr<int> value = Int(*n, "n");
    if (!value.ok()) return value.status();
    // The range is the engine's (--max_completions), checked there.
    request.set_n(*value);
  }
  if (const Json* best_of = Field(json, "best_of")) {
    absl::StatusOr<int> value = Int(*best_of, "best_of");
    if (!value.ok()) return value.status();
    if (*value != 1) return Invalid("best_of", "only 1 is supported");
  }
  if (Field(json, "suffix") != nullptr) {
    return Invalid("suffix", "is not supported (no fill-in-the-middle)");
  }
  if (const Json* bias = Field(json, "logit_bias");
      bias != nullptr && !bias->empty()) {
    return Invalid("logit_bias", "is not supported");
  }
  for (const char* penalty : {"presence_penalty", "frequency_penalty"}) {
    if (const Json* value = Field(json, penalty)) {
      absl::StatusOr<float> p = Number(*value, penalty);
      if (!p.ok()) return p.status();
      if (*p != 0) {
        return Invalid(penalty,
                       "is not supported (textgen has repetition_penalty)");
      }
    }
  }
  std::optional<int> max_tokens;
  if (const Json* value = Field(json, "max_tokens")) {
    absl::StatusOr<int> n = Int(*value, "max_tokens");
    if (!n.ok()) return n.status();
    if (*n < 0) return Invalid("max_tokens", "must be at least 1");
    max_tokens = *n;
  }
  pb::SamplingParams& sampling = *request.mutable_sampling();
  // OpenAI's default temperature is 1; the proto's 0 means greedy, and a
  // client that asks for 0 gets greedy here too.
  sampling.set_temperature(1.0f);
  if (const Json* value = Field(json, "temperature")) {
    absl::StatusOr<float> t = Number(*value, "temperature");
    if (!t.ok()) return t.status();
    sampling.set_temperature(*t);
  }
  if (const Json* value = Field(json, "top_p")) {
    absl::StatusOr<float> p = Number(*value, "top_p");
    if (!p.ok()) return p.status();
    // The proto's 0 means "unset" (1); OpenAI's 0 is not a valid top_p.
    if (*p <= 0) return Invalid("top_p", "must be in (0, 1]");
    sampling.set_top_p(*p);
  }
  if (const Json* value = Field(json, "top_k")) {
    absl::StatusOr<int> k = Int(*value, "top_k");
    if (!k.ok()) return k.status();
    // vLLM's -1 ("all") is the proto's 0.
    sampling.set_top_k(*k == -1 ? 0 : *k);
  }
  if (const Json* value = Field(json, "repetition_penalty")) {
    absl::StatusOr<float> r = Number(*value, "repetition_penalty");
    if (!r.ok()) return r.status();
    if (*r <= 0) return Invalid("repetition_penalty", "must be positive");
    sampling.set_repetition_penalty(*r);
  }
  if (const Json* value = Field(json, "seed")) {
    if (!value->is_number_integer()) {
      return Invalid("seed", "must be an integer");
    }
    sampling.set_seed(value->is_number_unsigned()
                          ? value->get<uint64_t>()
                          : static_cast<uint64_t>(value->get<int64_t>()));
  }
  if (const Json* stop = Field(json, "stop")) {
    if (stop->is_string()) {
      request.add_stop(stop->get<std::string>());
    } else if (stop->is_array()) {
      for (const Json& item : *stop) {
        if (!item.is_string()) {
          return Invalid("stop", "must be a string or an array of strings");
        }
        request.add_stop(item.get<std::string>());
      }
    } else {
      return Invalid("stop", "must be a string or an array of strings");
    }
  }
  if (const Json* value = Field(json, "logprobs")) {
    // OpenAI's legacy `logprobs: true` (from the chat API) counts as 0.
    if (value->is_boolean()) {
      out.logprobs = value->get<bool>();
    } else {
      absl::StatusOr<int> n = Int(*value, "logprobs");
      if (!n.ok()) return n.status();
      // The range is the engine's (top_logprobs), checked there.
      request.set_top_logprobs(*n);
      out.logprobs = true;
    }
  }
  if (const Json* value = Field(json, "echo")) {
    absl::StatusOr<bool> echo = Bool(*value, "echo");
    if (!echo.ok()) return echo.status();
    request.set_echo_prompt(*echo);
  }
  if (encoder_decoder && request.echo_prompt()) {
    return Invalid(
        "echo",
        "is not supported by an encoder-decoder model: its prompt is "
        "the source it reads, which the completion does not "
        "continue");
  }
  // echo with N alternatives scores the prompt too (OpenAI's legacy way).
  const bool scores_prompt = request.echo_prompt() && out.logprobs &&
                             !Field(json, "logprobs")->is_boolean();
  if (scores_prompt) {
    request.set_prompt_logprobs(std::max(request.top_logprobs(), 1));
    if (!max_tokens) max_tokens = 16;  // OpenAI's default for the API.
  }
  if (max_tokens == 0 && !scores_prompt) {
    return Invalid("max_tokens",
                   "must be at least 1 (0 only with echo and logprobs, "
                   "which score the prompt)");
  }
  if (max_tokens) request.set_max_new_tokens(*max_tokens);
  if (const Json* value = Field(json, "stream")) {
    absl::StatusOr<bool> stream = Bool(*value, "stream");
    if (!stream.ok()) return stream.status();
    out.stream = *stream;
  }
  if (const Json* options = Field(json, "stream_options")) {
    if (!options->is_object()) {
      return Invalid("stream_options", "must be an object");
    }
    if (!out.stream) {
      return Invalid("stream_options", "is only allowed with stream: true");
    }
    if (const Json* value = Field(*options, "include_usage")) {
      absl::StatusOr<bool> usage = Bool(*value, "stream_options.include_usage");
      if (!usage.ok()) return usage.status();
      out.include_usage = *usage;
    }
  }
  if (const Json* tap = Field(json, "attention_tap")) {
    if (!tap->is_object()) {
      return Invalid("attention_tap",
                     "must be an object {\"layers\": [...], \"heads\": [...]}");
    }
    pb::AttentionTap& out_tap = *request.mutable_attention_tap();
    for (const char* name : {"layers", "heads"}) {
      if (const Json* list = Field(*tap, name)) {
        absl::StatusOr<std::vector<int>> values =
            IntList(*list, absl::StrCat("attention_tap.", name).c_str());
        if (!values.ok()) return values.status();
        auto* target = std::string(name) == "layers" ? out_tap.mutable_layers()
                                                     : out_tap.mutable_heads();
        target->Add(values->begin(), values->end());
      }
    }
  }
  return out;
}

absl::StatusOr<AttentionRequest> ParseAttentionRequest(
    absl::string_view body, absl::string_view model_name) {
  absl::StatusOr<Json> parsed = ParseObject(body);
  if (!parsed.ok()) return parsed.status();
  if (absl::Status s = CheckModel(*parsed, model_name); !s.ok()) return s;
  AttentionRequest out;
  if (const Json* encoding = Field(*parsed, "encoding")) {
    if (*encoding == "u8") {
      out.encoding = AttentionEncoding::kU8;
    } else if (*encoding != "json") {
      return Invalid("encoding", "must be \"json\" or \"u8\"");
    }
  }
  pb::DebugAttentionRequest& request = out.debug_attention;
  // Encoder-decoder models: "source" (what the encoder reads), and "prompt"
  // optional (the target's start; absent = BOS).
  if (const Json* source = Field(*parsed, "source")) {
    Json only_source = {{"prompt", *source}};
    if (absl::Status s = ParsePrompt(only_source, *request.mutable_source());
        !s.ok()) {
      return Invalid("source", "must be a string or an array of token ids");
    }
  }
  if (Field(*parsed, "prompt") != nullptr || !request.has_source()) {
    if (absl::Status s = ParsePrompt(*parsed, *request.mutable_prompt());
        !s.ok()) {
      return s;
    }
  }
  if (const Json* list = Field(*parsed, "layers")) {
    absl::StatusOr<std::vector<int>> layers = IntList(*list, "layers");
    if (!layers.ok()) return layers.status();
    request.mutable_layers()->Add(layers->begin(), layers->end());
  }
  if (const Json* list = Field(*parsed, "heads")) {
    absl::StatusOr<std::vector<int>> heads = IntList(*list, "heads");
    if (!heads.ok()) return heads.status();
    request.mutable_heads()->Add(heads->begin(), heads->end());
  }
  return out;
}

absl::StatusOr<pb::TokenizeRequest> ParseTokenizeRequest(
    absl::string_view body, absl::string_view model_name) {
  absl::StatusOr<Json> parsed = ParseObject(body);
  if (!parsed.ok()) return parsed.status();
  if (absl::Status s = CheckModel(*parsed, model_name); !s.ok()) return s;
  const Json* text = Field(*parsed, "prompt");
  if (text == nullptr) text = Field(*parsed, "text");
  if (text == nullptr || !text->is_string()) {
    return Invalid("prompt", "is required and must be a string");
  }
  pb::TokenizeRequest request;
  request.set_text(text->get<std::string>());
  return request;
}

CompletionBuilder::CompletionBuilder(std::string id, std::string model,
                                     int64_t created, bool logprobs,
                                     bool include_usage, int completions)
    : id_(std::move(id)),
      model_(std::move(model)),
      created_(created),
      logprobs_(logprobs),
      include_usage_(include_usage),
      completions_(completions) {}

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

Json UsageJson(const Usage& usage) {
  // An encoder-decoder model's `prompt` was its source: that is what the
  // client sent (the decoder's [BOS] start is the server's business).
  const int prompt =
      usage.source_tokens > 0 ? usage.source_tokens : usage.prompt_tokens;
  return {{"prompt_tokens", prompt},
          {"completion_tokens", usage.generated_tokens},
          {"total_tokens", prompt + usage.generated_tokens}};
}

}  // namespace

std::string CompletionBuilder::Event(const TokenEvent& token) const {
  Json choice = {{"index", token.completion_index},
                 {"text", token.text},
                 {"logprobs", nullptr},
                 {"finish_reason", nullptr},
                 // textgen's extra: the token behind the text (ids are what
                 // the gRPC API reports; text alone can be empty).
                 {"token_ids", {token.id}}};
  if (logprobs_) choice["logprobs"] = LogprobsJson({token}, 0);
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

Usage CompletionBuilder::TotalUsage() const {
  Usage total;
  for (const FinishEvent& f : finishes_) {
    total.prompt_tokens = f.usage.prompt_tokens;  // One prompt for all.
    total.source_tokens = f.usage.source_tokens;
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
    usage["usage"] = UsageJson(TotalUsage());
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
    // The engine sends an echoed prompt once, with completion 0; every choice
    // starts with it, as OpenAI's do.
    std::vector<TokenEvent> tokens;
    if (i > 0 && !tokens_.empty()) {
      for (const TokenEvent& t : tokens_[0]) {
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
    if (logprobs_) choice["logprobs"] = LogprobsJson(tokens, 0);
    choices.push_back(std::move(choice));
  }
  Json response = Envelope(id_, created_, model_);
  // Completion i used seed + i.
  response["seed"] = finishes_.empty() ? 0
                                       : finishes_.front().seed -
                                             finishes_.front().completion_index;
  response["choices"] = std::move(choices);
  response["usage"] = UsageJson(TotalUsage());
  return Dump(response);
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

std::string ModelsJson(const pb::ModelInfo& info, int64_t created) {
  Json model = {{"id", info.name()},
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
                {"tokenizer", info.tokenizer()}};
  Json out = {{"object", "list"}, {"data", {std::move(model)}}};
  return Dump(out);
}

std::string TokenizeJson(const pb::TokenizeResponse& response,
                         int max_model_len) {
  Json ids = Json::array();
  Json texts = Json::array();
  for (const pb::PromptToken& token : response.tokens()) {
    ids.push_back(token.id());
    texts.push_back(token.text());
  }
  Json out = {{"count", response.tokens_size()},
              {"max_model_len", max_model_len},
              {"tokens", std::move(ids)},
              {"token_strs", std::move(texts)}};
  return Dump(out);
}

int HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kCancelled:
      return 499;  // nginx's "client closed request".
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

std::string ErrorParam(const absl::Status& status) {
  const auto param = status.GetPayload(kParamPayload);
  return param ? std::string(*param) : std::string();
}

std::string ErrorJson(const absl::Status& status) {
  const std::string param = ErrorParam(status);
  std::string code =
      absl::AsciiStrToLower(absl::StatusCodeToString(status.code()));
  for (char& c : code) {
    if (c == ' ') c = '_';
  }
  if (status.code() == absl::StatusCode::kNotFound && param == "model") {
    code = "model_not_found";  // OpenAI's code.
  }
  return ErrorJson(HttpStatusOf(status.code()), status.message(), code, param);
}

std::string ErrorJson(int http_status, absl::string_view message,
                      absl::string_view code, absl::string_view param) {
  Json error = {{"message", message},
                {"type", ErrorType(http_status)},
                {"param", param.empty() ? Json(nullptr) : Json(param)},
                {"code", code}};
  return Dump(Json{{"error", std::move(error)}});
}

}  // namespace textgen
