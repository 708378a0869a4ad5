#pragma once
// Compiled run-time kernels on disk, shared by every process of the user: one file per compiled
// source, named by a hash of everything that went into it, holding that whole key and a checksum
// so that a damaged, truncated or colliding file is recognized and ignored. Written to a temporary
// file and renamed (core/atomic_file.h), so concurrent processes never read half a file.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace minidl::rtc {

/// $MINIDL_KERNEL_CACHE, else $XDG_CACHE_HOME/minidl/kernels, else $HOME/.cache/minidl/kernels;
/// empty when none of them is set.
std::string kernel_cache_folder();

/// 64-bit FNV-1a: file names and checksums (the full key in the file guards against collisions).
uint64_t fnv1a(std::string_view bytes, uint64_t hash = 14695981039346656037ull);

/// "<label>-<16 hex digits of the key's hash>.bin"; `label` is a C identifier (the kernel's name).
std::string cache_file_name(const std::string& label, const std::string& key);

enum class CacheRead { Hit, Missing, Rejected };

/// Reads the image stored under `key` from `path` into `image`. Missing: no file (or unreadable);
/// Rejected: a file is there but it is not a complete one written for exactly this key.
CacheRead read_cached_image(const std::string& path, const std::string& key, std::string& image);

/// Writes `image` under `key` to `path` atomically, creating the folder. Returns "" or why not.
std::string write_cached_image(const std::string& path, const std::string& key, std::string_view image);

}  // namespace minidl::rtc
