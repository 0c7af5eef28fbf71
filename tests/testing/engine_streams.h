// What an engine stream produced, read to its end: the engine tests' one way
// to collect a RequestStream (engine/request_stream.h), for one completion or
// a request's n.
#ifndef TEXTGEN_TESTS_TESTING_ENGINE_STREAMS_H_
#define TEXTGEN_TESTS_TESTING_ENGINE_STREAMS_H_

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/time/time.h"
#include "engine/request.h"
#include "engine/request_stream.h"

namespace textgen::testing {

// Everything one completion of a stream produced.
struct Output {
  std::vector<TokenEvent> prompt;     // Echoed (or scored) prompt tokens.
  std::vector<TokenEvent> generated;  // Generated tokens.
  std::optional<FinishEvent> finish;

  std::vector<int> prompt_ids() const { return Ids(prompt); }
  std::vector<int> ids() const { return Ids(generated); }
  std::vector<float> logprobs() const {
    std::vector<float> logprobs;
    for (const TokenEvent& e : generated) logprobs.push_back(e.logprob);
    return logprobs;
  }
  std::string text() const {
    std::string text;
    for (const TokenEvent& e : generated) text += e.text;
    return text;
  }

 private:
  static std::vector<int> Ids(const std::vector<TokenEvent>& events) {
    std::vector<int> ids;
    for (const TokenEvent& e : events) ids.push_back(e.id);
    return ids;
  }
};

// Reads a stream with `n` completions to its n-th FinishEvent, each
// completion's events apart (a test failure if `wait` passes without an
// event, if a completion ends twice, or if anything follows the last end).
// The wait is bounded only so that a bug fails instead of hanging.
inline std::vector<Output> CollectCompletions(
    RequestStream& stream, int n, absl::Duration wait = absl::Seconds(60)) {
  std::vector<Output> out(n);
  int finished = 0;
  while (finished < n) {
    std::optional<StreamEvent> event = stream.WaitNext(wait);
    if (!event) {
      ADD_FAILURE() << "stream " << stream.id() << ": no event for " << wait;
      break;
    }
    if (auto* token = std::get_if<TokenEvent>(&*event)) {
      Output& o = out.at(token->completion_index);
      (token->is_prompt ? o.prompt : o.generated).push_back(*token);
    } else {
      const FinishEvent& finish = std::get<FinishEvent>(*event);
      EXPECT_FALSE(out.at(finish.completion_index).finish) << "ended twice";
      out.at(finish.completion_index).finish = finish;
      ++finished;
    }
  }
  EXPECT_FALSE(stream.Poll().has_value()) << "an event after the last finish";
  return out;
}

// A stream of one completion, read to its FinishEvent.
inline Output Collect(RequestStream& stream,
                      absl::Duration wait = absl::Seconds(60)) {
  return CollectCompletions(stream, 1, wait).front();
}

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_TESTING_ENGINE_STREAMS_H_
