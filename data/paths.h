#pragma once
// Where the data sets live, resolved the same way as scripts/get_data.sh: an explicit folder, else
// $MINIDL_DATA, else `datasets` in the source tree, else ./datasets.
#include <filesystem>
#include <string>

namespace minidl::data {

/// The data folder: `dir` when not empty; else $MINIDL_DATA when set; else `<source_dir>/datasets`
/// when `source_dir` is given; else `./datasets`. Returned absolute; it need not exist.
///   auto root = resolve_data_root("", "/src/minidl");  // /src/minidl/datasets
std::filesystem::path resolve_data_root(const std::string& dir, const char* source_dir);

/// resolve_data_root with the source tree known at the caller's compile time: targets that define
/// MINIDL_SOURCE_DIR (the tests do) find `<repo>/datasets` from any working directory. Static, so
/// that translation units with and without the macro each keep their own copy.
///   MNIST train(data_root());  MNIST custom(data_root(flag_value));
static inline std::filesystem::path data_root(const std::string& dir = "") {
#ifdef MINIDL_SOURCE_DIR
  return resolve_data_root(dir, MINIDL_SOURCE_DIR);
#else
  return resolve_data_root(dir, nullptr);
#endif
}

/// `p` made absolute (against the working directory) and normalized, without a trailing slash:
/// the form every data error message uses.   absolute_normal("datasets/./mnist/") == "/src/minidl/datasets/mnist"
std::filesystem::path absolute_normal(const std::filesystem::path& p);

/// The shell command that fetches the data sets into `root`, for error messages.
///   get_data_command("/data", true) == "/src/minidl/scripts/get_data.sh --fashion --dir /data"
std::string get_data_command(const std::filesystem::path& root, bool fashion);

}  // namespace minidl::data
