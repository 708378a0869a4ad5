#pragma once
// The parameter lists of run-time kernels ("float x, int64_t k, bool mask"): parsed into dtypes and
// names, with errors that point at the entry that is wrong. Used by cuda::ElementwiseKernel; runs
// on the host alone, so it is the same in a build without CUDA.
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace minidl::rtc {

/// One declared per-element value.
struct KernelParam {
  DType dtype = kFloat32;
  std::string name;
};

/// Parses a comma-separated list of "type name" entries. The types are float, double, int64_t (or
/// long long) and bool. Errors start with `owner` and name the list as `what`.
///   parse_kernel_params("float x, double y", "input parameter list", "my_kernel")   // {float32 x, float64 y}
std::vector<KernelParam> parse_kernel_params(const std::string& list, const char* what, const std::string& owner);

/// The C type a kernel body sees for `dtype`: float, double, long long (int64_t), bool.
const char* c_type_name(DType dtype);

/// True for a C identifier that is not a C++ keyword.
bool is_identifier(std::string_view text);

/// Names a generated kernel keeps for itself: `i`, `n` and anything starting with `minidl_`.
bool is_reserved_name(std::string_view name);

/// Every identifier in `code` (comments and string literals included: a superset of the names the
/// code uses, which is what deciding what to pass to it needs).
std::set<std::string> identifiers_in(std::string_view code);

}  // namespace minidl::rtc
