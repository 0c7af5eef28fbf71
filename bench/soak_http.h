// What the soak's HTTP share (bench/soak.h) sends to the HTTP API and
// expects back: OpenAI-shaped completion bodies, their server-sent events,
// error bodies, and the invalid requests with the status each must get.
#ifndef TEXTGEN_BENCH_SOAK_HTTP_H_
#define TEXTGEN_BENCH_SOAK_HTTP_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"

namespace textgen {
namespace soak {

using Json = nlohmann::json;

// Text prompts of the HTTP share are slices of this. ASCII, so a character or
// byte-level vocabulary makes at most about a token of a byte: a slice of n
// bytes stays within the prompt's n tokens. Every character is in the
// shipped model's vocabulary (models/shakespeare-char).
constexpr absl::string_view kPassage =
    "ROMEO:\nBut, soft! what light through yonder window breaks?\n"
    "It is the east, and Juliet is the sun.\n"
    "Arise, fair sun, and kill the envious moon,\n"
    "Who is already sick and pale with grief,\n"
    "That thou her maid art far more fair than she:\n";

// `json`'s member `key`, or null if `json` is no object or has none (a
// const nlohmann::json's operator[] must not be given a missing key).
const Json* Field(const Json& json, const char* key);

// A choice's finish_reason as OpenAI sends it: "length" or "stop".
bool IsFinishReason(const Json* reason);

// "" if `body` is a non-streamed completion of one choice with 1..max_tokens
// generated tokens; else what is wrong with it.
std::string CompletionProblem(const std::string& body, int max_tokens);

// "" if `body` is OpenAI's error JSON ({"error": {"message": ...}}).
std::string ErrorBodyProblem(const std::string& body);

// A streamed completion's server-sent events, checked as their bytes arrive
// (httplib hands them over in pieces of any size): `data: {chunk}` events
// separated by blank lines, a token's chunk (finish_reason null) each, one
// finish chunk, the usage chunk if asked for, then `data: [DONE]`.
class SseReader {
 public:
  void Feed(absl::string_view bytes) {
    if (head_.size() < 300) {
      const absl::string_view more = bytes.substr(0, 300 - head_.size());
      head_.append(more.data(), more.size());
    }
    buffer_.append(bytes.data(), bytes.size());
    size_t end;
    while ((end = buffer_.find("\n\n")) != std::string::npos) {
      OnEvent(absl::string_view(buffer_).substr(0, end));
      buffer_.erase(0, end + 2);
    }
  }

  int events() const { return events_; }
  bool done() const { return done_; }
  // The stream's first bytes, for a report.
  const std::string& head() const { return head_; }

  // "" if the events so far are as they should be and, if `complete`, the
  // stream ended as it should with 1..max_tokens tokens.
  std::string Problem(bool complete, int max_tokens) const {
    if (!problem_.empty()) return problem_;
    if (!complete) return "";
    if (!done_) return "no data: [DONE]";
    if (!buffer_.empty()) return "bytes after the last event";
    if (finishes_ != 1) return absl::StrCat(finishes_, " finish chunks");
    if (tokens_ < 1 || tokens_ > max_tokens) {
      return absl::StrCat(tokens_, " token chunks for max_tokens ", max_tokens);
    }
    if (usage_tokens_ >= 0 && usage_tokens_ != tokens_) {
      return absl::StrCat("usage.completion_tokens ", usage_tokens_, " for ",
                          tokens_, " token chunks");
    }
    return "";
  }

 private:
  void OnEvent(absl::string_view event) {
    ++events_;
    if (!problem_.empty()) return;  // The first problem is the one reported.
    if (done_) {
      problem_ = "an event after data: [DONE]";
      return;
    }
    if (!absl::ConsumePrefix(&event, "data: ")) {
      problem_ = absl::StrCat("not a data event: ", event.substr(0, 200));
      return;
    }
    if (event == "[DONE]") {
      done_ = true;
      return;
    }
    const Json chunk = Json::parse(event, nullptr, /*allow_exceptions=*/false);
    if (const Json* error = Field(chunk, "error")) {
      // An error after the 200 went out comes as an event of its own.
      problem_ = absl::StrCat("an error event: ", error->dump());
      return;
    }
    const Json* choices = Field(chunk, "choices");
    if (choices == nullptr || !choices->is_array()) {
      problem_ = absl::StrCat("not a completion chunk: ", event.substr(0, 200));
      return;
    }
    if (choices->empty()) {  // The usage chunk (stream_options).
      const Json* usage = Field(chunk, "usage");
      const Json* generated =
          usage != nullptr ? Field(*usage, "completion_tokens") : nullptr;
      if (generated == nullptr || !generated->is_number_integer()) {
        problem_ = "a chunk without choices or usage";
        return;
      }
      usage_tokens_ = generated->get<int>();
      return;
    }
    const Json* text = Field((*choices)[0], "text");
    const Json* reason = Field((*choices)[0], "finish_reason");
    if (text == nullptr || !text->is_string() || reason == nullptr) {
      problem_ = absl::StrCat("a malformed choice: ", event.substr(0, 200));
    } else if (reason->is_null()) {
      ++tokens_;
    } else if (IsFinishReason(reason)) {
      ++finishes_;
    } else {
      problem_ = absl::StrCat("finish_reason ", reason->dump());
    }
  }

  std::string buffer_;  // Bytes of an event not yet complete.
  std::string head_;
  std::string problem_;
  int events_ = 0;
  int tokens_ = 0;
  int finishes_ = 0;
  int usage_tokens_ = -1;  // -1: no usage chunk.
  bool done_ = false;
};

// One way to make an HTTP completion request invalid: the body sent and the
// status it must get.
struct HttpInvalid {
  std::string body;
  int status = 400;
};
HttpInvalid MakeHttpInvalid(int which, int vocab_size, int max_new_tokens_limit,
                            Json body);

// The model's id as GET /v1/models gives it (what an OpenAI client sends as
// `model`); "" if the HTTP API does not answer with one.
std::string HttpModelName(const std::string& http_target);

}  // namespace soak
}  // namespace textgen

#endif  // TEXTGEN_BENCH_SOAK_HTTP_H_
