#include "bench/soak_http.h"

#include <httplib.h>

#include <chrono>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace textgen {
namespace soak {

// `json`'s member `key`, or null if `json` is no object or has none (a
// const nlohmann::json's operator[] must not be given a missing key).
const Json* Field(const Json& json, const char* key) {
  if (!json.is_object()) return nullptr;
  const auto it = json.find(key);
  return it == json.end() ? nullptr : &*it;
}

bool IsFinishReason(const Json* reason) {
  return reason != nullptr && reason->is_string() &&
         (*reason == "length" || *reason == "stop");
}

// "" if `body` is a non-streamed completion of one choice with 1..max_tokens
// generated tokens; else what is wrong with it.
std::string CompletionProblem(const std::string& body, int max_tokens) {
  const Json response = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (response.is_discarded()) return "not JSON";
  const Json* choices = Field(response, "choices");
  if (choices == nullptr || !choices->is_array() || choices->size() != 1) {
    return "not one choice";
  }
  const Json* text = Field((*choices)[0], "text");
  if (text == nullptr || !text->is_string()) {
    return "choices[0].text is not a string";
  }
  if (!IsFinishReason(Field((*choices)[0], "finish_reason"))) {
    return "choices[0].finish_reason is not length or stop";
  }
  const Json* usage = Field(response, "usage");
  const Json* generated =
      usage != nullptr ? Field(*usage, "completion_tokens") : nullptr;
  if (generated == nullptr || !generated->is_number_integer() ||
      *generated < 1 || *generated > max_tokens) {
    return absl::StrCat("usage.completion_tokens ",
                        generated != nullptr ? generated->dump() : "missing",
                        " for max_tokens ", max_tokens);
  }
  return "";
}

// "" if `body` is OpenAI's error JSON ({"error": {"message": ...}}).
std::string ErrorBodyProblem(const std::string& body) {
  const Json response = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  const Json* error = Field(response, "error");
  const Json* message = error != nullptr ? Field(*error, "message") : nullptr;
  return message != nullptr && message->is_string() ? ""
                                                    : "not OpenAI's error JSON";
}

HttpInvalid MakeHttpInvalid(int which, int vocab_size, int max_new_tokens_limit,
                            Json body) {
  switch (which % 7) {
    case 0: {
      // Cut short: a prefix of an object is never JSON.
      const std::string whole = body.dump();
      return {whole.substr(0, whole.size() / 2), 400};
    }
    case 1:
      body["temperature"] = -1;
      break;
    case 2:
      body["top_p"] = 1.5;
      break;
    case 3:
      body["max_tokens"] = max_new_tokens_limit + 1;
      break;
    case 4:
      body["prompt"] = Json::array({0, vocab_size});
      break;
    case 5:
      body.erase("prompt");
      break;
    case 6:
      body["model"] = "no-such-model";
      return {body.dump(), 404};
  }
  return {body.dump(), 400};
}

// The model's id as GET /v1/models gives it (what an OpenAI client sends as
// `model`); "" if the HTTP API does not answer with one.
std::string HttpModelName(const std::string& http_target) {
  httplib::Client http("http://" + http_target);
  http.set_connection_timeout(5);
  // The server may still be starting: as the gRPC call waits for ready.
  for (int attempt = 0; attempt < 30; ++attempt) {
    auto page = http.Get("/v1/models");
    if (page && page->status == 200) {
      const Json models =
          Json::parse(page->body, nullptr, /*allow_exceptions=*/false);
      const Json* data = Field(models, "data");
      const Json* id = data != nullptr && data->is_array() && !data->empty()
                           ? Field((*data)[0], "id")
                           : nullptr;
      return id != nullptr && id->is_string() ? id->get<std::string>() : "";
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  return "";
}

}  // namespace soak
}  // namespace textgen
