// Memory for large buffers that are streamed end to end on every decode step
// (packed weights; the KV cache's keys and values), backed by 2 MiB transparent
// huge pages where the kernel allows them.
//
// Why: a batch-1 decode step reads every weight once, ~0.5 GB for GPT-2 small
// in f32, and is bound by how fast one core can pull bytes from memory. With
// 4 KiB pages that stream crosses a page every 4 KiB: a TLB miss and a page
// walk each time, and the hardware prefetcher stops at every boundary. On the
// 2-vCPU Xeon of bench/README.md a read of a panel-packed f32 matrix went from
// 10.8 to 12.3 GB/s on one core with huge pages, the same ~+14 % that the
// decoder's f32 step gains.
//
// Linux backs a region with huge pages only if it is 2 MiB-aligned and asked
// for (MADV_HUGEPAGE) or THP is "always"; with THP "never", or elsewhere, the
// memory is ordinary. Values and behaviour never depend on it: it is a
// placement hint.
#ifndef TEXTGEN_BASE_HUGE_PAGES_H_
#define TEXTGEN_BASE_HUGE_PAGES_H_

#include <cstddef>
#include <new>
#include <utility>
#include <vector>

namespace textgen {

// 2 MiB: x86-64's transparent huge page (one page-middle-directory entry).
inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// `bytes` of uninitialised memory, at least 64-byte aligned. From
// `kHugePageBytes` up it is its own mapping, starting on a huge-page boundary
// and advised MADV_HUGEPAGE; its length is `bytes` rounded up to the base page,
// never to a huge page, so the resident size stays the buffer's own (a partial
// last huge page is left in base pages). Smaller buffers, and every buffer
// under AddressSanitizer (whose redzones only guard its own heap), come from
// the ordinary heap. Throws std::bad_alloc if there is no memory.
void* AllocateStreamed(size_t bytes);

// Whether AllocateStreamed(bytes) makes its own huge-page-aligned mapping
// (false: the ordinary heap).
bool IsOwnMapping(size_t bytes);

// Releases what AllocateStreamed(bytes) returned; `bytes` must be the same.
void FreeStreamed(void* p, size_t bytes) noexcept;

// A std::allocator for std::vector<T, StreamedAllocator<T>>: the storage of a
// large, long-lived buffer that decoding streams through (packed weights, the
// KV cache's pool).
template <typename T>
struct StreamedAllocator {
  using value_type = T;
  StreamedAllocator() = default;
  template <typename U>
  StreamedAllocator(const StreamedAllocator<U>&) {}
  T* allocate(size_t n) {
    return static_cast<T*>(AllocateStreamed(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) noexcept { FreeStreamed(p, n * sizeof(T)); }
  // Default-initialises: StreamedVector<float>(n) leaves its floats
  // uninitialised, so a pool's pages are touched (made resident) only as they
  // are first written, as with Eigen's matrices. assign(n, value) and the
  // like still fill.
  template <typename U>
  void construct(U* p) {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <typename U>
  bool operator==(const StreamedAllocator<U>&) const {
    return true;
  }
  template <typename U>
  bool operator!=(const StreamedAllocator<U>&) const {
    return false;
  }
};

template <typename T>
using StreamedVector = std::vector<T, StreamedAllocator<T>>;

}  // namespace textgen

#endif  // TEXTGEN_BASE_HUGE_PAGES_H_
