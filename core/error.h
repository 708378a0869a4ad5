#pragma once
// The one exception type of minidl, and the CHECK macros that throw it with file and line.
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace minidl {

// Declared here so that error messages can stream shapes; defined in core/shape.cpp.
std::ostream& operator<<(std::ostream& os, const std::vector<int64_t>& shape);

/// Thrown for every failure: bad shapes, dtypes, devices, files, CUDA errors. `what()` says what was
/// expected, what was found, and where.   Example: `try { matmul(a, b); } catch (const Error& e) {}`
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
[[noreturn]] void throw_error(const char* file, int line, const std::string& message);
}  // namespace detail

}  // namespace minidl

/// Throws minidl::Error with the streamed message when `cond` is false.
#define MINIDL_CHECK(cond, ...)                                                              \
  do {                                                                                       \
    if (!(cond)) ::minidl::detail::throw_error(__FILE__, __LINE__, ::minidl::detail::concat(__VA_ARGS__)); \
  } while (0)

/// Throws minidl::Error quoting the condition when it is false, as libtorch's AT_ASSERT.
///   MINIDL_ASSERT(!std::isnan(loss.item<float>()));
#define MINIDL_ASSERT(cond) MINIDL_CHECK(cond, "assertion failed: ", #cond)

/// Throws minidl::Error with the streamed message.
#define MINIDL_FAIL(...) ::minidl::detail::throw_error(__FILE__, __LINE__, ::minidl::detail::concat(__VA_ARGS__))
