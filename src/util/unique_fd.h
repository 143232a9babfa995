// An owned POSIX file descriptor, and the two calls every owner of one needs: write everything,
// and read everything. Shared by the process runner, the submission log and the kubeconfig
// copies.
//
//   UniqueFd fd(::open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
//   if (!fd) throw ...errno...;
//   if (int err = write_all(fd.get(), text); err != 0) throw ...strerror(err)...;
//   // closed when fd goes out of scope
#pragma once

#include <string>
#include <string_view>

namespace falcon {

class UniqueFd {
 public:
  UniqueFd() = default;
  // Takes ownership of `fd` (a negative value means none, e.g. a failed open()).
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }
  // Gives up ownership without closing; returns the descriptor.
  int release();
  // Closes the descriptor held (if any); errors from close(2) are ignored.
  void reset();

 private:
  int fd_ = -1;
};

// Writes all of `data` to `fd`, retrying after EINTR and short writes. Returns 0, or the errno
// of the write that failed (ENOSPC when write(2) returned 0). Blocks as write(2) does.
int write_all(int fd, std::string_view data);

// Reads `fd` to end of file into `out` (appending), retrying after EINTR. Returns 0 or the
// errno of the read that failed.
int read_all(int fd, std::string& out);

}  // namespace falcon
