#include "core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace minidl {
namespace {

std::string errno_text() { return std::strerror(errno); }

std::filesystem::path folder_of(const std::string& path) {
  std::filesystem::path folder = std::filesystem::path(path).parent_path();
  return folder.empty() ? std::filesystem::path(".") : folder;
}

// Closes on every path out, so an exception never leaks the descriptor.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  int release() {
    int f = fd;
    fd = -1;
    return f;
  }
};

// A name of our own in the target's folder: the rename must not cross file systems, and O_EXCL
// keeps two writers (threads or processes) from sharing one temporary file.
int create_temporary(const std::string& path, std::string& name) {
  static std::atomic<uint64_t> counter{0};
  const std::filesystem::path target(path);
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::string file = detail::concat('.', target.filename().string(), ".tmp-", ::getpid(), '-', counter++);
    name = (folder_of(path) / file).string();
    // 0666 before the umask: the new file gets the permissions any newly created file would.
    int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) return fd;
    if (errno != EEXIST)
      MINIDL_FAIL("cannot write ", path, ": creating the temporary file ", name, " failed: ", errno_text());
  }
  MINIDL_FAIL("cannot write ", path, ": no free temporary file name beside it (", name, " and 99 others exist)");
}

void write_all(int fd, std::string_view bytes, const std::string& path, const std::string& temporary) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      MINIDL_FAIL("cannot write ", path, ": writing the temporary file ", temporary, " failed: ", errno_text());
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

std::string write_temporary_beside(const std::string& path, const std::vector<std::string_view>& pieces) {
  MINIDL_CHECK(!path.empty(), "cannot write a file with an empty path");
  std::string temporary;
  Fd file{create_temporary(path, temporary)};
  try {
    for (std::string_view piece : pieces) write_all(file.fd, piece, path, temporary);
    // The data must be on the disk before the rename makes it the file: otherwise a crash could
    // leave the new name pointing at blocks never written.
    MINIDL_CHECK(::fsync(file.fd) == 0, "cannot write ", path, ": fsync of ", temporary, " failed: ", errno_text());
    MINIDL_CHECK(::close(file.release()) == 0, "cannot write ", path, ": closing ", temporary,
                 " failed: ", errno_text());
  } catch (...) {
    ::unlink(temporary.c_str());
    throw;
  }
  return temporary;
}

void replace_with(const std::string& temporary, const std::string& path) {
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string reason = errno_text();
    ::unlink(temporary.c_str());
    MINIDL_FAIL("cannot write ", path, ": renaming ", temporary, " over it failed: ", reason,
                " (the previous file, if any, is unchanged)");
  }
  // The rename is an entry in the folder: flush the folder too, or a crash may bring back the old
  // entry. Some file systems refuse fsync on a folder; the file itself is complete either way.
  const std::string folder = folder_of(path).string();
  Fd dir{::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (dir.fd >= 0 && ::fsync(dir.fd) != 0 && errno != EINVAL && errno != EROFS) {
    MINIDL_FAIL("wrote ", path, " but fsync of its folder ", folder, " failed: ", errno_text());
  }
}

void write_file_atomically(const std::string& path, const std::vector<std::string_view>& pieces) {
  replace_with(write_temporary_beside(path, pieces), path);
}

}  // namespace minidl
