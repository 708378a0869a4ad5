#include "core/cuda/graph_memsets.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/cuda/check.h"
#include "core/cuda/launch.cuh"

namespace minidl::cuda {

namespace {

// The memset's value repeated over 32 bits. A memset of 2- or 4-byte elements starts on a multiple
// of its element size, so byte b of memory gets byte (b % 4) of this word wherever it lies.
uint32_t repeated_word(uint32_t value, unsigned element_size) {
  if (element_size == 1) return (value & 0xffu) * 0x01010101u;
  if (element_size == 2) return (value & 0xffffu) * 0x00010001u;
  return value;
}

// `bytes` bytes from `dst` set to `word`'s pattern: 16 bytes a store between the 16-byte boundaries,
// single bytes at the two ends.
__global__ void fill_bytes_kernel(unsigned char* dst, size_t bytes, uint32_t word) {
  wait_for_earlier_kernels();  // started early where the node before is a kernel (below)
  const size_t first = blockIdx.x * size_t(blockDim.x) + threadIdx.x, stride = size_t(gridDim.x) * blockDim.x;
  const uintptr_t start = reinterpret_cast<uintptr_t>(dst);
  const size_t head = std::min<size_t>(bytes, (16 - start % 16) % 16);
  const size_t vectors = (bytes - head) / 16;
  const uint4 v = make_uint4(word, word, word, word);
  uint4* body = reinterpret_cast<uint4*>(dst + head);
  for (size_t i = first; i < vectors; i += stride) body[i] = v;
  const auto set_byte = [&](size_t i) {
    dst[i] = static_cast<unsigned char>(word >> (8 * ((start + i) % 4)));
  };
  if (first < head) set_byte(first);
  for (size_t i = head + vectors * 16 + first; i < bytes; i += stride) set_byte(i);
}

// A 2-D memset whose rows are not back to back: element by element.
__global__ void fill_rows_kernel(unsigned char* dst, size_t pitch, size_t width, size_t height,
                                 unsigned element_size, uint32_t value) {
  wait_for_earlier_kernels();
  const size_t n = width * height;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned char* p = dst + (i / width) * pitch + (i % width) * element_size;
    if (element_size == 1) *p = static_cast<unsigned char>(value);
    else if (element_size == 2) *reinterpret_cast<uint16_t*>(p) = static_cast<uint16_t>(value);
    else *reinterpret_cast<uint32_t*>(p) = value;
  }
}

constexpr unsigned kThreads = 256;

unsigned fill_blocks(size_t work, int device) {
  int sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const size_t wanted = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<size_t>(wanted, 1, size_t(4) * static_cast<size_t>(std::max(sms, 1))));
}

// The edges into (`into`) or out of a node, with their data.
struct Edges {
  std::vector<cudaGraphNode_t> nodes;
  std::vector<cudaGraphEdgeData> data;
};

Edges edges_of(cudaGraphNode_t node, bool into) {
  size_t n = 0;
  if (into) CUDA_CHECK(cudaGraphNodeGetDependencies(node, nullptr, nullptr, &n));
  else CUDA_CHECK(cudaGraphNodeGetDependentNodes(node, nullptr, nullptr, &n));
  Edges e{std::vector<cudaGraphNode_t>(n), std::vector<cudaGraphEdgeData>(n)};
  if (n == 0) return e;
  if (into) CUDA_CHECK(cudaGraphNodeGetDependencies(node, e.nodes.data(), e.data.data(), &n));
  else CUDA_CHECK(cudaGraphNodeGetDependentNodes(node, e.nodes.data(), e.data.data(), &n));
  return e;
}

cudaGraphNode_t add_fill_node(cudaGraph_t graph, const cudaMemsetParams& m, int device) {
  const size_t row_bytes = m.width * m.elementSize;
  cudaKernelNodeParams k{};
  k.blockDim = dim3(kThreads);
  unsigned char* dst = static_cast<unsigned char*>(m.dst);
  size_t bytes = row_bytes * m.height;
  uint32_t word = repeated_word(m.value, m.elementSize);
  size_t pitch = m.pitch, width = m.width, height = m.height;
  unsigned element_size = m.elementSize;
  uint32_t value = m.value;
  void* bytes_args[] = {&dst, &bytes, &word};
  void* rows_args[] = {&dst, &pitch, &width, &height, &element_size, &value};
  if (m.height <= 1 || m.pitch == row_bytes) {
    k.func = reinterpret_cast<void*>(fill_bytes_kernel);
    k.gridDim = dim3(fill_blocks(bytes / 16 + 16, device));
    k.kernelParams = bytes_args;
  } else {
    k.func = reinterpret_cast<void*>(fill_rows_kernel);
    k.gridDim = dim3(fill_blocks(m.width * m.height, device));
    k.kernelParams = rows_args;
  }
  cudaGraphNode_t node = nullptr;
  CUDA_CHECK(cudaGraphAddKernelNode(&node, graph, nullptr, 0, &k));  // copies the arguments
  return node;
}

}  // namespace

int memset_nodes_to_kernels(cudaGraph_t graph) {
  size_t count = 0;
  CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  if (count > 0) CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  int replaced = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    if (type != cudaGraphNodeTypeMemset) continue;
    cudaMemsetParams m{};
    CUDA_CHECK(cudaGraphMemsetNodeGetParams(node, &m));
    Edges in = edges_of(node, true);
    const Edges out = edges_of(node, false);
    const cudaGraphNode_t fill = add_fill_node(graph, m, device);
    // The fill may start while a kernel it follows still runs, and waits in the kernel for it to
    // finish (wait_for_earlier_kernels): the product after it then waits for the fill's last store
    // rather than for its launch. After one of minidl's kernels (which let the next start early), a
    // product of char_gpt's step on an H200 now starts 0.4 us after it rather than 1.0. After a
    // library's kernel, which lets nothing start early, the fill starts as that kernel ends.
    if (early_launch_enabled())
      for (size_t i = 0; i < in.nodes.size(); ++i) {
        cudaGraphNodeType from;
        CUDA_CHECK(cudaGraphNodeGetType(in.nodes[i], &from));
        if (from != cudaGraphNodeTypeKernel || in.data[i].type != cudaGraphDependencyTypeDefault) continue;
        in.data[i].from_port = cudaGraphKernelNodePortProgrammatic;
        in.data[i].type = cudaGraphDependencyTypeProgrammatic;
      }
    const std::vector<cudaGraphNode_t> fills_in(in.nodes.size(), fill), fills_out(out.nodes.size(), fill);
    if (!in.nodes.empty())
      CUDA_CHECK(cudaGraphAddDependencies(graph, in.nodes.data(), fills_in.data(), in.data.data(), in.nodes.size()));
    if (!out.nodes.empty())
      CUDA_CHECK(
          cudaGraphAddDependencies(graph, fills_out.data(), out.nodes.data(), out.data.data(), out.nodes.size()));
    CUDA_CHECK(cudaGraphDestroyNode(node));
    ++replaced;
  }
  return replaced;
}

}  // namespace minidl::cuda
