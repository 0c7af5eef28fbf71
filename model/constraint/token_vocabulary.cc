#include "model/constraint/token_vocabulary.h"

#include <algorithm>

namespace textgen {

TokenVocabulary::TokenVocabulary(const Tokenizer& tokenizer) {
  const int n = tokenizer.vocab_size();
  bytes_.resize(n);
  // An ordinary token to follow, so no token is read as a text's first
  // (SentencePiece drops the space of a first piece).
  int ordinary = -1;
  for (int id = 0; id < n && ordinary < 0; ++id) {
    if (!tokenizer.TokenBytes(id, id).empty() && !tokenizer.EndsSequence(id) &&
        id != tokenizer.bos_id()) {
      ordinary = id;
    }
  }
  for (int id = 0; id < n; ++id) {
    if (tokenizer.EndsSequence(id) || id == tokenizer.bos_id()) continue;
    bytes_[id] = std::string(tokenizer.TokenBytes(id, ordinary));
  }
  Index();
}

TokenVocabulary::TokenVocabulary(std::vector<std::string> bytes)
    : bytes_(std::move(bytes)) {
  Index();
}

void TokenVocabulary::Index() {
  for (int id = 0; id < size(); ++id) {
    if (!bytes_[id].empty()) sorted_.push_back(id);
    max_bytes_ = std::max(max_bytes_, static_cast<int>(bytes_[id].size()));
  }
  std::stable_sort(sorted_.begin(), sorted_.end(),
                   [&](int32_t a, int32_t b) { return bytes_[a] < bytes_[b]; });
  lcp_.assign(sorted_.size(), 0);
  for (size_t i = 1; i < sorted_.size(); ++i) {
    const std::string& a = bytes_[sorted_[i - 1]];
    const std::string& b = bytes_[sorted_[i]];
    size_t k = 0;
    while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
    lcp_[i] = static_cast<int32_t>(k);
  }
  // first_[b] = the first sorted index whose first byte is >= b.
  size_t i = 0;
  for (int b = 0; b <= 256; ++b) {
    while (i < sorted_.size() &&
           static_cast<uint8_t>(bytes_[sorted_[i]][0]) < b) {
      ++i;
    }
    first_[b] = static_cast<int32_t>(b == 256 ? sorted_.size() : i);
  }
}

size_t TokenVocabulary::memory_bytes() const {
  size_t total = sizeof(*this) + (sorted_.size() + lcp_.size()) * 4;
  for (const std::string& b : bytes_) total += sizeof(b) + b.capacity();
  return total;
}

}  // namespace textgen
