// ProcessGroup in a build without NCCL: the same API, and one clear error where a group is made.
#include "core/error.h"
#include "distributed/process_group.h"

namespace minidl::distributed {

struct ProcessGroup::Impl {};

bool nccl_available() { return false; }

std::string nccl_unavailable_reason() {
#ifdef MINIDL_WITH_CUDA
  return "minidl was built without NCCL (nccl.h and libnccl were not found at configure time); rebuild with "
         "-DNCCL_ROOT=<prefix with include/nccl.h and lib/libnccl.so.2> (pip's nvidia-nccl package has both)";
#else
  return "minidl was built without CUDA, and the process group runs on NCCL, which needs CUDA GPUs; rebuild with "
         "the CUDA toolkit and NCCL";
#endif
}

ProcessGroup::ProcessGroup(int rank, int world_size, const Rendezvous&, Device device, ProcessGroupOptions)
    : rank_(rank), world_size_(world_size), device_(device) {
  MINIDL_FAIL("ProcessGroup: ", nccl_unavailable_reason());
}
ProcessGroup::~ProcessGroup() = default;

void ProcessGroup::all_reduce(Tensor&, ReduceOp) { MINIDL_FAIL("all_reduce: ", nccl_unavailable_reason()); }
void ProcessGroup::broadcast(Tensor&, int) { MINIDL_FAIL("broadcast: ", nccl_unavailable_reason()); }
Tensor ProcessGroup::all_gather(const Tensor&) { MINIDL_FAIL("all_gather: ", nccl_unavailable_reason()); }
void ProcessGroup::barrier() { MINIDL_FAIL("barrier: ", nccl_unavailable_reason()); }
void ProcessGroup::all_reduce_overlapped(Tensor&, ReduceOp) { MINIDL_FAIL("all_reduce: ", nccl_unavailable_reason()); }
void ProcessGroup::join() {}

}  // namespace minidl::distributed
