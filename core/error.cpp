#include "core/error.h"

#include <string_view>

namespace minidl::detail {

void throw_error(const char* file, int line, const std::string& message) {
  // Keep the path relative to the source tree: the message should point at our file, not the build machine.
  std::string_view path(file);
  for (std::string_view top : {"/core/", "/ops/", "/nn/", "/optim/", "/data/", "/apps/"}) {
    if (auto pos = path.rfind(top); pos != std::string_view::npos) {
      path = path.substr(pos + 1);
      break;
    }
  }
  throw Error(message + " (" + std::string(path) + ":" + std::to_string(line) + ")");
}

}  // namespace minidl::detail
