// grammar_peer: what llama.cpp's grammar sampler costs per decode step, for
// bench/README.md's "Structured output" comparison with
// textgen_constraint_bench. Built against a llama.cpp build directory by
// bench/peers/grammar_peer.py, never by the project's CMake (llama.cpp is not
// a dependency of textgen).
//
//   grammar_peer --vocab FILE.gguf (--json_schema FILE | --grammar FILE.gbnf)
//                --answer FILE [--replays N] [--gbnf_out FILE]
//
// FILE.gguf is a vocabulary-only GGUF (grammar_peer.py writes Qwen3's); it is
// loaded with llama_model_params::vocab_only. The grammar is a GBNF file or a
// JSON Schema converted by llama.cpp's own json_schema_to_grammar (common/).
// The answer, a text the grammar accepts, is tokenized with llama_tokenize and
// replayed token by token, as a decode loop would choose it:
//
//   full   llama_sampler_apply over all n_vocab candidates (fresh random
//          logits each step, refilled outside the timed region) +
//          llama_sampler_accept of the answer's token: what a step costs when
//          the grammar must mask the whole vocabulary (llama.cpp's sampler
//          chain with the grammar first, and textgen's FillMask + Accept)
//   check  llama_sampler_apply over one candidate (the answer's token) +
//          llama_sampler_accept: common_sampler_sample's fast path, taken when
//          the unconstrained pick already satisfies the grammar; on a rejection
//          it falls back to "full"
//
// Prints one JSON object on stdout: the vocabulary size, the answer's token
// ids, the conversion and grammar initialisation times (mean over --replays)
// and the per-step times (mean and median over every step of every replay), all
// in the thread's CPU time.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "json-schema-to-grammar.h"
#include "llama.h"
#include "nlohmann/json.hpp"

namespace {

// This thread's CPU time, not the wall clock: the machine is shared, and
// textgen_constraint_bench's figures (Google Benchmark's default) are CPU time
// too. Both engines' work here is single-threaded.
struct Clock {
  using time_point = double;  // Microseconds.
  static time_point now() {
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
  }
};

double MicrosSince(Clock::time_point start) { return Clock::now() - start; }

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "grammar_peer: %s\n", message.c_str());
  std::exit(1);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail("cannot read " + path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / v.size();
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

struct Args {
  std::string vocab, json_schema, grammar, answer, gbnf_out;
  int replays = 5;
};

Args ParseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) Fail("missing value after " + flag);
    std::string value = argv[++i];
    if (flag == "--vocab") {
      a.vocab = value;
    } else if (flag == "--json_schema") {
      a.json_schema = value;
    } else if (flag == "--grammar") {
      a.grammar = value;
    } else if (flag == "--answer") {
      a.answer = value;
    } else if (flag == "--gbnf_out") {
      a.gbnf_out = value;
    } else if (flag == "--replays") {
      a.replays = std::atoi(value.c_str());
    } else {
      Fail("unknown flag " + flag);
    }
  }
  if (a.vocab.empty() || a.answer.empty() || a.replays < 1 ||
      a.json_schema.empty() == a.grammar.empty()) {
    Fail(
        "usage: grammar_peer --vocab FILE.gguf (--json_schema FILE | --grammar "
        "FILE.gbnf) --answer FILE [--replays N] [--gbnf_out FILE]");
  }
  return a;
}

// The GBNF text, and how long making it took (0 for a GBNF file).
std::string GrammarText(const Args& a, double* convert_us) {
  *convert_us = 0;
  if (!a.grammar.empty()) return ReadFile(a.grammar);
  const auto schema = nlohmann::ordered_json::parse(ReadFile(a.json_schema));
  const Clock::time_point start = Clock::now();
  std::string gbnf = json_schema_to_grammar(schema);
  *convert_us = MicrosSince(start);
  return gbnf;
}

void Quiet(ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = ParseArgs(argc, argv);
  llama_log_set(Quiet, nullptr);
  llama_backend_init();

  llama_model_params params = llama_model_default_params();
  params.vocab_only = true;
  llama_model* model = llama_model_load_from_file(args.vocab.c_str(), params);
  if (model == nullptr) Fail("cannot load the vocabulary " + args.vocab);
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_vocab = llama_vocab_n_tokens(vocab);

  // The answer as llama.cpp tokenizes it: no BOS, special tokens as text.
  const std::string answer = ReadFile(args.answer);
  std::vector<llama_token> ids(answer.size() + 16);
  const int n_ids = llama_tokenize(vocab, answer.data(), answer.size(),
                                   ids.data(), ids.size(), false, false);
  if (n_ids < 0) Fail("llama_tokenize failed");
  ids.resize(n_ids);

  // Conversion and grammar initialisation (parsing, rule setup), each replay.
  std::vector<double> convert_us, init_us;
  std::string gbnf;
  for (int r = 0; r < args.replays; ++r) {
    double us = 0;
    gbnf = GrammarText(args, &us);
    convert_us.push_back(us);
    const Clock::time_point start = Clock::now();
    llama_sampler* s = llama_sampler_init_grammar(vocab, gbnf.c_str(), "root");
    init_us.push_back(MicrosSince(start));
    if (s == nullptr) Fail("llama.cpp refused the grammar");
    llama_sampler_free(s);
  }
  if (!args.gbnf_out.empty()) {
    std::ofstream(args.gbnf_out, std::ios::binary) << gbnf;
  }

  // Random logits: a pool of rows, one copied in before each step (untimed)
  // so no step sees the array another step's masking left behind.
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  constexpr int kPool = 8;
  std::vector<std::vector<float>> pool(kPool, std::vector<float>(n_vocab));
  for (auto& row : pool) {
    for (float& x : row) x = normal(rng);
  }
  std::vector<llama_token_data> data(n_vocab);

  std::vector<double> full_apply, full_accept, check_apply, check_accept;
  int64_t allowed_after_first_apply = -1;
  for (int r = 0; r < args.replays; ++r) {
    llama_sampler* full =
        llama_sampler_init_grammar(vocab, gbnf.c_str(), "root");
    llama_sampler* check =
        llama_sampler_init_grammar(vocab, gbnf.c_str(), "root");
    for (size_t step = 0; step < ids.size(); ++step) {
      const llama_token id = ids[step];
      const std::vector<float>& logits = pool[(r + step) % kPool];
      for (int i = 0; i < n_vocab; ++i) data[i] = {i, logits[i], 0.0f};
      llama_token_data_array all = {data.data(), data.size(), -1, false};

      Clock::time_point start = Clock::now();
      llama_sampler_apply(full, &all);
      full_apply.push_back(MicrosSince(start));
      if (!std::isfinite(data[id].logit)) {
        Fail("llama.cpp's grammar refuses the answer's token " +
             std::to_string(id) + " at step " + std::to_string(step));
      }
      if (allowed_after_first_apply < 0) {
        allowed_after_first_apply = 0;
        for (const llama_token_data& d : data) {
          allowed_after_first_apply += std::isfinite(d.logit);
        }
      }
      start = Clock::now();
      llama_sampler_accept(full, id);
      full_accept.push_back(MicrosSince(start));

      llama_token_data one = {id, 1.0f, 0.0f};
      llama_token_data_array single = {&one, 1, -1, false};
      start = Clock::now();
      llama_sampler_apply(check, &single);
      check_apply.push_back(MicrosSince(start));
      if (!std::isfinite(one.logit)) Fail("the single-token check refused");
      start = Clock::now();
      llama_sampler_accept(check, id);
      check_accept.push_back(MicrosSince(start));
    }
    llama_sampler_free(full);
    llama_sampler_free(check);
  }

  std::vector<double> full_step(full_apply.size()),
      check_step(check_apply.size());
  for (size_t i = 0; i < full_step.size(); ++i) {
    full_step[i] = full_apply[i] + full_accept[i];
    check_step[i] = check_apply[i] + check_accept[i];
  }
  nlohmann::ordered_json out;
  out["n_vocab"] = n_vocab;
  out["answer_tokens"] = ids.size();
  out["answer_ids"] = ids;
  out["replays"] = args.replays;
  out["gbnf_bytes"] = gbnf.size();
  out["convert_ms"] = Mean(convert_us) / 1000;
  out["init_ms"] = Mean(init_us) / 1000;
  out["first_step_allowed"] = allowed_after_first_apply;
  out["full_us_per_step"] = Mean(full_step);
  out["full_us_per_step_median"] = Median(full_step);
  out["full_apply_us"] = Mean(full_apply);
  out["full_accept_us"] = Mean(full_accept);
  out["check_us_per_step"] = Mean(check_step);
  out["check_us_per_step_median"] = Median(check_step);
  std::printf("%s\n", out.dump().c_str());

  llama_model_free(model);
  llama_backend_free();
  return 0;
}
