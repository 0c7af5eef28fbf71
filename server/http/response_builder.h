// What turns one generation's stream of engine events into an HTTP reply,
// whichever endpoint's shape it has (completions: openai_response.h; chat:
// chat_response.h): either server-sent events as the events come, or one
// JSON body once every choice has finished. http_server.cc serves both
// endpoints through this interface.
//
// One builder per request, used from one thread at a time.
#ifndef TEXTGEN_SERVER_HTTP_RESPONSE_BUILDER_H_
#define TEXTGEN_SERVER_HTTP_RESPONSE_BUILDER_H_

#include <string>

#include "engine/request.h"

namespace textgen {

class ResponseBuilder {
 public:
  virtual ~ResponseBuilder() = default;

  // Streaming: the `data: {...}\n\n` events of `token` (possibly none).
  virtual std::string Event(const TokenEvent& token) = 0;
  // Streaming: one choice finished OK: its last events; after the last
  // choice's (done()), also the usage chunk if asked for and `data: [DONE]`.
  virtual std::string FinishEvents(const FinishEvent& finish) = 0;
  // Every choice has finished.
  virtual bool done() const = 0;

  // Non-streaming: collects `token`; Finish records a choice's end (true once
  // done()); then Response builds the body.
  virtual void Add(const TokenEvent& token) = 0;
  virtual bool Finish(const FinishEvent& finish) = 0;
  virtual std::string Response() const = 0;
};

}  // namespace textgen

#endif  // TEXTGEN_SERVER_HTTP_RESPONSE_BUILDER_H_
