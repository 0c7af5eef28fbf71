// GenerateRequest.constraint turned into what the engine runs: a grammar
// compiled against the model's vocabulary (model/constraint/), cached.
//
//   json_schema  → JsonSchemaToGbnf → GBNF ┐
//   json_object  → the same, {"type": "object"} ├→ ParseGbnf → CompiledGrammar
//   regex        → RegexToGbnf ──────────────────┤   (token masks, the cost)
//   choice       → ChoiceToGbnf ────────────────┤
//   grammar      (GBNF as given) ───────────────┘
//
// The cache is keyed by the constraint's kind and text, bounded by entries
// and by the masks' bytes (least recently used first out), so a client that
// sends the same schema with every request compiles it once. Compiling runs
// on the caller's thread, never the engine's; at most
// max_concurrent_compiles at once (RESOURCE_EXHAUSTED beyond), since one can
// take a core for a while.
//
// Errors: INVALID_ARGUMENT naming the field ("constraint.json_schema: ...")
// for a constraint that does not parse or uses what is not supported;
// RESOURCE_EXHAUSTED past a limit; FAILED_PRECONDITION without a tokenizer.
//
// Thread-safe.
#ifndef TEXTGEN_SERVER_API_CONSTRAINT_COMPILER_H_
#define TEXTGEN_SERVER_API_CONSTRAINT_COMPILER_H_

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "model/constraint/compiled_grammar.h"
#include "model/constraint/token_vocabulary.h"
#include "model/text/tokenizer.h"
#include "textgen/v1/textgen.pb.h"

namespace textgen {

struct ConstraintCompilerOptions {
  int cache_entries = 64;
  int64_t cache_bytes = int64_t{512} << 20;
  int max_concurrent_compiles = 2;
  // Longest constraint text (schema, regex, grammar, choices together).
  size_t max_constraint_bytes = 64 << 10;
  CompileLimits compile;
};

class ConstraintCompiler {
 public:
  // `tokenizer` may be null (every constraint is then FAILED_PRECONDITION)
  // and must outlive the compiler.
  ConstraintCompiler(const ConstraintCompilerOptions& options,
                     const Tokenizer* tokenizer);

  // The compiled constraint; null for an unset one.
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> Compile(
      const textgen::v1::Constraint& constraint);

  // The GBNF text a constraint becomes (for errors, tests and tools).
  static absl::StatusOr<std::string> ToGbnf(
      const textgen::v1::Constraint& constraint);

 private:
  // The vocabulary, built on first use (a large vocabulary takes a moment).
  std::shared_ptr<const TokenVocabulary> Vocabulary();

  const ConstraintCompilerOptions options_;
  const Tokenizer* const tokenizer_;
  std::atomic<int> compiling_{0};

  mutable absl::Mutex mu_;
  std::shared_ptr<const TokenVocabulary> vocabulary_ ABSL_GUARDED_BY(mu_);
  struct Entry {
    std::string key;
    std::shared_ptr<const CompiledGrammar> grammar;
  };
  std::list<Entry> lru_ ABSL_GUARDED_BY(mu_);  // Most recent first.
  absl::flat_hash_map<std::string, std::list<Entry>::iterator> index_
      ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace textgen

#endif  // TEXTGEN_SERVER_API_CONSTRAINT_COMPILER_H_
