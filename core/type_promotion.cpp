#include "core/type_promotion.h"

namespace minidl {

namespace {

enum class Category { Bool, Integral, Floating };

Category category(DType dtype) {
  if (dtype == kBool) return Category::Bool;
  return is_floating(dtype) ? Category::Floating : Category::Integral;
}

// The running promotion of one priority level; `any` is false until an operand is seen.
struct Level {
  bool any = false;
  DType dtype = kBool;
  void add(DType d) {
    dtype = any ? promote_types(dtype, d) : d;
    any = true;
  }
};

// A lower priority level lifts the result only into a higher category (PyTorch's combine_categories).
DType combine(const Level& higher, const Level& lower) {
  if (!higher.any) return lower.dtype;
  if (!lower.any || category(lower.dtype) <= category(higher.dtype)) return higher.dtype;
  return promote_types(higher.dtype, lower.dtype);
}

struct Levels {
  Level dimensioned, zero_dim, wrapped;
  void add(const Tensor& t) {
    if (!t.defined()) return;
    if (t.is_wrapped_number()) {
      // A wrapped number stands for its category: a floating one is the default float dtype.
      wrapped.add(is_floating(t.dtype()) ? kDefaultFloat : t.dtype());
    } else {
      (t.dim() == 0 ? zero_dim : dimensioned).add(t.dtype());
    }
  }
  DType result() const {
    MINIDL_CHECK(dimensioned.any || zero_dim.any || wrapped.any, "result_type: expected at least one defined operand");
    Level rest;
    rest.any = zero_dim.any || wrapped.any;
    rest.dtype = combine(zero_dim, wrapped);
    return combine(dimensioned, rest);
  }
};

}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  // uint8 and int8 hold no common range smaller than int16, which minidl lacks: the pair goes to
  // int32, the next integer dtype that holds both (PyTorch gives int16).
  if ((a == kUInt8 && b == kInt8) || (a == kInt8 && b == kUInt8)) return kInt32;
  // Neither 16-bit floating type holds the other (range against precision): float32 holds both.
  if (is_reduced_floating(a) && is_reduced_floating(b)) return kFloat32;
  // Every other pair promotes to the larger of the two in bool < uint8, int8 < int32 < int64 <
  // bfloat16, float16 < float32 < float64: the categories order them first, so an int64 with a
  // bfloat16 gives bfloat16.
  auto rank = [](DType d) {
    switch (d) {
      case DType::Bool: return 0;
      case DType::UInt8: return 1;
      case DType::Int8: return 1;
      case DType::Int32: return 2;
      case DType::Int64: return 3;
      case DType::BFloat16: return 4;
      case DType::Float16: return 4;
      case DType::Float32: return 5;
      case DType::Float64: return 6;
    }
    return 6;
  };
  return rank(a) >= rank(b) ? a : b;
}

namespace {
template <class Tensors>
DType result_type_of(const Tensors& operands) {
  Levels levels;
  for (const Tensor& t : operands) levels.add(t);
  return levels.result();
}
}  // namespace

DType result_type(std::initializer_list<Tensor> operands) { return result_type_of(operands); }
DType result_type(const std::vector<Tensor>& operands) { return result_type_of(operands); }

DType result_type(const Tensor& tensor, const Scalar& scalar) {
  Levels levels;
  levels.add(tensor);
  levels.wrapped.add(scalar.is_floating_point() ? kDefaultFloat : scalar.dtype());
  return levels.result();
}

bool can_cast(DType from, DType to) {
  return category(from) <= category(to);
}

void check_inplace_cast(const char* op, DType result, DType destination) {
  MINIDL_CHECK(can_cast(result, destination), op, ": result type ", result, " can't be cast to the desired output type ",
               destination, " (an in-place op keeps its destination's dtype; use the out-of-place op, or convert "
               "the destination first with .to(", result, "))");
}

}  // namespace minidl
