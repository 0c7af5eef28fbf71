// The load generator's soak mode (textgen_loadgen --soak_seconds=N): many
// concurrent streams for a long time against a running textgen_server, with a
// share of requests cancelled mid-stream and a share deliberately invalid, and
// random sampling settings, to find what only shows over time: leaks, slots
// never freed, statuses that should not happen.
//
// Every request's outcome is checked against what it was:
//   valid          -> OK with 1..max_new_tokens tokens
//   cancelled      -> CANCELLED (cancelled by the client after k tokens), or OK
//                     if it finished first
//   invalid        -> INVALID_ARGUMENT
// Anything else is "unexpected". Every --soak_report_seconds a line gives the
// counts so far and the server's resident memory. At the end (all streams
// idle) /metrics must show no slot in use and an empty queue, and resident
// memory must be within --soak_rss_growth of what it was after the warm-up
// (the first --soak_warmup_seconds). Exit status 1 if any check fails.
#ifndef TEXTGEN_BENCH_SOAK_H_
#define TEXTGEN_BENCH_SOAK_H_

#include <string>

namespace textgen {

struct SoakOptions {
  std::string target;          // host:port of the server.
  std::string metrics_target;  // host:port of its /metrics; "" = not checked.
  int server_pid = 0;          // For resident memory; 0 = not checked.
  int streams = 16;
  double seconds = 180;
  double warmup_seconds = 30;  // Resident memory is compared to its end.
  double report_seconds = 60;  // A progress line this often.
  double cancel_fraction = 0.2;
  double invalid_fraction = 0.1;
  double rss_growth = 0.10;  // Allowed growth of resident memory.
  int max_prompt_tokens = 32;
  int max_new_tokens = 32;
  unsigned seed = 1;
};

// Runs the soak and prints its report; returns the process exit status.
int RunSoak(const SoakOptions& options);

}  // namespace textgen

#endif  // TEXTGEN_BENCH_SOAK_H_
