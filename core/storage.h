#pragma once
// A block of device memory shared by a tensor and its views; freed when the last one lets go.
#include <cstddef>
#include <memory>

#include "core/allocator.h"

namespace minidl {

class Storage {
 public:
  Storage(size_t nbytes, Device device)
      : data_(nbytes ? allocator_for(device).allocate(nbytes) : nullptr), nbytes_(nbytes), device_(device) {}
  ~Storage() {
    if (data_) allocator_for(device_).deallocate(data_, nbytes_);
  }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

 private:
  void* data_;
  size_t nbytes_;
  Device device_;
};

}  // namespace minidl
