// GBNF, llama.cpp's grammar notation, parsed into a byte-level Grammar.
//
//   root   ::= object
//   object ::= "{" ws ( pair ( "," ws pair )* )? "}"
//   pair   ::= string ":" ws value
//   digit  ::= [0-9]            # a character class; [^...] negates it
//   ws     ::= [ \t\n]{0,20}    # * + ? {m} {m,} {m,n} {,n} repeat an item
//
// What it accepts: rules `name ::= alternatives` (names of letters, digits,
// '-' and '_'); `|`; sequences; `( )` groups; "literals" and [classes] with
// the escapes \n \r \t \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH (and any other
// punctuation escaped as itself); `.` for any character; the repetitions
// above; `#` comments. A rule may continue over several lines: it ends where
// the next `name ::=` begins. llama.cpp's token references (<[id]>) are not
// supported. Literals and classes are Unicode: a class such as [^"\\] matches
// any character but those two, in as many bytes as its UTF-8 takes.
//
// Errors are INVALID_ARGUMENT with the line and column; a grammar past its
// limits (GrammarLimits, and each repetition's count) is RESOURCE_EXHAUSTED
// before it allocates what it asks for.
#ifndef TEXTGEN_MODEL_CONSTRAINT_GBNF_PARSER_H_
#define TEXTGEN_MODEL_CONSTRAINT_GBNF_PARSER_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "model/constraint/grammar.h"

namespace textgen {

struct GbnfLimits {
  GrammarLimits grammar;
  int max_text_bytes = 1 << 20;
  int max_nesting = 64;        // Of ( ) groups.
  int max_repetition = 10000;  // The largest m or n in {m,n}.
};

// The grammar `text` defines, starting from rule `root`.
absl::StatusOr<Grammar> ParseGbnf(std::string_view text,
                                  std::string_view root = "root",
                                  const GbnfLimits& limits = {});

}  // namespace textgen

#endif  // TEXTGEN_MODEL_CONSTRAINT_GBNF_PARSER_H_
