// File layout: a magic line, then three little-endian uint64 (key size, image size, checksum of
// key and image), the key, the image. The reader checks all of it against the file's real size
// before trusting a byte, so a file cut short by a full disk or garbage from anywhere is rejected.
#include "ops/cuda/rtc_disk_cache.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"

namespace minidl::rtc {

namespace {

constexpr std::string_view kMagic = "minidl kernel cache 1\n";
constexpr size_t kHeaderSize = kMagic.size() + 3 * sizeof(uint64_t);

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::string(value) : std::string();
}

void put_u64(std::string& out, uint64_t v) {
  for (int b = 0; b < 8; ++b) out.push_back(static_cast<char>((v >> (8 * b)) & 0xff));
}

uint64_t get_u64(const char* p) {
  uint64_t v = 0;
  for (int b = 0; b < 8; ++b) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[b])) << (8 * b);
  return v;
}

}  // namespace

std::string kernel_cache_folder() {
  if (std::string dir = env("MINIDL_KERNEL_CACHE"); !dir.empty()) return dir;
  if (std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty()) return xdg + "/minidl/kernels";
  if (std::string home = env("HOME"); !home.empty()) return home + "/.cache/minidl/kernels";
  return "";
}

uint64_t fnv1a(std::string_view bytes, uint64_t hash) {
  for (unsigned char c : bytes) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

std::string cache_file_name(const std::string& label, const std::string& key) {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(fnv1a(key)));
  return label.substr(0, 64) + "-" + hex + ".bin";
}

CacheRead read_cached_image(const std::string& path, const std::string& key, std::string& image) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return CacheRead::Missing;
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  // Nothing a real kernel compiles to comes near this; a larger "cache file" is not ours.
  if (ec || size < kHeaderSize || size > (uintmax_t{1} << 30)) return CacheRead::Rejected;
  std::string bytes(static_cast<size_t>(size), '\0');
  if (!in.read(bytes.data(), static_cast<std::streamsize>(size))) return CacheRead::Rejected;
  if (bytes.compare(0, kMagic.size(), kMagic) != 0) return CacheRead::Rejected;
  const char* header = bytes.data() + kMagic.size();
  const uint64_t key_size = get_u64(header), image_size = get_u64(header + 8), checksum = get_u64(header + 16);
  if (key_size != key.size() || image_size == 0 || kHeaderSize + key_size + image_size != size) {
    return CacheRead::Rejected;
  }
  const std::string_view body(bytes.data() + kHeaderSize, static_cast<size_t>(key_size + image_size));
  if (body.substr(0, key.size()) != key || fnv1a(body) != checksum) return CacheRead::Rejected;
  image.assign(body.substr(key.size()));
  return CacheRead::Hit;
}

std::string write_cached_image(const std::string& path, const std::string& key, std::string_view image) {
  try {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    if (ec) return "cannot create " + std::filesystem::path(path).parent_path().string() + ": " + ec.message();
    std::string header(kMagic);
    put_u64(header, key.size());
    put_u64(header, image.size());
    put_u64(header, fnv1a(image, fnv1a(key)));
    write_file_atomically(path, {header, key, image});
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

}  // namespace minidl::rtc
