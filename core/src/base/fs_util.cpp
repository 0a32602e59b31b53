// fs_util.cpp - write-temp / fsync / rename, the one way bertx writes files that must survive a crash.
#include "base/fs_util.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "bertx/error.hpp"

namespace bertx {

static Error io_error(const std::string& path, const char* what) {
  return Error(path + ": " + what + ": " + std::strerror(errno));
}

void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw io_error(dir, "cannot open folder to sync it");
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw io_error(dir, "fsync of folder failed");
}

void write_file_atomic(const std::string& path, std::string_view content) {
  const std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw io_error(tmp, "cannot create");
  const char* data = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int saved = errno;
      ::close(fd);
      ::unlink(tmp.c_str());  // a full disk gets its space back
      errno = saved;
      throw io_error(tmp, "write failed");
    }
    data += n, left -= static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int saved = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    errno = saved;
    throw io_error(tmp, "fsync failed");
  }
  ::close(fd);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw io_error(path, "rename from .tmp failed");
  fsync_dir(p.has_parent_path() ? p.parent_path().string() : ".");
}

void require_writable_dir(const std::string& dir, const std::string& what) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(what + " '" + dir + "': cannot create the folder: " + ec.message());
  const std::string probe = (std::filesystem::path(dir) / (".bertx-write-test-" + std::to_string(::getpid()))).string();
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(what + " '" + dir + "': cannot write in the folder: " + std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace bertx
