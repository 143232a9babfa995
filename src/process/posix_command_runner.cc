// PosixCommandRunner: posix_spawn into a new process group, stdin from /dev/null, stdout and
// stderr through non-blocking pipes read with poll(), the child's exit observed through a pidfd
// (or by polling waitid where pidfds are unavailable), and the whole group terminated at the
// deadline.
//
// Life of one run:
//   1. The binary is resolved against PATH (the command's own PATH if it sets one) before
//      spawning, so "not found" is reported by name rather than as a spawn errno.
//   2. The child runs in its own process group (pgid = its pid), with every signal at its
//      default disposition and an empty signal mask, and no descriptor of this process but
//      its three standard streams.
//   3. Output is read as it arrives; past `max_output_bytes` a stream is still drained (so the
//      child never blocks on a full pipe) but the excess is dropped and the stream marked
//      truncated. The head is kept.
//   4. At the deadline the group gets SIGTERM; once the leader has exited, or after
//      kTerminateGrace, the group gets SIGKILL. Grandchildren that ignored SIGTERM die too.
//   5. When the leader exits normally but a descendant keeps the pipes open, the pipes get
//      kDrainGrace to reach end-of-file, then the rest of the group is killed.
//   6. The group is always signalled before the leader is reaped: an unreaped leader keeps the
//      pgid reserved, so a kill(-pgid) can never hit an unrelated group.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "falcon/command_runner.h"
#include "falcon/errors.h"
#include "util/unique_fd.h"

extern char** environ;

namespace falcon {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr milliseconds kTerminateGrace{2000};  // SIGTERM -> SIGKILL
constexpr milliseconds kDrainGrace{500};       // leader exited, pipes still held open
constexpr milliseconds kPollSlice{10};         // only without a pidfd
constexpr std::size_t kReadChunk = 64 * 1024;
constexpr const char* kDefaultPath = "/usr/local/bin:/usr/bin:/bin";

std::string errno_text(int err) { return std::strerror(err); }

struct Pipe {
  UniqueFd read_end;
  UniqueFd write_end;
};

Pipe make_pipe(const std::string& binary) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw CommandStartError(binary, "pipe2 failed: " + errno_text(errno));
  }
  Pipe p{UniqueFd(fds[0]), UniqueFd(fds[1])};
  const int flags = ::fcntl(p.read_end.get(), F_GETFL);
  ::fcntl(p.read_end.get(), F_SETFL, flags | O_NONBLOCK);
  return p;
}

bool is_executable_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// The PATH the child will see.
std::string effective_path(const CommandSpec& spec) {
  if (auto it = spec.env.find("PATH"); it != spec.env.end()) return it->second;
  const char* path = ::getenv("PATH");
  return path != nullptr ? path : kDefaultPath;
}

// argv[0] as a path to exec. Names with a '/' are used as given (spawn reports what is wrong
// with them); bare names are looked up in PATH.
std::string resolve_binary(const CommandSpec& spec) {
  const std::string& name = spec.argv.front();
  if (name.empty()) throw CommandStartError(name, "empty program name");
  if (name.find('/') != std::string::npos) return name;
  const std::string path = effective_path(spec);
  std::size_t begin = 0;
  while (begin <= path.size()) {
    std::size_t end = path.find(':', begin);
    if (end == std::string::npos) end = path.size();
    const std::string_view dir =
        end > begin ? std::string_view(path).substr(begin, end - begin) : std::string_view(".");
    std::string candidate = fmt::format("{}/{}", dir, name);
    if (is_executable_file(candidate)) return candidate;
    begin = end + 1;
  }
  throw CommandStartError(name, fmt::format("not found in PATH ({})", path));
}

// The parent's environment with `extra` added or replacing same-named variables.
std::vector<std::string> build_environment(const std::map<std::string, std::string>& extra) {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    const auto eq = entry.find('=');
    const std::string key(entry.substr(0, eq));
    if (extra.count(key) == 0) out.emplace_back(entry);
  }
  for (const auto& [key, value] : extra) out.push_back(key + "=" + value);
  return out;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// A spawned child: the leader of its own process group. The destructor kills the group and
// reaps the leader if run() did not get that far (an exception in between).
class ChildProcess {
 public:
  // pidfd_open through syscall(): glibc 2.36's <sys/pidfd.h> lacks C linkage in C++.
  explicit ChildProcess(pid_t pid)
      : pid_(pid), pidfd_(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0))) {}
  ~ChildProcess() {
    if (!reaped_) {
      kill_group(SIGKILL);
      reap();
    }
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // -1 when pidfds are unavailable (then the caller polls has_exited()).
  int pidfd() const { return pidfd_.get(); }

  // True once the leader has exited; it stays a zombie (pgid reserved) until reap().
  bool has_exited() {
    if (exited_) return true;
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
      // ECHILD: someone else reaped it (SIGCHLD ignored). It is gone either way.
      exited_ = errno == ECHILD;
      return exited_;
    }
    exited_ = info.si_pid == pid_;
    return exited_;
  }

  void kill_group(int sig) const { ::kill(-pid_, sig); }

  // Blocks until the leader is reaped; returns its wait status, or nullopt when it had already
  // been reaped by someone else.
  std::optional<int> reap() {
    reaped_ = true;
    int status = 0;
    pid_t r;
    do {
      r = ::waitpid(pid_, &status, 0);
    } while (r < 0 && errno == EINTR);
    if (r != pid_) return std::nullopt;
    return status;
  }

 private:
  pid_t pid_;
  UniqueFd pidfd_;
  bool exited_ = false;
  bool reaped_ = false;
};

// One captured stream.
struct Capture {
  UniqueFd fd;
  std::string* text;
  bool* truncated;
  std::size_t limit;

  bool open() const { return fd.valid(); }

  // Reads everything available now; closes the fd at end-of-file.
  void drain() {
    std::array<char, kReadChunk> buf;
    while (fd.valid()) {
      const ssize_t n = ::read(fd.get(), buf.data(), buf.size());
      if (n > 0) {
        const std::size_t got = static_cast<std::size_t>(n);
        const std::size_t room = limit > text->size() ? limit - text->size() : 0;
        text->append(buf.data(), std::min(room, got));
        if (got > room) *truncated = true;
        continue;
      }
      if (n == 0) {
        fd.reset();
        return;
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) fd.reset();
      return;
    }
  }
};

// Starts `binary` (resolved from spec.argv[0]) as steps 1-2 of the file comment, with its stdout
// and stderr on the write ends of `out` and `err`. Throws CommandStartError.
pid_t spawn_child(const CommandSpec& spec, const std::string& binary, const Pipe& out,
                  const Pipe& err) {
  const std::string& name = spec.argv.front();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out.write_end.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err.write_end.get(), STDERR_FILENO);
  // Nothing else of this process reaches the child: Boost.Asio opens its sockets without
  // close-on-exec, so a child of `falcon serve` held its listening socket and its clients'
  // connections (after a crash of the server, a slow xpk call kept the port: a restart could not
  // bind it and new clients were accepted into a backlog nobody served).
  posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t all_signals, no_signals;
  sigfillset(&all_signals);
  sigemptyset(&no_signals);
  posix_spawnattr_setsigdefault(&attr, &all_signals);
  posix_spawnattr_setsigmask(&attr, &no_signals);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  std::vector<std::string> argv_strings = spec.argv;
  std::vector<std::string> env_strings = build_environment(spec.env);
  std::vector<char*> argv = c_strings(argv_strings);
  std::vector<char*> envp = c_strings(env_strings);

  pid_t pid = -1;
  const int spawn_error =
      ::posix_spawn(&pid, binary.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (spawn_error != 0) {
    std::string reason = errno_text(spawn_error);
    if (binary != name) reason = fmt::format("{} ({})", reason, binary);
    throw CommandStartError(name, reason);
  }
  return pid;
}

// Steps 4-5 of the file comment: when to signal the group, and when to look again.
class Escalation {
 public:
  explicit Escalation(steady_clock::time_point deadline) : deadline_(deadline) {}

  bool timed_out() const { return timed_out_; }
  bool killed() const { return killed_; }
  // Notes that the leader has exited (once).
  void leader_exited(steady_clock::time_point now) {
    if (!exited_) exited_at_ = now;
    exited_ = true;
  }
  bool leader_has_exited() const { return exited_; }
  void killed_now(steady_clock::time_point now) {
    killed_at_ = now;
    killed_ = true;
  }

  // Signals `child`'s group as due at `now`. Returns when to act next (max(): nothing to wait
  // for but the pipes), or nullopt when reading must stop: the pipes are held open by a process
  // outside the group (it called setsid) after the group was killed.
  std::optional<steady_clock::time_point> step(ChildProcess& child, steady_clock::time_point now) {
    if (!exited_) {
      if (!term_sent_ && now >= deadline_) {
        timed_out_ = true;
        child.kill_group(SIGTERM);
        term_sent_at_ = now;
        term_sent_ = true;
      }
      if (term_sent_ && !killed_ && now >= term_sent_at_ + kTerminateGrace) {
        child.kill_group(SIGKILL);
        killed_now(now);
      }
      if (!term_sent_) return deadline_;
      if (!killed_) return term_sent_at_ + kTerminateGrace;
      return steady_clock::time_point::max();
    }
    if (!killed_) {
      // The leader is gone but something still holds the pipes: after a timeout kill the rest
      // of the group at once, otherwise give it a short grace to finish writing.
      const auto drain_until = std::min(exited_at_ + kDrainGrace, deadline_);
      if (!timed_out_ && now < drain_until) return drain_until;
      child.kill_group(SIGKILL);
      killed_now(now);
      return steady_clock::time_point::max();
    }
    if (now >= killed_at_ + kDrainGrace) return std::nullopt;
    return killed_at_ + kDrainGrace;
  }

 private:
  // Plain flag + time pairs rather than std::optional: GCC 12 at -O3 reports the optionals'
  // payloads as maybe-uninitialized (a false positive that -Werror turns into a failed build).
  steady_clock::time_point deadline_;
  bool timed_out_ = false;
  bool exited_ = false;
  bool term_sent_ = false;
  bool killed_ = false;
  steady_clock::time_point exited_at_{};
  steady_clock::time_point term_sent_at_{};
  steady_clock::time_point killed_at_{};
};

// Waits until `wake` (max(): indefinitely) for output on the open captures or the child's exit,
// and drains what is readable. False when poll() failed.
bool poll_once(Capture (&captures)[2], const ChildProcess& child, bool leader_exited,
               steady_clock::time_point wake) {
  std::array<pollfd, 3> fds{};
  nfds_t count = 0;
  int index_of[2] = {-1, -1};
  for (int i = 0; i < 2; ++i) {
    if (!captures[i].open()) continue;
    index_of[i] = static_cast<int>(count);
    fds[count++] = pollfd{captures[i].fd.get(), POLLIN, 0};
  }
  if (!leader_exited && child.pidfd() >= 0) fds[count++] = pollfd{child.pidfd(), POLLIN, 0};

  milliseconds wait = milliseconds::max();
  if (wake != steady_clock::time_point::max()) {
    wait = std::chrono::ceil<milliseconds>(
        std::max(wake - steady_clock::now(), steady_clock::duration::zero()));
  }
  if (!leader_exited && child.pidfd() < 0) wait = std::min(wait, kPollSlice);
  const int timeout_ms =
      wait == milliseconds::max() ? -1 : static_cast<int>(std::min<long>(wait.count(), 60'000));

  const int ready = ::poll(fds.data(), count, timeout_ms);
  if (ready < 0 && errno != EINTR) return false;
  for (int i = 0; i < 2; ++i) {
    if (index_of[i] >= 0 && fds[static_cast<std::size_t>(index_of[i])].revents != 0) {
      captures[i].drain();
    }
  }
  return true;
}

class PosixCommandRunner final : public CommandRunner {
 public:
  CommandResult run(const CommandSpec& spec) override;
};

CommandResult PosixCommandRunner::run(const CommandSpec& spec) {
  if (spec.argv.empty()) throw CommandStartError("", "empty argv");
  const std::string binary = resolve_binary(spec);
  Pipe out = make_pipe(spec.argv.front());
  Pipe err = make_pipe(spec.argv.front());

  const auto start = steady_clock::now();
  ChildProcess child(spawn_child(spec, binary, out, err));
  out.write_end.reset();
  err.write_end.reset();

  CommandResult result;
  Capture captures[2] = {
      {std::move(out.read_end), &result.stdout_text, &result.stdout_truncated,
       spec.max_output_bytes},
      {std::move(err.read_end), &result.stderr_text, &result.stderr_truncated,
       spec.max_output_bytes},
  };

  // A year stands in for "no deadline" and keeps the time_point arithmetic from overflowing.
  Escalation escalation(start + std::min<milliseconds>(spec.timeout, std::chrono::hours(24 * 365)));
  while (true) {
    if (!escalation.leader_has_exited() && child.has_exited()) {
      escalation.leader_exited(steady_clock::now());
    }
    const bool pipes_open = captures[0].open() || captures[1].open();
    if (escalation.leader_has_exited() && !pipes_open) break;
    const std::optional<steady_clock::time_point> wake =
        escalation.step(child, steady_clock::now());
    if (!wake) break;
    if (!poll_once(captures, child, escalation.leader_has_exited(), *wake)) {
      child.kill_group(SIGKILL);
      escalation.killed_now(steady_clock::now());
      break;
    }
  }

  // A timed-out group is killed whole before the leader is reaped (see the file comment).
  result.timed_out = escalation.timed_out();
  if (result.timed_out && !escalation.killed()) child.kill_group(SIGKILL);
  const std::optional<int> status = child.reap();
  result.elapsed = std::chrono::duration_cast<milliseconds>(steady_clock::now() - start);
  if (status && WIFEXITED(*status)) {
    result.exit_code = WEXITSTATUS(*status);
  } else if (status && WIFSIGNALED(*status)) {
    result.exit_code = -1;
    result.term_signal = WTERMSIG(*status);
  }
  return result;
}

}  // namespace

std::shared_ptr<CommandRunner> make_posix_command_runner() {
  return std::make_shared<PosixCommandRunner>();
}

}  // namespace falcon
