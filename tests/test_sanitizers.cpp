// The sanitizer build (scripts/sanitize.sh) must see into minidl's CPU allocator, which rounds
// sizes up and keeps freed blocks of 1 MiB and more for reuse: a read past a tensor's bytes into
// the rounding, and a read of a freed block the allocator still holds, must both be reported.
// Without AddressSanitizer these tests skip.
#include <gtest/gtest.h>

#include "minidl.h"

#if defined(__SANITIZE_ADDRESS__)  // GCC
#define MINIDL_TEST_ASAN 1
#elif defined(__has_feature)  // clang
#if __has_feature(address_sanitizer)
#define MINIDL_TEST_ASAN 1
#endif
#endif

namespace minidl::sanitizers_test {

namespace {

[[maybe_unused]] int read_byte(const void* p, size_t i) { return static_cast<const volatile uint8_t*>(p)[i]; }

TEST(Sanitizers, AReadPastATensorIntoTheRoundedUpBlockIsReported) {
#ifndef MINIDL_TEST_ASAN
  GTEST_SKIP() << "needs AddressSanitizer: scripts/sanitize.sh";
#else
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Tensor t = Tensor::empty({300}, kFloat32);  // 1,200 bytes in a block of 1,216
  const void* p = t.raw_data();
  read_byte(p, 1199);
  EXPECT_DEATH(read_byte(p, 1200), "AddressSanitizer: use-after-poison");
#endif
}

TEST(Sanitizers, AReadOfAFreedTensorTheAllocatorKeepsIsReported) {
#ifndef MINIDL_TEST_ASAN
  GTEST_SKIP() << "needs AddressSanitizer: scripts/sanitize.sh";
#else
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Tensor big = Tensor::empty({1 << 19}, kFloat32);  // 2 MiB: cached when freed
  const void* p = big.raw_data();
  read_byte(p, 0);
  const MemoryStats before = memory_stats(Device::cpu());
  big = Tensor();
  const MemoryStats after = memory_stats(Device::cpu());
  ASSERT_EQ(after.bytes_held, before.bytes_held) << "the block went back to the system: nothing to test";
  EXPECT_DEATH(read_byte(p, 0), "AddressSanitizer: use-after-poison");
  EXPECT_DEATH(read_byte(p, (size_t{2} << 20) - 1), "AddressSanitizer: use-after-poison");
#endif
}

}  // namespace

}  // namespace minidl::sanitizers_test
