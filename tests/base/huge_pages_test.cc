// base/huge_pages.h: where large streamed buffers live. Values never depend
// on it; these tests hold the placement to what the header promises.
#include "base/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "base/resident_memory.h"
#include "model/kernels/kernels.h"

namespace textgen {
namespace {

// Transparent huge pages as this kernel offers them: "always", "madvise",
// "never", or "" where the file is absent.
std::string TransparentHugePageMode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(in, line);
  const size_t open = line.find('['), close = line.find(']');
  if (open == std::string::npos || close == std::string::npos) return "";
  return line.substr(open + 1, close - open - 1);
}

// The "THPeligible:" of the mapping in /proc/self/smaps that holds `p`, or -1.
int ThpEligible(const void* p) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(p);
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream header(line);
    if (header >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = begin <= address && address < end;
    } else if (inside && line.rfind("THPeligible:", 0) == 0) {
      return std::stoi(line.substr(12));
    }
  }
  return -1;
}

TEST(HugePagesTest, LargeBuffersStartOnAHugePageAndAreAdvised) {
  const size_t bytes = 5 * kHugePageBytes + 12345;
  if (!IsOwnMapping(bytes)) {
    GTEST_SKIP() << "this build (AddressSanitizer) keeps every buffer on the "
                    "ordinary heap";
  }
  void* p = AllocateStreamed(bytes);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kHugePageBytes, 0u);
  // Every byte is ours: written and read back at both ends and in between.
  auto* bytes_p = static_cast<unsigned char*>(p);
  std::memset(bytes_p, 0xa5, bytes);
  EXPECT_EQ(bytes_p[0], 0xa5);
  EXPECT_EQ(bytes_p[bytes / 2], 0xa5);
  EXPECT_EQ(bytes_p[bytes - 1], 0xa5);
  const std::string mode = TransparentHugePageMode();
  if (mode == "always" || mode == "madvise") {
    // MADV_HUGEPAGE took: the kernel may back this mapping with huge pages.
    EXPECT_EQ(ThpEligible(p), 1) << "THP mode " << mode;
  }
  FreeStreamed(p, bytes);
}

TEST(HugePagesTest, SmallBuffersComeFromTheHeapAligned) {
  EXPECT_FALSE(IsOwnMapping(kHugePageBytes - 1));
  void* p = AllocateStreamed(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  std::memset(p, 1, 1000);
  FreeStreamed(p, 1000);
}

TEST(HugePagesTest, StreamedVectorGrowsAcrossTheThresholdKeepingItsValues) {
  StreamedVector<float> v;
  for (int i = 0; i < 1 << 20; ++i) v.push_back(static_cast<float>(i));
  ASSERT_EQ(v.size(), size_t{1} << 20);  // 4 MiB: its own mapping by now.
  for (int i = 0; i < 1 << 20; i += 4099)
    ASSERT_EQ(v[i], static_cast<float>(i));
  StreamedVector<float> copy = v;
  EXPECT_EQ(copy, v);
  v.clear();
  v.shrink_to_fit();
  EXPECT_EQ(copy[(1 << 20) - 1], static_cast<float>((1 << 20) - 1));
}

// A KV cache's pool is sized for every slot's whole context but filled as
// sequences grow: StreamedVector<T>(n) must not touch its pages.
TEST(HugePagesTest, ASizedVectorIsNotResidentUntilWritten) {
  const size_t n = size_t{64} << 20;  // 256 MiB of floats.
  if (!IsOwnMapping(n * sizeof(float))) {
    GTEST_SKIP() << "under AddressSanitizer the heap's allocator (and its "
                    "shadow memory) decide what is resident";
  }
  const uint64_t before = ResidentMemoryBytes();
  if (before == 0) GTEST_SKIP() << "no /proc/self/status here";
  StreamedVector<float> pool(n);
  const uint64_t sized = ResidentMemoryBytes();
  EXPECT_LT(sized, before + (uint64_t{16} << 20))
      << "constructing the pool made it resident";
  for (size_t i = 0; i < n; i += 1024) pool[i] = 1.0f;  // Every page.
  EXPECT_GT(ResidentMemoryBytes(), before + (uint64_t{200} << 20))
      << "writing the pool should have made it resident";
}

// Packed weights, the buffers this is for, hold the same values wherever
// they live: one matrix above the threshold in each storage type.
TEST(HugePagesTest, PackedWeightsOnHugePagesKeepTheirValues) {
  const int depth = 768, cols = 1024;  // 3 MiB of f32.
  std::vector<float> w(static_cast<size_t>(depth) * cols);
  for (size_t i = 0; i < w.size(); ++i) {
    w[i] = static_cast<float>((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
  }
  for (kernels::WeightType type :
       {kernels::WeightType::kF32, kernels::WeightType::kBF16,
        kernels::WeightType::kInt8}) {
    const kernels::PackedWeights packed(w.data(), depth, cols, cols, type);
    for (int k = 0; k < depth; k += 97) {
      for (int j = 0; j < cols; j += 31) {
        const float original = w[static_cast<size_t>(k) * cols + j];
        const float tolerance = type == kernels::WeightType::kF32    ? 0.0f
                                : type == kernels::WeightType::kBF16 ? 2e-3f
                                                                     : 4e-3f;
        ASSERT_NEAR(packed.at(k, j), original, tolerance)
            << kernels::WeightTypeName(type) << " k " << k << " j " << j;
      }
    }
  }
}

}  // namespace
}  // namespace textgen
