// FUZZ_CHECK: an invariant a fuzz target asserts. On failure it prints the
// condition and aborts, which libFuzzer reports as a crash and saves the input
// as a reproducer (crash-<sha1>), to become a regression test.
#ifndef TEXTGEN_FUZZ_FUZZ_CHECK_H_
#define TEXTGEN_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(condition)                                          \
  do {                                                                 \
    if (!(condition)) {                                                \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, \
                   __LINE__, #condition);                              \
      std::abort();                                                    \
    }                                                                  \
  } while (0)

#endif  // TEXTGEN_FUZZ_FUZZ_CHECK_H_
