#pragma once
// The index types of x.index({...}) and x.index_put_({...}, v), as torch::indexing's: integers,
// Slice, None, Ellipsis, bools and tensors (integer indices or bool masks). Types only: what they
// do is in ops/indexing.h.
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

#include "core/error.h"
#include "core/tensor.h"

namespace minidl::indexing {

/// A new dimension of size 1 where it stands (Python's None), or an omitted Slice bound.
///   x.index({None, Slice()})  // x[None, :]
struct NoneType {
  constexpr NoneType() = default;
};
inline constexpr NoneType None;

/// As many full slices as the tensor's dims not otherwise indexed (Python's ...); "..." also works.
///   x.index({Ellipsis, 0})  // x[..., 0]
struct EllipsisType {
  constexpr EllipsisType() = default;
};
inline constexpr EllipsisType Ellipsis;

/// One bound or the step of a Slice: an integer, or None (absent).
class SliceBound {
 public:
  SliceBound(NoneType) {}  // NOLINT: implicit, so that Slice(1, None) reads as in Python
  SliceBound(std::nullopt_t) {}  // NOLINT
  SliceBound(std::optional<int64_t> value) : value_(value) {}  // NOLINT
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  SliceBound(T value) : value_(static_cast<int64_t>(value)) {}  // NOLINT
  const std::optional<int64_t>& value() const { return value_; }

 private:
  std::optional<int64_t> value_;
};

/// Python's start:stop:step. Absent bounds cover the whole dimension; negative ones count from the
/// end and are clamped to it; the step must be positive (checked when used).
///   x.index({Slice(), Slice(1, None), Slice(None, None, 2)})  // x[:, 1:, ::2]
class Slice {
 public:
  Slice(SliceBound start = None, SliceBound stop = None, SliceBound step = None)  // NOLINT
      : start_(start.value()), stop_(stop.value()), step_(step.value().value_or(1)) {}
  const std::optional<int64_t>& start() const { return start_; }
  const std::optional<int64_t>& stop() const { return stop_; }
  int64_t step() const { return step_; }

 private:
  std::optional<int64_t> start_, stop_;
  int64_t step_;
};

/// One entry of an index list. Converts implicitly from each kind, so a braced list mixes them:
///   x.index({0, Slice(1, 3), None, Ellipsis, mask, idx})
class TensorIndex {
 public:
  enum class Kind { None, Ellipsis, Integer, Boolean, Slice, Tensor };

  TensorIndex(NoneType) : kind_(Kind::None) {}  // NOLINT: implicit, as torch::indexing::TensorIndex
  TensorIndex(std::nullopt_t) : kind_(Kind::None) {}  // NOLINT
  TensorIndex(EllipsisType) : kind_(Kind::Ellipsis) {}  // NOLINT
  TensorIndex(const char* text) : kind_(Kind::Ellipsis) {  // NOLINT
    MINIDL_CHECK(text != nullptr && std::string_view(text) == "...",
                 "TensorIndex: the only string index is \"...\" (Ellipsis), got \"", text ? text : "(null)", "\"");
  }
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  TensorIndex(T value) : kind_(Kind::Integer), integer_(static_cast<int64_t>(value)) {}  // NOLINT
  template <class T, std::enable_if_t<std::is_same_v<T, bool>, int> = 0>
  TensorIndex(T value) : kind_(Kind::Boolean), boolean_(value) {}  // NOLINT
  TensorIndex(Slice slice) : kind_(Kind::Slice), slice_(slice) {}  // NOLINT
  TensorIndex(Tensor tensor) : kind_(Kind::Tensor), tensor_(std::move(tensor)) {}  // NOLINT

  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_ellipsis() const { return kind_ == Kind::Ellipsis; }
  bool is_integer() const { return kind_ == Kind::Integer; }
  bool is_boolean() const { return kind_ == Kind::Boolean; }
  bool is_slice() const { return kind_ == Kind::Slice; }
  bool is_tensor() const { return kind_ == Kind::Tensor; }
  int64_t integer() const { return integer_; }
  bool boolean() const { return boolean_; }
  const Slice& slice() const { return slice_; }
  const Tensor& tensor() const { return tensor_; }

 private:
  Kind kind_;
  int64_t integer_ = 0;
  bool boolean_ = false;
  Slice slice_;
  Tensor tensor_;
};

}  // namespace minidl::indexing
