#pragma once
// The CUDA C++ source of a run-time elementwise kernel (cuda::ElementwiseKernel): the user's body in
// a device function of its own, called from grid-stride loops over the output's elements. Plain
// string work, the same in a build without CUDA.
#include <string>
#include <vector>

#include "ops/kernel_params.h"

namespace minidl::rtc {

/// Dims a strided launch walks after merging (as the built-in elementwise kernels).
constexpr int kMaxWalkDims = 8;
/// Pointers a kernel takes, reads and stored writes together (the walk's strides grow with them,
/// and all must fit the 4 KiB of kernel parameters).
constexpr int kMaxOperands = 32;
constexpr int kThreadsPerBlock = 256;

/// One generated kernel: what it reads and writes per element, and the code in between.
struct ElementwiseSpec {
  std::string name;                  // a C identifier; the entry points are <name>_flat32 and so on
  std::vector<KernelParam> reads;    // passed to the body as const values (at least one)
  std::vector<KernelParam> writes;   // locals the body assigns, zero-initialized
  std::vector<bool> stored;          // per write: stored to memory, or computed and dropped
  std::vector<std::string> body;     // statements; the first starts at line 1 of `label`, each next one
                                     // on the line after the previous one ends
  std::string label;                 // the name NVRTC reports errors in the body under: label(line)
};

/// The entry points of every generated kernel, in this order: all operands contiguous with the
/// output's shape (flat), or any strides (strided, walking up to kMaxWalkDims dims); each with 32-bit
/// indices (fewer than 2^31 elements and every offset below 2^31) or 64-bit ones. Their arguments:
/// the reads' pointers, the stored writes' pointers, for strided ones the walk (an array of int64:
/// rank, kMaxWalkDims sizes innermost first, then kMaxWalkDims strides per read), and the element
/// count as unsigned int or long long.
enum EntryPoint : int { kFlat32 = 0, kFlat64, kStrided32, kStrided64, kNumEntryPoints };
std::vector<std::string> entry_point_names(const std::string& kernel_name);

/// The name NVRTC gives the generated file in its log: "<name>.cu".
std::string generated_file_name(const std::string& kernel_name);

/// The complete source NVRTC compiles. Errors in the body are reported as label(line of the body).
std::string generate_elementwise_source(const ElementwiseSpec& spec);

/// "  1 | first line\n  2 | ..." for error messages.
std::string numbered_listing(const std::string& text);

/// A generated source with all that compiling it, reporting its errors and finding its entry points
/// takes (ops/cuda/rtc_compiler.h, ops/cuda/rtc_program.h).
struct GeneratedSource {
  std::string source;                     // complete CUDA C++ source
  size_t source_hash = 0;                 // std::hash of it, to find it among the loaded ones
  std::string file_name;                  // the name NVRTC gives it in its log ("fma1.cu")
  std::string cache_label;                // a C identifier, the disk cache file's prefix
  std::string what;                       // who it is, for errors: cuda::ElementwiseKernel "fma1"
  std::string listing;                    // appended to a compile error: the user's code, numbered
  std::vector<std::string> entry_points;  // entry_point_names(), kNumEntryPoints of them
};

/// generate_elementwise_source(spec) with the rest of what GeneratedSource holds.
GeneratedSource generate_elementwise_kernel(const ElementwiseSpec& spec, const std::string& what);

}  // namespace minidl::rtc
