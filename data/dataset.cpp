// TensorDataset: rows as views, so get() costs no copy.
#include "data/dataset.h"

namespace minidl::data {

namespace {

Tensor row(const Tensor& t, int64_t index) {
  Shape shape(t.shape().begin() + 1, t.shape().end());
  Strides strides(t.strides().begin() + 1, t.strides().end());
  return Tensor::make_view(t, shape, strides, t.offset() + index * t.strides()[0]);
}

}  // namespace

TensorDataset::TensorDataset(Tensor data, Tensor targets) {
  MINIDL_CHECK(data.defined() && targets.defined(), "TensorDataset: data and targets must be defined tensors");
  // Contiguous once here, so that gathering a batch never has to copy the whole data set.
  data_ = data.contiguous();
  targets_ = targets.contiguous();
  MINIDL_CHECK(data_.dim() >= 1 && targets_.dim() >= 1, "TensorDataset: expected data and targets with a first "
               "dimension indexing the examples, got shapes ", data_.shape(), " and ", targets_.shape());
  MINIDL_CHECK(data_.size(0) == targets_.size(0), "TensorDataset: data holds ", data_.size(0),
               " examples but targets hold ", targets_.size(0), " (shapes ", data_.shape(), " and ", targets_.shape(),
               ")");
  MINIDL_CHECK(data_.device() == targets_.device(), "TensorDataset: data is on ", data_.device(),
               " but targets are on ", targets_.device());
}

Example<> TensorDataset::get(int64_t index) const {
  MINIDL_CHECK(index >= 0 && index < size(), "TensorDataset::get: index ", index, " is out of range for ", size(),
               " examples");
  return {row(data_, index), row(targets_, index)};
}

}  // namespace minidl::data
