#pragma once
// TensorAccessor: element access to a CPU tensor through its sizes and strides, as libtorch's
// x.accessor<float, 2>(). The tensor must outlive the accessor.
#include <cstddef>
#include <cstdint>

namespace minidl {

/// a[i][j] reads or writes element (i, j) of an N-d CPU tensor of element type T, any strides.
///   auto a = x.accessor<float, 2>();  for (int64_t i = 0; i < a.size(0); ++i) a[i][i] = 1;
template <class T, size_t N>
class TensorAccessor {
 public:
  TensorAccessor(T* data, const int64_t* sizes, const int64_t* strides)
      : data_(data), sizes_(sizes), strides_(strides) {}
  int64_t size(size_t d) const { return sizes_[d]; }
  int64_t stride(size_t d) const { return strides_[d]; }
  T* data() const { return data_; }
  TensorAccessor<T, N - 1> operator[](int64_t i) const {
    return TensorAccessor<T, N - 1>(data_ + i * strides_[0], sizes_ + 1, strides_ + 1);
  }

 private:
  T* data_;
  const int64_t* sizes_;
  const int64_t* strides_;
};

template <class T>
class TensorAccessor<T, 1> {
 public:
  TensorAccessor(T* data, const int64_t* sizes, const int64_t* strides)
      : data_(data), sizes_(sizes), strides_(strides) {}
  int64_t size(size_t d) const { return sizes_[d]; }
  int64_t stride(size_t d) const { return strides_[d]; }
  T* data() const { return data_; }
  T& operator[](int64_t i) const { return data_[i * strides_[0]]; }

 private:
  T* data_;
  const int64_t* sizes_;
  const int64_t* strides_;
};

}  // namespace minidl
