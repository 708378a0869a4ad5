#pragma once
// CPU threading: OpenMP runs the CPU kernels, and Eigen's GEMM uses the same pool.

namespace minidl {

/// Sets the number of CPU threads used by kernels. Results are bit-identical for every count: kernels
/// split their work by the sizes alone, or on boundaries that keep each value's order of operations.
///   set_num_threads(2);
void set_num_threads(int threads);
/// Threads CPU kernels use now (all cores unless set_num_threads was called or OMP_NUM_THREADS is set).
int get_num_threads();

}  // namespace minidl
