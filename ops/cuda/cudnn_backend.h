#pragma once
// Small helpers over cuDNN's graph (backend) API, whose descriptors are opaque handles given their
// attributes one cudnnBackendSetAttribute at a time: a descriptor made into a list that destroys it,
// attributes set from an initializer list, the heuristics' engine configurations, and a plan's
// execution with its variant pack. ops/cuda/cudnn_engine.cpp (a convolution's weight gradient),
// ops/cuda/cudnn_attention.cpp (fused attention) and ops/cuda/cudnn_matmul.cpp (a product times a
// tensor) build their graphs with them.
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

/// A finalized tensor descriptor owned by `keep`: `rank` dims and strides, rows on 16 bytes; virtual
/// (a value inside the graph, never in memory) or by value (a scalar given in the variant pack) where
/// asked.
inline cudnnBackendDescriptor_t tensor(std::vector<cudnnBackendDescriptor_t>& keep, int64_t id, cudnnDataType_t type,
                                       int64_t rank, const int64_t* dims, const int64_t* strides, bool is_virtual,
                                       bool by_value = false) {
  const cudnnBackendDescriptor_t d = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR, keep);
  CUDNN_CHECK(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type));
  CUDNN_CHECK(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, rank, dims));
  CUDNN_CHECK(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, rank, strides));
  set<int64_t>(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, {id});
  set<int64_t>(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, {16});
  if (is_virtual) set<bool>(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, {true});
  if (by_value) set<bool>(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, {true});
  CUDNN_CHECK(cudnnBackendFinalize(d));
  return d;
}

/// Destroys `keep`'s descriptors, the last made first.
inline void destroy_all(std::vector<cudnnBackendDescriptor_t>& keep) {
  for (auto it = keep.rbegin(); it != keep.rend(); ++it) cudnnBackendDestroyDescriptor(*it);
  keep.clear();
}

/// The engine configurations cuDNN's heuristics (mode A) list for a finalized operation graph, best
/// first, owned by `keep`; none where the heuristics cannot be finalized for it.
inline std::vector<cudnnBackendDescriptor_t> heuristic_configs(cudnnBackendDescriptor_t graph,
                                                               std::vector<cudnnBackendDescriptor_t>& keep) {
  const cudnnBackendDescriptor_t heuristics = make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, keep);
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  set_descriptor(heuristics, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
  CUDNN_CHECK(cudnnBackendSetAttribute(heuristics, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode));
  if (cudnnBackendFinalize(heuristics) != CUDNN_STATUS_SUCCESS) return {};
  int64_t count = 0;
  CUDNN_CHECK(cudnnBackendGetAttribute(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                       &count, nullptr));
  std::vector<cudnnBackendDescriptor_t> configs;
  for (int64_t i = 0; i < count; ++i) configs.push_back(make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, keep));
  CUDNN_CHECK(cudnnBackendGetAttribute(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                       &count, configs.data()));
  configs.resize(static_cast<size_t>(count));
  return configs;
}

/// Runs `plan` on `handle`'s stream with a variant pack binding `ids[i]` to `pointers[i]` (count of
/// each) and `workspace`; the pack lives for the call only.
inline void execute(cudnnHandle_t handle, cudnnBackendDescriptor_t plan, const int64_t* ids, void* const* pointers,
                    int64_t count, void* workspace) {
  std::vector<cudnnBackendDescriptor_t> pack_parts;
  const cudnnBackendDescriptor_t pack = make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, pack_parts);
  try {
    CUDNN_CHECK(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, count,
                                         pointers));
    CUDNN_CHECK(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, count, ids));
    CUDNN_CHECK(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace));
    CUDNN_CHECK(cudnnBackendFinalize(pack));
    CUDNN_CHECK(cudnnBackendExecute(handle, plan, pack));
  } catch (...) {
    destroy_all(pack_parts);
    throw;
  }
  destroy_all(pack_parts);
}

}  // namespace minidl::cudnn::backend
