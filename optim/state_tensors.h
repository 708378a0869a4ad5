#pragma once
// The small tensors a state_dict holds besides buffers: counts and rates as 0-d tensors, per-group
// lists as 1-d float64 ones, and how a mismatched entry is described in an error.
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace minidl::optim {

template <class T>
Tensor state_scalar(T value) {
  Tensor t = Tensor::empty({}, dtype_of<T>());
  *t.data<T>() = value;
  return t;
}

inline Tensor state_doubles(const std::vector<double>& values) {
  return Tensor::from_vector<double>(values, {static_cast<int64_t>(values.size())});
}

inline std::string describe_entry(const Tensor& t) {
  return t.defined() ? minidl::detail::concat(t.dtype(), " of shape ", t.shape()) : "undefined";
}

}  // namespace minidl::optim
