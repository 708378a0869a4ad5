#pragma once
// Example: one item of a data set, or a batch of them once stacked, as libtorch's data::Example.
#include "core/tensor.h"

namespace minidl::data {

/// An input and its target. The defaults hold one tensor each; a pipeline may carry other types
/// (libtorch's Example<Data, Target>).   Example<> e{image, label};   e.data, e.target
template <class Data = Tensor, class Target = Tensor>
struct Example {
  using DataType = Data;
  using TargetType = Target;
  Data data;
  Target target;
};

}  // namespace minidl::data
