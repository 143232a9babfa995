#include "serve/replica_identity.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <utility>

#include <fmt/format.h>

namespace falcon::serve {
namespace {

constexpr const char* kFileName = "supervisor-holder";
constexpr std::size_t kMaxIdBytes = 200;

std::string new_id() {
  char host[256] = {0};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  std::random_device rd;
  return fmt::format("{}:{:08x}{:08x}", host[0] ? host : "falcon", rd(), rd());
}

}  // namespace

ReplicaIdentity ReplicaIdentity::acquire(const std::filesystem::path& state_dir) {
  ReplicaIdentity out;
  const std::filesystem::path path = state_dir / kFileName;
  std::error_code ec;
  std::filesystem::create_directories(state_dir, ec);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    out.problem_ = fmt::format("cannot open {}: {}", path.string(), std::strerror(errno));
    return out;
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    out.problem_ = errno == EWOULDBLOCK
                       ? fmt::format("{} is held by another running replica", path.string())
                       : fmt::format("cannot lock {}: {}", path.string(), std::strerror(errno));
    ::close(fd);
    return out;
  }
  out.fd_ = fd;
  char buffer[kMaxIdBytes + 1] = {0};
  const ssize_t n = ::pread(fd, buffer, kMaxIdBytes, 0);
  std::string id = n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : std::string();
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  bool printable = !id.empty();
  for (const char ch : id) printable = printable && ch > ' ' && ch < 0x7f;
  if (!printable) {
    id = new_id();
    const std::string line = id + "\n";
    if (::ftruncate(fd, 0) != 0 ||
        ::pwrite(fd, line.data(), line.size(), 0) != static_cast<ssize_t>(line.size()) ||
        ::fsync(fd) != 0) {
      out.problem_ = fmt::format("cannot write {}: {}", path.string(), std::strerror(errno));
      return out;  // the lock is kept; the id is not: the default one is used
    }
  }
  out.id_ = std::move(id);
  return out;
}

ReplicaIdentity::ReplicaIdentity(ReplicaIdentity&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      id_(std::move(other.id_)),
      problem_(std::move(other.problem_)) {}

ReplicaIdentity& ReplicaIdentity::operator=(ReplicaIdentity&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    id_ = std::move(other.id_);
    problem_ = std::move(other.problem_);
  }
  return *this;
}

ReplicaIdentity::~ReplicaIdentity() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor drops the lock
}

}  // namespace falcon::serve
