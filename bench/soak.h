// The load generator's soak mode (textgen_loadgen --soak_seconds=N): many
// concurrent streams for a long time against a running textgen_server, with a
// share of requests cancelled mid-stream and a share deliberately invalid, and
// random sampling settings, to find what only shows over time: leaks, slots
// never freed, statuses that should not happen.
//
// With an HTTP target (the server's --http_port), a share of each stream's
// requests (http_fraction) goes to its OpenAI-compatible POST
// /v1/completions instead of gRPC, split the same way: invalid_fraction of
// them invalid, cancel_fraction streamed and abandoned after an event or two
// (the client closes the connection), the rest half plain, half streamed
// (server-sent events). Only the wire is used, so any implementation of the
// HTTP API behind the same endpoints, JSON and status codes is soaked alike.
//
// Every request's outcome is checked against what it was:
//   valid            -> OK with 1..max_new_tokens tokens
//   cancelled        -> CANCELLED (cancelled by the client after k tokens), or
//                       OK if it finished first
//   invalid          -> INVALID_ARGUMENT
//   http_plain       -> 200, a completion whose choices[0].text is a string
//                       and usage.completion_tokens 1..max_tokens
//   http_sse         -> 200, text/event-stream of `data: {...}` chunks (1..
//                       max_tokens token chunks, one finish chunk, no error
//                       chunk), then `data: [DONE]` and nothing after
//   http_aborted_sse -> "aborted" (the client closed the connection after its
//                       event or two), or a complete stream as http_sse if it
//                       finished first
//   http_invalid     -> 400 (bad JSON, a bad field), or 404 (unknown model),
//                       with OpenAI's error JSON
// Anything else is "unexpected". Every --soak_report_seconds a line gives the
// counts so far and the server's resident memory. At the end (all streams
// idle) /metrics must show no slot in use, an empty queue and no request the
// server ended with a status other than those above, every kind with a share
// must have been sent, and resident memory must be within --soak_rss_growth
// of what it was after the warm-up (the first --soak_warmup_seconds). Exit
// status 1 if any check fails.
#ifndef TEXTGEN_BENCH_SOAK_H_
#define TEXTGEN_BENCH_SOAK_H_

#include <string>

namespace textgen {

struct SoakOptions {
  std::string target;          // host:port of the server.
  std::string metrics_target;  // host:port of its /metrics; "" = not checked.
  std::string http_target;     // host:port of its HTTP API; "" = gRPC only.
  int server_pid = 0;          // For resident memory; 0 = not checked.
  int streams = 16;
  double seconds = 180;
  double warmup_seconds = 30;  // Resident memory is compared to its end.
  double report_seconds = 60;  // A progress line this often.
  double cancel_fraction = 0.2;
  double invalid_fraction = 0.1;
  double http_fraction = 0.25;  // Of all requests, with http_target only.
  double rss_growth = 0.10;     // Allowed growth of resident memory.
  int max_prompt_tokens = 32;
  int max_new_tokens = 32;
  unsigned seed = 1;
};

// Runs the soak and prints its report; returns the process exit status.
int RunSoak(const SoakOptions& options);

}  // namespace textgen

#endif  // TEXTGEN_BENCH_SOAK_H_
