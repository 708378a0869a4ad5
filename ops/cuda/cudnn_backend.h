#pragma once
// Small helpers over cuDNN's graph (backend) API, whose descriptors are opaque handles given their
// attributes one cudnnBackendSetAttribute at a time: a descriptor made into a list that destroys it,
// attributes set from an initializer list, and finalize. ops/cuda/cudnn_engine.cpp (a convolution's
// weight gradient) and ops/cuda/cudnn_attention.cpp (fused attention) build their graphs with them.
#include <cudnn.h>

#include <initializer_list>
#include <vector>

#include "core/cuda/cudnn_check.h"

namespace minidl::cudnn::backend {

/// A new descriptor of `type`, owned by `keep` (destroyed by destroy_all(keep)).
inline cudnnBackendDescriptor_t make(cudnnBackendDescriptorType_t type, std::vector<cudnnBackendDescriptor_t>& keep) {
  cudnnBackendDescriptor_t d = nullptr;
  CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &d));
  keep.push_back(d);
  return d;
}

template <class T>
void set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
         std::initializer_list<T> values) {
  CUDNN_CHECK(cudnnBackendSetAttribute(d, name, type, static_cast<int64_t>(values.size()), values.begin()));
}

inline void set_descriptor(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                           cudnnBackendDescriptor_t value) {
  CUDNN_CHECK(cudnnBackendSetAttribute(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value));
}

/// Destroys `keep`'s descriptors, the last made first.
inline void destroy_all(std::vector<cudnnBackendDescriptor_t>& keep) {
  for (auto it = keep.rbegin(); it != keep.rend(); ++it) cudnnBackendDestroyDescriptor(*it);
  keep.clear();
}

}  // namespace minidl::cudnn::backend
