#include "base/huge_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <new>

namespace textgen {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kOrdinaryHeapOnly = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kOrdinaryHeapOnly = true;
#else
constexpr bool kOrdinaryHeapOnly = false;
#endif
#else
constexpr bool kOrdinaryHeapOnly = false;
#endif

constexpr std::align_val_t kHeapAlignment{64};

size_t MappedLength(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

}  // namespace

bool IsOwnMapping(size_t bytes) {
  return !kOrdinaryHeapOnly && bytes >= kHugePageBytes;
}

void* AllocateStreamed(size_t bytes) {
  if (!IsOwnMapping(bytes)) return ::operator new(bytes, kHeapAlignment);
  // Map a huge page more than needed, then unmap the slack on both sides of
  // the first huge-page boundary: mmap alone promises only base-page
  // alignment.
  const size_t length = MappedLength(bytes);
  void* raw = mmap(nullptr, length + kHugePageBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned =
      (start + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  const uintptr_t end = start + length + kHugePageBytes;
  if (aligned > start) munmap(raw, aligned - start);
  if (end > aligned + length) {
    munmap(reinterpret_cast<void*>(aligned + length), end - (aligned + length));
  }
  void* p = reinterpret_cast<void*>(aligned);
#ifdef MADV_HUGEPAGE
  // A hint: where THP is off (or not built in) this fails and the mapping
  // keeps base pages, which is only slower.
  madvise(p, length, MADV_HUGEPAGE);
#endif
  return p;
}

void FreeStreamed(void* p, size_t bytes) noexcept {
  if (p == nullptr) return;
  if (!IsOwnMapping(bytes)) {
    ::operator delete(p, kHeapAlignment);
    return;
  }
  munmap(p, MappedLength(bytes));
}

}  // namespace textgen
