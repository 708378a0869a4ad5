#pragma once
// Blocks carved out of shared device segments, as PyTorch's caching allocator serves the sizes
// between 1 and 10 MiB. A block of its own would be rounded to 2 MiB (cudaMalloc's granularity): a
// float32 [1536, 384] weight, its gradient and each of its Adam moments (2.25 MiB) would take 4 MiB.
// Carved from a 20 MiB segment, each takes its size rounded to 512 bytes. The free pieces of a pool
// are searched best fit; a piece larger than the request is split, and a freed piece merges with
// the free pieces beside it, so a segment whose blocks are all freed is one free piece again.
//
// Header-only and free of CUDA so that its rules are tested on any machine: the caching allocator
// (core/cuda/allocator.cpp) owns one and passes it the calls that take and return segments.
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <set>
#include <utility>

namespace minidl::cuda {

class SegmentPool {
 public:
  static constexpr size_t kSegmentBytes = size_t{20} << 20;

  struct Block {
    void* ptr;
    size_t size;  // what it occupies: the request, unless a rest too small to split stayed with it
  };

  /// A block of `size` bytes (a multiple of 512, at most kSegmentBytes) from `pool`'s segments;
  /// `new_segment(bytes)` is called for a fresh one when no free piece is large enough, and may throw
  /// (nothing is changed then).
  template <class NewSegment>
  Block allocate(size_t size, uint64_t pool, NewSegment&& new_segment) {
    auto& index = free_[pool];
    auto best = index.lower_bound({size, 0});
    if (best == index.end()) {
      const auto base = reinterpret_cast<uintptr_t>(new_segment(kSegmentBytes));
      segments_[base] = pool;
      pieces_[base] = Piece{kSegmentBytes, base, true};
      best = free_[pool].insert({kSegmentBytes, base}).first;
    }
    const uintptr_t address = best->second;
    free_[pool].erase(best);
    Piece& piece = pieces_.at(address);
    if (piece.size > size) {  // the rest stays free, in the same segment
      pieces_[address + size] = Piece{piece.size - size, piece.segment, true};
      free_[pool].insert({piece.size - size, address + size});
      piece.size = size;
    }
    piece.free = false;
    return {reinterpret_cast<void*>(address), piece.size};
  }

  /// Returns a block that allocate gave (to its segment's pool) and gives its size.
  size_t free(void* ptr) {
    auto it = pieces_.find(reinterpret_cast<uintptr_t>(ptr));
    const size_t size = it->second.size;
    const uint64_t pool = segments_.at(it->second.segment);
    auto& index = free_[pool];
    it->second.free = true;
    auto next = std::next(it);
    if (next != pieces_.end() && mergeable(it->second, next->second)) {
      index.erase({next->second.size, next->first});
      it->second.size += next->second.size;
      pieces_.erase(next);
    }
    if (it != pieces_.begin()) {
      auto prev = std::prev(it);
      if (mergeable(prev->second, it->second)) {
        index.erase({prev->second.size, prev->first});
        prev->second.size += it->second.size;
        pieces_.erase(it);
        it = prev;
      }
    }
    index.insert({it->second.size, it->first});
    return size;
  }

  /// Every segment of pool `from`, its blocks live or free, now belongs to `to` (a CUDA graph's
  /// private pool joining the general one when the graph is destroyed).
  void move_pool(uint64_t from, uint64_t to) {
    for (auto& [base, pool] : segments_)
      if (pool == from) pool = to;
    auto node = free_.extract(from);
    if (!node.empty()) free_[to].merge(node.mapped());
  }

  /// Returns `pool`'s wholly free segments through `free_segment(ptr, bytes)`.
  template <class FreeSegment>
  void release_free_segments(uint64_t pool, FreeSegment&& free_segment) {
    auto& index = free_[pool];
    for (auto it = index.lower_bound({kSegmentBytes, 0}); it != index.end();) {
      const uintptr_t base = it->second;
      it = index.erase(it);
      pieces_.erase(base);
      segments_.erase(base);
      free_segment(reinterpret_cast<void*>(base), kSegmentBytes);
    }
  }

  /// Whether `pool` has a wholly free segment that release_free_segments would return.
  bool has_free_segment(uint64_t pool) const {
    auto it = free_.find(pool);
    return it != free_.end() && it->second.lower_bound({kSegmentBytes, 0}) != it->second.end();
  }

  /// Free bytes inside segments that also hold live blocks: what the cache keeps that
  /// release_free_segments cannot return (PyTorch's inactive_split_bytes).
  size_t inactive_split_bytes() const {
    size_t bytes = 0;
    for (const auto& [address, piece] : pieces_)
      if (piece.free && piece.size < kSegmentBytes) bytes += piece.size;
    return bytes;
  }

  size_t segments() const { return segments_.size(); }

 private:
  struct Piece {
    size_t size;
    uintptr_t segment;  // the base address of the segment it lies in
    bool free;
  };
  static bool mergeable(const Piece& left, const Piece& right) {
    return left.free && right.free && left.segment == right.segment;
  }

  std::map<uintptr_t, uint64_t> segments_;                          // base address -> pool
  std::map<uintptr_t, Piece> pieces_;                               // every piece of every segment, by address
  std::map<uint64_t, std::set<std::pair<size_t, uintptr_t>>> free_;  // free pieces by pool, then (size, address)
};

}  // namespace minidl::cuda
