#include "xpk/private_kubeconfig.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <system_error>

#include <fmt/format.h>

#include "falcon/errors.h"
#include "util/unique_fd.h"
#include "xpk/xpk_cli.h"

namespace falcon::xpk {
namespace {

constexpr const char* kFileName = "config";

std::atomic<unsigned long> g_next_call{0};

std::string errno_text(int err) { return ::strerror(err); }

// Copies `from` to `to` (created 0600, must not exist). Returns false when `from` does not
// exist; throws FalconError for any other failure.
bool copy_if_exists(const std::filesystem::path& from, const std::filesystem::path& to) {
  UniqueFd in(::open(from.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in) {
    if (errno == ENOENT) return false;
    throw FalconError(
        fmt::format("cannot read kubeconfig '{}': {}", from.string(), errno_text(errno)));
  }
  std::string text;
  if (const int err = read_all(in.get(), text); err != 0) {
    throw FalconError(
        fmt::format("cannot read kubeconfig '{}': {}", from.string(), errno_text(err)));
  }
  UniqueFd out(::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!out) {
    throw FalconError(
        fmt::format("cannot create kubeconfig '{}': {}", to.string(), errno_text(errno)));
  }
  if (const int err = write_all(out.get(), text); err != 0) {
    throw FalconError(
        fmt::format("cannot write kubeconfig '{}': {}", to.string(), errno_text(err)));
  }
  return true;
}

// The pid in a `<pid>-<n>` directory name, or 0 for anything else.
pid_t pid_of(const std::string& name) {
  const auto dash = name.find('-');
  if (dash == std::string::npos || dash == 0) return 0;
  long pid = 0;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + dash, pid);
  if (ec != std::errc() || end != name.data() + dash || pid <= 0) return 0;
  unsigned long n = 0;
  const auto [tail, ec2] = std::from_chars(name.data() + dash + 1, name.data() + name.size(), n);
  if (ec2 != std::errc() || tail != name.data() + name.size()) return 0;
  return static_cast<pid_t>(pid);
}

}  // namespace

PrivateKubeconfig::PrivateKubeconfig(const std::filesystem::path& runtime_dir,
                                     const std::filesystem::path& warmed, bool seed)
    : warmed_(warmed) {
  // A name no other invocation uses: our pid and a counter; a directory left behind by an
  // earlier process with the same pid is skipped, not reused.
  for (int attempt = 0;; ++attempt) {
    dir_ = runtime_dir / fmt::format("{}-{}", ::getpid(), g_next_call.fetch_add(1));
    if (::mkdir(dir_.c_str(), 0700) == 0) break;
    if (errno != EEXIST || attempt >= 1000) {
      throw FalconError(
          fmt::format("cannot create directory '{}': {}", dir_.string(), errno_text(errno)));
    }
  }
  path_ = dir_ / kFileName;
  if (seed) {
    try {
      copy_if_exists(warmed_, path_);
    } catch (...) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
      throw;
    }
  }
}

PrivateKubeconfig::~PrivateKubeconfig() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void PrivateKubeconfig::publish() const {
  // The private file is on another file system (the runtime directory), so it is copied beside
  // the warmed one first: rename(2) is atomic only within one.
  const auto temporary = warmed_.parent_path() /
                         fmt::format(".{}.{}-{}", kFileName, ::getpid(), g_next_call.fetch_add(1));
  try {
    if (!copy_if_exists(path_, temporary)) {
      throw FalconError(fmt::format("cannot replace kubeconfig '{}': '{}' was not written",
                                    warmed_.string(), path_.string()));
    }
    if (::rename(temporary.c_str(), warmed_.c_str()) != 0) {
      throw FalconError(fmt::format("cannot replace kubeconfig '{}' with '{}': {}",
                                    warmed_.string(), temporary.string(), errno_text(errno)));
    }
  } catch (...) {
    ::unlink(temporary.c_str());
    throw;
  }
}

void prepare_runtime_dir(const std::filesystem::path& dir) {
  ensure_private_dir(dir);
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) {
    throw FalconError(
        fmt::format("cannot use runtime directory '{}': {}", dir.string(), errno_text(errno)));
  }
  if (!S_ISDIR(st.st_mode)) {
    throw FalconError(
        fmt::format("cannot use runtime directory '{}': it is not a directory (a symbolic link?); "
                    "set xpk.runtime_dir in repos.yaml",
                    dir.string()));
  }
  if (st.st_uid != ::geteuid()) {
    throw FalconError(fmt::format(
        "cannot use runtime directory '{}': it belongs to uid {}, not to this user (uid {}); "
        "set xpk.runtime_dir in repos.yaml",
        dir.string(), st.st_uid, ::geteuid()));
  }
  if ((st.st_mode & 077) != 0 && ::chmod(dir.c_str(), 0700) != 0) {
    throw FalconError(fmt::format("cannot make runtime directory '{}' private: {}", dir.string(),
                                  errno_text(errno)));
  }
}

void sweep_dead_calls(const std::filesystem::path& runtime_dir) {
  std::error_code ec;
  std::filesystem::directory_iterator it(runtime_dir, ec);
  if (ec) return;
  for (const auto& entry : it) {
    const pid_t pid = pid_of(entry.path().filename().string());
    if (pid == 0 || pid == ::getpid()) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // running (or not ours to signal)
    std::error_code remove_ec;
    std::filesystem::remove_all(entry.path(), remove_ec);
  }
}

}  // namespace falcon::xpk
