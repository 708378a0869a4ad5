#pragma once
// Chainable option setters, as in PyTorch's C++ frontend:  Conv2dOptions(1, 32, 3).stride(2).bias(false)

/// Declares a private field `name_` with a setter `name(value)` returning *this and a getter `name()`.
#define MINIDL_ARG(type, name)                   \
 public:                                         \
  auto& name(const type& value) {                \
    name##_ = value;                             \
    return *this;                                \
  }                                              \
  const type& name() const { return name##_; }   \
                                                 \
 private:                                        \
  type name##_

#include <sstream>
#include <string>

#include "core/shape.h"

namespace minidl::nn {
/// "[3, 3]": a pair of sizes as a layer's printed options show it.
inline std::string repr(const Size2& s) {
  std::ostringstream os;
  os << '[' << s.h << ", " << s.w << ']';
  return os.str();
}
}  // namespace minidl::nn
