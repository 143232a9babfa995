#include "logs/line_spool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "falcon/errors.h"

namespace falcon::logs {
namespace {

constexpr std::size_t kBlockBytes = 64 << 10;

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw LogRetrievalError(
      fmt::format("cannot {} the temporary file {} that holds the lines of a "
                  "long tail: {}",
                  what, path, ::strerror(errno)));
}

}  // namespace

LineSpool::LineSpool(std::size_t memory_bytes) : budget_(memory_bytes) {}

LineSpool::~LineSpool() {
  if (fd_ >= 0) ::close(fd_);
}

void LineSpool::push(std::string_view line) {
  const std::size_t record = line.size() + sizeof(std::uint32_t);
  if (!buffer_.empty() && buffer_.size() + record > budget_) spill();
  // One allocation for the whole budget, made on the first push: untouched pages of it cost no
  // memory, and no small allocations are left between the pages of entries being parsed.
  if (buffer_.capacity() < budget_) buffer_.reserve(budget_);
  const auto length = static_cast<std::uint32_t>(line.size());
  buffer_.append(line);
  buffer_.append(reinterpret_cast<const char*>(&length), sizeof length);
  ++count_;
  if (buffer_.size() > budget_) spill();  // a line longer than the whole budget
}

void LineSpool::spill() {
  if (fd_ < 0) {
    const char* tmp = ::getenv("TMPDIR");
    path_ = fmt::format("{}/falcon-tail-XXXXXX", tmp != nullptr && tmp[0] == '/' ? tmp : "/tmp");
    fd_ = ::mkostemp(path_.data(), O_CLOEXEC);
    if (fd_ < 0) fail("create", path_);
    ::unlink(path_.c_str());
  }
  std::size_t written = 0;
  while (written < buffer_.size()) {
    const ssize_t n = ::pwrite(fd_, buffer_.data() + written, buffer_.size() - written,
                               file_size_ + static_cast<std::int64_t>(written));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write", path_);
    written += static_cast<std::size_t>(n);
  }
  file_size_ += static_cast<std::int64_t>(buffer_.size());
  read_end_ = file_size_;
  buffer_.clear();  // keeps its capacity for the next records
}

void LineSpool::read_at(std::int64_t offset, std::size_t n, char* out) {
  const auto block_end = block_start_ + static_cast<std::int64_t>(block_.size());
  if (offset >= block_start_ && offset + static_cast<std::int64_t>(n) <= block_end) {
    std::memcpy(out, block_.data() + (offset - block_start_), n);
    return;
  }
  if (n > kBlockBytes / 2) {  // a long line: read it alone
    std::size_t got = 0;
    while (got < n) {
      const ssize_t r = ::pread(fd_, out + got, n - got, offset + static_cast<std::int64_t>(got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) fail("read", path_);
      got += static_cast<std::size_t>(r);
    }
    return;
  }
  // Reading backwards: the window ends where the wanted bytes end.
  const std::int64_t end = offset + static_cast<std::int64_t>(n);
  block_start_ = std::max<std::int64_t>(0, end - static_cast<std::int64_t>(kBlockBytes));
  block_.resize(static_cast<std::size_t>(end - block_start_));
  std::size_t got = 0;
  while (got < block_.size()) {
    const ssize_t r = ::pread(fd_, block_.data() + got, block_.size() - got,
                              block_start_ + static_cast<std::int64_t>(got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) fail("read", path_);
    got += static_cast<std::size_t>(r);
  }
  std::memcpy(out, block_.data() + (offset - block_start_), n);
}

std::optional<std::string> LineSpool::pop() {
  if (!buffer_.empty()) {
    std::uint32_t length = 0;
    std::memcpy(&length, buffer_.data() + buffer_.size() - sizeof length, sizeof length);
    const std::size_t start = buffer_.size() - sizeof length - length;
    std::string line = buffer_.substr(start, length);
    buffer_.resize(start);
    --count_;
    return line;
  }
  if (read_end_ == 0) return std::nullopt;
  std::uint32_t length = 0;
  read_at(read_end_ - static_cast<std::int64_t>(sizeof length), sizeof length,
          reinterpret_cast<char*>(&length));
  const std::int64_t start = read_end_ - static_cast<std::int64_t>(sizeof length) - length;
  std::string line(length, '\0');
  if (length > 0) read_at(start, length, line.data());
  read_end_ = start;
  --count_;
  return line;
}

}  // namespace falcon::logs
