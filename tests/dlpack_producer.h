#pragma once
// A stand-in for another framework in the DLPack tests: it lends memory that it keeps alive itself
// (a minidl tensor's, which the importer sees only as a pointer) with any layout the test asks for,
// and counts how often its deleter runs.
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "core/dlpack.h"
#include "core/tensor.h"

namespace minidl::testing {

struct Layout {
  Layout() = default;
  Layout(Shape shape, std::optional<Strides> strides = std::nullopt, uint64_t byte_offset = 0,
         DLDataType dtype = {kDLFloat, 32, 1}, DLDevice device = {kDLCPU, 0})
      : shape(std::move(shape)), strides(std::move(strides)), byte_offset(byte_offset), dtype(dtype), device(device) {}
  Shape shape;
  std::optional<Strides> strides;  // nullopt: DLPack's NULL strides (compact, row-major)
  uint64_t byte_offset = 0;
  DLDataType dtype{kDLFloat, 32, 1};
  DLDevice device{kDLCPU, 0};
};

class FakeProducer {
 public:
  /// Lends `memory`'s bytes, from its first element on, under `layout`.
  template <class Managed = DLManagedTensor>
  Managed* lend(const Tensor& memory, const Layout& layout) {
    auto lent = std::make_unique<Lent<Managed>>();
    lent->memory = memory;
    lent->layout = layout;
    lent->deleted = &deleted_;
    DLTensor& dl = lent->managed.dl_tensor;
    dl.data = memory.raw_data();
    dl.device = layout.device;
    dl.ndim = static_cast<int32_t>(layout.shape.size());
    dl.dtype = layout.dtype;
    dl.shape = lent->layout.shape.data();
    dl.strides = lent->layout.strides ? lent->layout.strides->data() : nullptr;
    dl.byte_offset = layout.byte_offset;
    if constexpr (std::is_same_v<Managed, DLManagedTensorVersioned>) {
      lent->managed.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
      lent->managed.flags = 0;
    }
    lent->managed.manager_ctx = lent.get();
    lent->managed.deleter = [](Managed* self) {
      auto* l = static_cast<Lent<Managed>*>(self->manager_ctx);
      ++*l->deleted;
      delete l;
    };
    return &lent.release()->managed;
  }

  /// How many lent tensors have been given back.
  int deleted() const { return deleted_; }

 private:
  template <class Managed>
  struct Lent {
    Managed managed{};
    Tensor memory;
    Layout layout;
    int* deleted = nullptr;
  };
  int deleted_ = 0;
};

}  // namespace minidl::testing
