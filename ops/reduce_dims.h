#pragma once
// The dim lists of the reductions (reduce.cpp, reduce_stats.cpp) and the shapes they leave.
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace minidl::detail {

// `dims` wrapped into [0, rank) and sorted; a repeated dim is an error of `op`. Empty gives empty.
std::vector<int64_t> normalize_dims(const std::vector<int64_t>& dims, int64_t rank, const char* op);

// 0, 1, ..., rank - 1: a reduction over every dim.
std::vector<int64_t> all_dims(int64_t rank);

// `shape` without the sorted `dims`, or with them as 1 under keepdim.
Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& dims, bool keepdim);

}  // namespace minidl::detail
