#pragma once
// A block of device memory shared by a tensor and its views; freed when the last one lets go.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>

#include "core/allocator.h"
#include "core/error.h"

namespace minidl {

class Storage {
 public:
  Storage(size_t nbytes, Device device)
      : data_(nbytes ? allocator_for(device).allocate(nbytes) : nullptr), nbytes_(nbytes), device_(device) {}
  /// Memory minidl did not allocate (another framework's, shared through DLPack): `release` runs
  /// once, when the last tensor using it lets go, in place of the allocator. It must not throw.
  Storage(void* data, size_t nbytes, Device device, std::function<void()> release)
      : data_(data), nbytes_(nbytes), device_(device), release_(std::move(release)) {
    // Without one, the destructor would hand foreign memory to minidl's allocator.
    MINIDL_CHECK(release_, "Storage: external memory on ", device, " needs a release function, got an empty one");
  }
  ~Storage() {
    if (release_) {
      release_();
    } else if (data_) {
      allocator_for(device_).deallocate(data_, nbytes_);
    }
  }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  /// True for memory another framework owns (see the second constructor).
  bool is_external() const { return static_cast<bool>(release_); }

  /// How many in-place writes this memory has seen, through any view or detached alias. What
  /// autograd saves for a backward remembers the version it saw; the backward refuses a later one.
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  void* data_;
  size_t nbytes_;
  Device device_;
  std::function<void()> release_;  // set for external memory only
  std::atomic<uint64_t> version_{0};
};

}  // namespace minidl
