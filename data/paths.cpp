// Data-folder resolution and the fetch command quoted in errors.
#include "data/paths.h"

#include <cstdlib>

namespace minidl::data {

namespace {

// The source tree this library was built from, when it is still where it was built: __FILE__ is
// absolute under CMake, so its grandparent is the repository.
std::filesystem::path script_path() {
  std::filesystem::path script = std::filesystem::path(__FILE__).parent_path().parent_path() / "scripts" / "get_data.sh";
  std::error_code ec;
  if (script.is_absolute() && std::filesystem::is_regular_file(script, ec)) return script.lexically_normal();
  return "scripts/get_data.sh";
}

}  // namespace

std::filesystem::path absolute_normal(const std::filesystem::path& p) {
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(p, ec);
  abs = (ec ? p : abs).lexically_normal();
  if (!abs.has_filename() && abs.has_relative_path()) abs = abs.parent_path();
  return abs;
}

std::filesystem::path resolve_data_root(const std::string& dir, const char* source_dir) {
  if (!dir.empty()) return absolute_normal(dir);
  if (const char* env = std::getenv("MINIDL_DATA"); env && *env) return absolute_normal(env);
  if (source_dir && *source_dir) return absolute_normal(std::filesystem::path(source_dir) / "datasets");
  return absolute_normal("datasets");
}

std::string get_data_command(const std::filesystem::path& root, bool fashion) {
  std::string cmd = script_path().string();
  if (fashion) cmd += " --fashion";
  cmd += " --dir " + absolute_normal(root).string();
  return cmd;
}

}  // namespace minidl::data
