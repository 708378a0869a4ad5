// cuda::Graph in a build without CUDA: the same API, explaining that there is no GPU.
#ifndef MINIDL_WITH_CUDA
#include "core/cuda_graph.h"

#include "core/cuda.h"

namespace minidl::cuda {

struct Graph::Impl {};

Graph::Graph(Device device) { MINIDL_FAIL("cuda::Graph on ", device, ": ", unavailable_reason()); }
Graph::~Graph() = default;
void Graph::capture_begin() {}
void Graph::capture_end() {}
void Graph::capture_abort() noexcept {}
int Graph::capture_copy(const Tensor&, Tensor&) { return 0; }
void Graph::set_copy_source(int, const Tensor&) {}
int Graph::capture_scalar_writes(const std::vector<Tensor*>&, const std::vector<double>&) { return 0; }
void Graph::set_scalar_values(int, const std::vector<double>&) {}
void Graph::replay() {}
bool Graph::captured() const { return false; }
size_t Graph::num_nodes() const { return 0; }
Device Graph::device() const { return Device::cpu(); }

}  // namespace minidl::cuda
#endif
