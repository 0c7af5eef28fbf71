#include "server/http/openai_response.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "server/api/attention_collector.h"
#include "server/api/attention_encoding.h"
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
                                     int per_prompt, AttentionEncodingSpec tap)
    : id_(std::move(id)),
      model_(std::move(model)),
      created_(created),
      logprobs_(logprobs),
      include_usage_(include_usage),
      completions_(completions),
      per_prompt_(per_prompt > 0 ? per_prompt : completions),
      tap_(tap) {}

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
      Json out = {{"layer", row.layer}, {"head", row.head}};
      if (tap_.compact()) {
        // One row, as a map's rows are written (AttentionJson).
        pb::PackedWeights packed;
        AppendPackedRow(tap_, row.weights, 0, packed);
        if (!packed.packed().empty()) {
          out["weights"] = absl::Base64Escape(packed.packed());
        }
        if (packed.row_scales_size() > 0) {
          out["row_scales"] = packed.row_scales();
        }
        if (tap_.encoding == pb::ATTENTION_ENCODING_TOP_K) {
          out["top_keys"] = packed.top_keys();
          out["top_weights"] = packed.top_weights();
          out["remainders"] = packed.remainders();
        }
      } else {
        Json weights = Json::array();
        for (float w : row.weights) weights.push_back(RoundWeight(w));
        out["weights"] = std::move(weights);
      }
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

namespace {

// A float as the JSON maps write it: 4 significant digits (RoundWeight).
void AppendWeight(std::string& out, float w) {
  char text[32];
  const double rounded = RoundWeight(w);
  std::snprintf(text, sizeof(text), "%.4g",
                std::isfinite(rounded) ? rounded : 0.0);
  out += text;
}

template <typename Values>
void AppendNumbers(std::string& out, const Values& values) {
  out += '[';
  bool first = true;
  for (const auto& v : values) {
    if (!first) out += ',';
    first = false;
    absl::StrAppend(&out, v);
  }
  out += ']';
}

// The rows of one map (or the rollout) as JSON fields, after its "layer" and
// the like: "row_keys", and the weights as the encoding writes them. FLOAT32
// rows (`rows` of `cols` floats each, in pieces) are cut, for a causal map,
// at the last cell any of the row's queries sees (CausalRowCells), as the
// compact forms are; `row_first_query(r)` is row r's first query.
class RowsJson {
 public:
  RowsJson(pb::AttentionEncoding encoding, bool causal, int query_step,
           int query_end, int first_key, int key_step)
      : encoding_(encoding),
        causal_(causal),
        query_step_(query_step),
        query_end_(query_end),
        first_key_(first_key),
        key_step_(key_step) {}

  // `first_query`: the piece's first row's query.
  void AddFloats(const google::protobuf::RepeatedField<float>& weights,
                 int rows, int first_query) {
    if (rows <= 0) return;
    const int cols = weights.size() / rows;
    for (int r = 0; r < rows; ++r) {
      const int cells =
          causal_ ? CausalRowCells(first_query + r * query_step_, query_step_,
                                   query_end_, first_key_, key_step_, cols)
                  : cols;
      row_keys_.push_back(cells);
      floats_ += floats_.empty() ? "[" : ",[";
      for (int k = 0; k < cells; ++k) {
        if (k > 0) floats_ += ',';
        AppendWeight(floats_, weights.Get(r * cols + k));
      }
      floats_ += ']';
    }
  }

  void AddPacked(const pb::PackedWeights& packed) {
    row_keys_.insert(row_keys_.end(), packed.row_keys().begin(),
                     packed.row_keys().end());
    packed_ += packed.packed();
    row_scales_.insert(row_scales_.end(), packed.row_scales().begin(),
                       packed.row_scales().end());
    top_keys_.insert(top_keys_.end(), packed.top_keys().begin(),
                     packed.top_keys().end());
    top_weights_.insert(top_weights_.end(), packed.top_weights().begin(),
                        packed.top_weights().end());
    remainders_.insert(remainders_.end(), packed.remainders().begin(),
                       packed.remainders().end());
  }

  // `,"row_keys":[...],"weights":...` and the encoding's other fields.
  void AppendTo(std::string& out) const {
    out += ",\"row_keys\":";
    AppendNumbers(out, row_keys_);
    switch (encoding_) {
      case pb::ATTENTION_ENCODING_UINT8:
      case pb::ATTENTION_ENCODING_UINT16:
        out += ",\"row_scales\":";
        AppendNumbers(out, row_scales_);
        [[fallthrough]];
      case pb::ATTENTION_ENCODING_FLOAT16:
        absl::StrAppend(&out, ",\"weights\":\"", absl::Base64Escape(packed_),
                        "\"");
        break;
      case pb::ATTENTION_ENCODING_TOP_K:
        out += ",\"top_keys\":";
        AppendNumbers(out, top_keys_);
        out += ",\"top_weights\":";
        AppendNumbers(out, top_weights_);
        out += ",\"remainders\":";
        AppendNumbers(out, remainders_);
        break;
      default:
        absl::StrAppend(&out, ",\"weights\":[", floats_, "]");
    }
  }

 private:
  const pb::AttentionEncoding encoding_;
  const bool causal_;
  const int query_step_, query_end_, first_key_, key_step_;
  std::vector<int> row_keys_;
  std::string floats_;  // FLOAT32: the rows, written.
  std::string packed_;
  std::vector<float> row_scales_;
  std::vector<int> top_keys_;
  std::vector<float> top_weights_, remainders_;
};

const char* KindName(pb::AttentionKind kind) {
  switch (kind) {
    case pb::ATTENTION_KIND_ENCODER_SELF:
      return "encoder_self";
    case pb::ATTENTION_KIND_CROSS:
      return "cross";
    default:
      return "decoder_self";
  }
}

}  // namespace

std::string AttentionJson(std::vector<pb::DebugAttentionResponse> responses,
                          const pb::ModelInfo& info,
                          const pb::DebugAttentionRequest& request,
                          int prompt_tokens) {
  auto token_list = [](Json& tokens, const auto& list) {
    for (const pb::PromptToken& token : list) {
      tokens.push_back({{"id", token.id()}, {"text", token.text()}});
    }
  };
  Json tokens = Json::array(), source_tokens = Json::array();
  Json summaries = Json::array();
  for (const pb::DebugAttentionResponse& response : responses) {
    token_list(tokens, response.tokens());
    token_list(source_tokens, response.source_tokens());
    for (const pb::AttentionSummary& summary : response.summaries()) {
      summaries.push_back({{"layer", summary.layer()},
                           {"head", summary.head()},
                           {"kind", KindName(summary.kind())},
                           {"entropy", summary.entropy()},
                           {"sink", summary.sink()},
                           {"mean_distance", summary.mean_distance()},
                           {"distance_profile", summary.distance_profile()},
                           {"max_weight", summary.max_weight()}});
    }
  }
  // (A streamed reply's later parts carry no source tokens.)
  const bool encoder_decoder =
      !source_tokens.empty() || info.num_encoder_layers() > 0;
  const int n =
      prompt_tokens >= 0 ? prompt_tokens : static_cast<int>(tokens.size());
  const pb::AttentionEncoding encoding =
      request.encoding() == pb::ATTENTION_ENCODING_UNSPECIFIED
          ? pb::ATTENTION_ENCODING_FLOAT32
          : request.encoding();
  // The model's counts: a DebugAttentionResponse's are those of the maps it
  // carries.
  Json head = {{"object", "attention"},
               {"model", info.name()},
               {"num_layers", info.num_layers()},
               {"num_heads", info.num_heads()},
               {"tokens", std::move(tokens)}};
  // Floats are the default, and the shape explorer/attention_json.h writes.
  if (encoding != pb::ATTENTION_ENCODING_FLOAT32) {
    head["encoding"] = EncodingName(encoding);
  }
  if (encoder_decoder) {
    head["source_tokens"] = std::move(source_tokens);
    head["num_encoder_layers"] = info.num_encoder_layers();
  }
  if (request.summary() || request.summary_only()) {
    head["summaries"] = std::move(summaries);
  }
  // Invalid UTF-8 in a token's text is written as U+FFFD, not thrown on.
  std::string out = head.dump(-1, ' ', false, Json::error_handler_t::replace);
  out.pop_back();  // The closing brace: the maps follow.

  // The maps, written map by map from their pieces (no tree of numbers).
  const int query_end =
      request.queries().end() == 0 ? n : request.queries().end();
  // Reserved: grown by doubling, the text would hold up to twice itself.
  // Floats take at most 11 characters with their comma ("1.234e-05,"),
  // base64 4 per 3 bytes.
  size_t estimate = out.size() + 1024;
  for (const pb::DebugAttentionResponse& response : responses) {
    for (const pb::AttentionMap& piece : response.maps()) {
      estimate += 128 + piece.weights_size() * 11 +
                  piece.compact().packed().size() * 4 / 3 +
                  piece.compact().ByteSizeLong() * 3;
    }
    estimate += response.rollout().weights_size() * 11 +
                response.rollout().compact().ByteSizeLong() * 3;
  }
  out.reserve(estimate);
  out += ",\"maps\":[";
  // Each map's pieces, maps in the order they first come: a pass streamed
  // in bands sends a map's rows in pieces among the other maps'.
  std::vector<std::vector<pb::AttentionMap*>> by_map;
  std::map<std::tuple<int, int, int>, size_t> map_index;
  for (pb::DebugAttentionResponse& response : responses) {
    for (pb::AttentionMap& piece : *response.mutable_maps()) {
      const auto [it, fresh] = map_index.try_emplace(
          {piece.kind(), piece.layer(), piece.head()}, by_map.size());
      if (fresh) by_map.emplace_back();
      by_map[it->second].push_back(&piece);
    }
  }
  for (const std::vector<pb::AttentionMap*>& pieces : by_map) {
    // The map's fields are its first piece's.
    const pb::AttentionMap& first = *pieces.front();
    absl::StrAppend(&out, out.back() == '[' ? "" : ",",
                    "{\"layer\":", first.layer(), ",\"head\":", first.head());
    if (encoder_decoder) {
      absl::StrAppend(&out, ",\"kind\":\"", KindName(first.kind()), "\"");
    }
    absl::StrAppend(&out, ",\"first_query\":", first.first_query(),
                    ",\"first_key\":", first.first_key());
    if (first.query_step() > 0) {
      absl::StrAppend(&out, ",\"query_step\":", first.query_step(),
                      ",\"key_step\":", first.key_step());
    }
    const bool causal = first.kind() == pb::ATTENTION_KIND_DECODER_SELF;
    RowsJson rows(encoding, causal, std::max(1, first.query_step()),
                  causal ? query_end : n, first.first_key(),
                  std::max(1, first.key_step()));
    for (pb::AttentionMap* piece : pieces) {
      if (piece->has_compact()) {
        rows.AddPacked(piece->compact());
      } else {
        rows.AddFloats(piece->weights(), piece->rows(), piece->first_query());
      }
      // Written: the piece's weights go as the text grows, so that the two
      // are not held whole at once.
      pb::AttentionMap().Swap(piece);
    }
    rows.AppendTo(out);
    out += '}';
  }
  std::string rollout_json;
  for (const pb::DebugAttentionResponse& response : responses) {
    if (response.has_rollout()) {
      RowsJson rollout(encoding, /*causal=*/true, 1, n, 0, 1);
      if (response.rollout().has_compact()) {
        rollout.AddPacked(response.rollout().compact());
      } else {
        rollout.AddFloats(response.rollout().weights(), n, 0);
      }
      rollout_json = ",\"rollout\":{\"first_query\":0,\"first_key\":0";
      rollout.AppendTo(rollout_json);
      rollout_json += '}';
    }
  }
  out += ']';
  out += rollout_json;
  out += '}';
  return out;
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
          {"chat", info.chat()},
          // Speculative decoding (--speculative): faster, same output.
          {"speculation",
           {{"mode", info.speculation().mode()},
            {"tokens", info.speculation().tokens()},
            {"draft_model", info.speculation().draft_model()}}}};
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
