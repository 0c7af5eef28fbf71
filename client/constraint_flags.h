// The CLI's structured-output flags (generate and chat): --json_schema FILE,
// --json_object, --regex RE, --grammar FILE, --choice A,B,... into
// GenerateRequest.constraint.
#ifndef TEXTGEN_CLIENT_CONSTRAINT_FLAGS_H_
#define TEXTGEN_CLIENT_CONSTRAINT_FLAGS_H_

#include "absl/status/status.h"
#include "textgen/v1/textgen.pb.h"

namespace textgen::client {

// At most one of the flags into `constraint` (none set: left empty).
// INVALID_ARGUMENT for a usage problem: two of them, a file that cannot be
// read.
absl::Status SetConstraintFromFlags(textgen::v1::Constraint& constraint);

}  // namespace textgen::client

#endif  // TEXTGEN_CLIENT_CONSTRAINT_FLAGS_H_
