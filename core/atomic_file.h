#pragma once
// Replacing a file so that a crash or a failed write never leaves it half written: the new bytes go
// to a temporary file in the same folder, reach the disk, and are then renamed over the old file.
#include <string>
#include <string_view>
#include <vector>

namespace minidl {

/// Writes the concatenation of `pieces` to `path`. Readers see the old file or the whole new one;
/// on any failure the old file is left as it was and the error names the file and the reason.
///   write_file_atomically("model.safetensors", {header, data});
void write_file_atomically(const std::string& path, const std::vector<std::string_view>& pieces);

/// The first half of write_file_atomically: the bytes in a new temporary file beside `path`, flushed
/// to the disk. Returns the temporary file's name; `path` is not touched.
std::string write_temporary_beside(const std::string& path, const std::vector<std::string_view>& pieces);

/// The second half: renames `temporary` over `path`, then flushes the folder so the rename lasts.
/// On failure `path` keeps its old contents and `temporary` is removed.
void replace_with(const std::string& temporary, const std::string& path);

}  // namespace minidl
