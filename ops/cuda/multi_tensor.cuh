#pragma once
// The multi-tensor launch shared by the fused optimizer steps, GradScaler's unscale and
// clip_grad_norm_'s passes (the idea of PyTorch's multi_tensor_apply): one launch works on up to
// kMaxTensors tensors, block b on kChunk elements of the tensor whose block range holds b. The
// lists travel by value as the kernel's argument, so a launch allocates and copies nothing and
// needs no host sync: it can be captured in a CUDA graph as it is.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "ops/cuda/common.cuh"

namespace minidl::cuda::multi_tensor {

/// Elements per thread, and per block, of every multi-tensor kernel.
constexpr int kPerThread = 4;
constexpr int64_t kChunk = kPerThread * kThreads;

/// kLists lists of up to kMaxTensors tensors: ptr[l][k] is tensor k's pointer in list l (a kernel
/// casts it to its type; null where a list is optional), and blocks block_start[k] up to
/// block_start[k + 1] work on it. Each kernel picks kMaxTensors for its number of lists, to keep
/// the argument within the 4 KB that a kernel's arguments may take.
template <int kLists, int kMaxTensors>
struct TensorLists {
  void* ptr[kLists][kMaxTensors];
  int64_t numel[kMaxTensors];
  unsigned block_start[kMaxTensors + 1];
  int count;
};

/// One tensor's place in a launch, as a caller gives it: its pointer in each list and its element
/// count. A count of 0 takes no place (an empty tensor, or one this launch does not cover).
template <int kLists>
struct TensorEntry {
  void* ptr[kLists];
  int64_t numel;
};

/// The tensor that chunk `chunk` of the lists belongs to (a block per chunk: tensor_of_block).
template <int kLists, int kMaxTensors>
__device__ __forceinline__ int tensor_of_chunk(const TensorLists<kLists, kMaxTensors>& list, unsigned chunk) {
  int t = 0;
  while (t + 1 < list.count && chunk >= list.block_start[t + 1]) ++t;
  return t;
}

/// The tensor of the list that block blockIdx.x works on.
template <int kLists, int kMaxTensors>
__device__ __forceinline__ int tensor_of_block(const TensorLists<kLists, kMaxTensors>& list) {
  return tensor_of_chunk(list, blockIdx.x);
}

/// The first of the Chunk elements of tensor t in chunk `chunk` (block blockIdx.x's by default; a
/// function apart from tensor_of_block, so that a kernel computes it where it first uses it). Chunk
/// is the one the lists were filled with (for_each_list).
template <int64_t Chunk = kChunk, int kLists, int kMaxTensors>
__device__ __forceinline__ int64_t chunk_begin(const TensorLists<kLists, kMaxTensors>& list, int t,
                                               unsigned chunk = blockIdx.x) {
  return (chunk - list.block_start[t]) * Chunk;
}

// A kernel's arguments take at most 4 KB: the lists leave room for the others (scalars, pointers).
constexpr size_t kMaxKernelArgBytes = 4096;
constexpr size_t kOtherArgBytes = 256;
// A grid's x dimension holds at most 2^31 - 1 blocks.
constexpr int64_t kMaxGridBlocks = (int64_t{1} << 31) - 1;

/// Fills lists with entry(0) .. entry(count - 1) in order, and calls launch(list, blocks) each time
/// a list is full or one more tensor would take the grid past its limit, then once for the rest.
/// entry(i) returns a TensorEntry<kLists>; launch gets the list with block_start[count] set. A
/// block takes Chunk elements (a kernel that does little with each, as a sum of squares, takes more
/// than kChunk, so that its blocks are not mostly start and finish).
template <int kLists, int kMaxTensors, int64_t Chunk = kChunk, class Entry, class Launch>
void for_each_list(size_t count, Entry&& entry, Launch&& launch) {
  using List = TensorLists<kLists, kMaxTensors>;
  static_assert(sizeof(List) + kOtherArgBytes <= kMaxKernelArgBytes, "the lists must fit in a kernel's argument");
  List list{};
  unsigned blocks = 0;
  auto flush = [&] {
    if (list.count == 0) return;
    list.block_start[list.count] = blocks;
    launch(static_cast<const List&>(list), blocks);
    list = List{};
    blocks = 0;
  };
  for (size_t i = 0; i < count; ++i) {
    const TensorEntry<kLists> e = entry(i);
    if (e.numel == 0) continue;
    const int64_t tensor_blocks = (e.numel + Chunk - 1) / Chunk;
    MINIDL_CHECK(tensor_blocks <= kMaxGridBlocks, "multi-tensor kernels take tensors of at most ",
                 kMaxGridBlocks * Chunk, " elements; got one of ", e.numel);
    if (blocks + tensor_blocks > kMaxGridBlocks) flush();
    const int k = list.count++;
    for (int l = 0; l < kLists; ++l) list.ptr[l][k] = e.ptr[l];
    list.numel[k] = e.numel;
    list.block_start[k] = blocks;
    blocks += static_cast<unsigned>(tensor_blocks);
    if (list.count == kMaxTensors) flush();
  }
  flush();
}

/// Calls run(static_cast<C*>(nullptr)) with C the type of autocast's 16-bit copies that an update of
/// parameters of type T writes (SgdConfig::copies, AdamMultiConfig::copies: one 16-bit dtype, and
/// only for float32 master weights), or void where it writes none.
template <class T, class Run>
void with_copy_type(const std::vector<Tensor>* copies, Run&& run) {
  DType dtype = kFloat32;
  if (copies)
    for (const Tensor& copy : *copies)
      if (copy.defined()) dtype = copy.dtype();
  if constexpr (std::is_same_v<T, float>) {
    if (dtype == kBFloat16) return run(static_cast<BFloat16*>(nullptr));
    if (dtype == kFloat16) return run(static_cast<Half*>(nullptr));
  }
  run(static_cast<void*>(nullptr));
}

}  // namespace minidl::cuda::multi_tensor
