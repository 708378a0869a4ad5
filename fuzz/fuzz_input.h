#pragma once
// The fuzz targets hand their input to minidl's readers the way users do: as a file. Each process
// writes it to a folder of its own (in /dev/shm when there is one, so no disk is touched), under
// the name the caller picks; libFuzzer may run several processes at once (-jobs, -workers).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace minidl::fuzz {

inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::error_code ec;
    std::filesystem::path base = std::filesystem::is_directory("/dev/shm", ec)
                                     ? std::filesystem::path("/dev/shm")
                                     : std::filesystem::temp_directory_path();
    std::filesystem::path d = base / ("minidl_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  // Registered once `dir` is built, so it runs before `dir` is destroyed.
  [[maybe_unused]] static const bool removed_at_exit = std::atexit([] {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }) == 0;
  return dir;
}

/// scratch_dir()/name, holding exactly `size` bytes of `data`.
inline std::string write_input(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = (scratch_dir() / name).string();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::abort();
  }
  return path;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// A broken invariant: libFuzzer saves the input that caused it.
[[noreturn]] inline void fail(const char* what) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
  std::abort();
}

}  // namespace minidl::fuzz
