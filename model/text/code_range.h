// A range of Unicode code points, as the generated tables list them
// (model/text/unicode_class_additions.inc, unicode_nfc_unknown.inc).
#ifndef TEXTGEN_MODEL_TEXT_CODE_RANGE_H_
#define TEXTGEN_MODEL_TEXT_CODE_RANGE_H_

namespace textgen {

// first .. last, both included.
struct CodeRange {
  char32_t first;
  char32_t last;
};

}  // namespace textgen

#endif  // TEXTGEN_MODEL_TEXT_CODE_RANGE_H_
