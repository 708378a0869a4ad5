// The rules by which the CUDA caching allocator carves blocks of 1 to 10 MiB out of shared segments
// (core/cuda/segment_pool.h), on host memory standing in for device segments: best fit, splitting,
// merging freed neighbours, private pools kept apart, and whole free segments returned.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <random>
#include <vector>

#include "core/cuda/segment_pool.h"

namespace minidl::segment_pool_test {

using minidl::cuda::SegmentPool;

namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kSegment = SegmentPool::kSegmentBytes;

// Hands out host buffers as segments and checks that each comes back once, whole.
struct FakeDevice {
  std::map<char*, size_t> segments;
  int allocs = 0;
  void* take(size_t bytes) {
    char* p = static_cast<char*>(std::aligned_alloc(512, bytes));
    segments[p] = bytes;
    ++allocs;
    return p;
  }
  void give(void* p, size_t bytes) {
    auto it = segments.find(static_cast<char*>(p));
    ASSERT_NE(it, segments.end()) << "a segment returned that was never given";
    EXPECT_EQ(it->second, bytes);
    std::free(p);
    segments.erase(it);
  }
  ~FakeDevice() {
    for (auto& [p, bytes] : segments) std::free(p);
  }
  auto taker() {
    return [this](size_t bytes) { return take(bytes); };
  }
  auto giver() {
    return [this](void* p, size_t bytes) { give(p, bytes); };
  }
  bool inside_one(void* p, size_t size) const {
    auto it = segments.upper_bound(static_cast<char*>(p));
    if (it == segments.begin()) return false;
    --it;
    return static_cast<char*>(p) >= it->first && static_cast<char*>(p) + size <= it->first + it->second;
  }
};

}  // namespace

TEST(SegmentPool, CarvesSeveralBlocksOutOfOneSegmentAtTheirOwnSize) {
  FakeDevice device;
  SegmentPool pool;
  const size_t weight = 2304 * kMiB / 1024;  // a float32 [1536, 384]: 2.25 MiB
  std::vector<SegmentPool::Block> blocks;
  for (int i = 0; i < 8; ++i) blocks.push_back(pool.allocate(weight, 0, device.taker()));
  EXPECT_EQ(device.allocs, 1) << "eight 2.25 MiB blocks fit one 20 MiB segment";
  for (const auto& b : blocks) {
    EXPECT_EQ(b.size, weight);
    EXPECT_TRUE(device.inside_one(b.ptr, b.size));
  }
  for (size_t i = 0; i < blocks.size(); ++i)
    for (size_t j = i + 1; j < blocks.size(); ++j) {
      const auto a = reinterpret_cast<uintptr_t>(blocks[i].ptr), b = reinterpret_cast<uintptr_t>(blocks[j].ptr);
      EXPECT_TRUE(a + weight <= b || b + weight <= a) << "blocks " << i << " and " << j << " overlap";
    }
  EXPECT_EQ(pool.inactive_split_bytes(), kSegment - 8 * weight);
  pool.allocate(weight, 0, device.taker());  // 2 MiB left: the ninth needs a new segment
  EXPECT_EQ(device.allocs, 2);
}

TEST(SegmentPool, BestFitAndFreedNeighboursMerge) {
  FakeDevice device;
  SegmentPool pool;
  auto a = pool.allocate(3 * kMiB, 0, device.taker());
  auto b = pool.allocate(2 * kMiB, 0, device.taker());
  auto c = pool.allocate(4 * kMiB, 0, device.taker());
  auto d = pool.allocate(1536 * 1024, 0, device.taker());
  ASSERT_EQ(device.allocs, 1);
  EXPECT_EQ(pool.free(b.ptr), 2 * kMiB);
  // The smallest free piece that fits is b's hole, not the segment's 9.5 MiB tail.
  auto e = pool.allocate(2 * kMiB, 0, device.taker());
  EXPECT_EQ(e.ptr, b.ptr);
  pool.free(e.ptr);
  pool.free(c.ptr);  // merges with b's hole: 6 MiB from b's address
  auto f = pool.allocate(6 * kMiB, 0, device.taker());
  EXPECT_EQ(f.ptr, b.ptr) << "the freed neighbours did not merge into one piece";
  EXPECT_EQ(device.allocs, 1);
  pool.free(f.ptr);
  pool.free(a.ptr);
  EXPECT_GT(pool.inactive_split_bytes(), 0u);
  pool.free(d.ptr);  // the last live block: the segment is one free piece again
  EXPECT_EQ(pool.inactive_split_bytes(), 0u);
  EXPECT_TRUE(pool.has_free_segment(0));
  pool.release_free_segments(0, device.giver());
  EXPECT_TRUE(device.segments.empty());
  EXPECT_EQ(pool.segments(), 0u);
}

TEST(SegmentPool, PrivatePoolsNeverShareASegmentUntilMoved) {
  FakeDevice device;
  SegmentPool pool;
  auto general = pool.allocate(2 * kMiB, 0, device.taker());
  auto captured = pool.allocate(2 * kMiB, 7, device.taker());
  EXPECT_EQ(device.allocs, 2) << "a graph's pool took a block from the general pool's segment";
  pool.free(captured.ptr);
  auto again = pool.allocate(2 * kMiB, 0, device.taker());
  EXPECT_NE(again.ptr, captured.ptr) << "the general pool took a block of the graph's segment";
  // Still free in pool 7, its whole segment can be released only from there, or after the move.
  pool.release_free_segments(0, device.giver());
  EXPECT_EQ(device.segments.size(), 2u);
  pool.move_pool(7, 0);
  auto reused = pool.allocate(2 * kMiB, 0, device.taker());
  EXPECT_EQ(device.allocs, 2) << "after the move the general pool did not reuse the graph's segment";
  pool.free(reused.ptr);
  pool.free(general.ptr);
  pool.free(again.ptr);
  pool.release_free_segments(0, device.giver());
  EXPECT_TRUE(device.segments.empty());
}

TEST(SegmentPool, RandomTrafficKeepsBlocksApartAndEndsWhole) {
  FakeDevice device;
  SegmentPool pool;
  std::mt19937 rng(1234);
  std::uniform_int_distribution<size_t> units(2049, 20480);  // 1 to 10 MiB in 512-byte units
  std::vector<SegmentPool::Block> live;
  for (int step = 0; step < 4000; ++step) {
    if (!live.empty() && (rng() % 2 == 0 || live.size() > 40)) {
      const size_t i = rng() % live.size();
      EXPECT_EQ(pool.free(live[i].ptr), live[i].size);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      const size_t size = units(rng) * 512;
      auto b = pool.allocate(size, 0, device.taker());
      ASSERT_EQ(b.size, size);
      ASSERT_TRUE(device.inside_one(b.ptr, b.size));
      for (const auto& other : live) {
        const auto x = reinterpret_cast<uintptr_t>(b.ptr), y = reinterpret_cast<uintptr_t>(other.ptr);
        ASSERT_TRUE(x + b.size <= y || y + other.size <= x) << "two live blocks overlap at step " << step;
      }
      live.push_back(b);
    }
  }
  for (const auto& b : live) pool.free(b.ptr);
  EXPECT_EQ(pool.inactive_split_bytes(), 0u);
  const size_t segments = device.segments.size();
  EXPECT_EQ(pool.segments(), segments);
  pool.release_free_segments(0, device.giver());
  EXPECT_TRUE(device.segments.empty()) << "a segment stayed split with every block freed";
}

}  // namespace minidl::segment_pool_test
