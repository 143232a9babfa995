// Running a child process from the gcp_server tests: argv (no shell), an explicit environment,
// stdout captured through a pipe, stdin from /dev/null. Header-only; the tests that use it are
// single binaries.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace falcon::fake::testing {

class Child {
 public:
  // Starts `argv[0]` (a path) with `env` ("K=V" strings). stderr goes to `stderr_path` when
  // given, else it is inherited.
  Child(const std::vector<std::string>& argv, const std::vector<std::string>& env,
        const std::string& stderr_path = "") {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    if (!stderr_path.empty()) {
      posix_spawn_file_actions_addopen(&actions, 2, stderr_path.c_str(),
                                       O_WRONLY | O_CREAT | O_TRUNC, 0644);
    }
    std::vector<char*> args, envp;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    const int rc = posix_spawn(&pid_, argv[0].c_str(), &actions, nullptr, args.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    if (rc != 0) {
      close(fds[0]);
      throw std::runtime_error("cannot start " + argv[0]);
    }
    out_ = fds[0];
  }
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      wait();
    }
    if (out_ >= 0) close(out_);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  // One line of stdout without the newline; empty at EOF.
  std::string read_line() {
    std::string line;
    char c;
    while (::read(out_, &c, 1) == 1) {
      if (c == '\n') return line;
      line += c;
    }
    return line;
  }
  // The rest of stdout, until the child closes it.
  std::string read_all() {
    std::string out;
    char buf[65536];
    ssize_t n;
    while ((n = ::read(out_, buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
    return out;
  }
  void signal(int sig) { kill(pid_, sig); }
  // Waits for the child; returns its exit status (128 + signal when killed).
  int wait() {
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
};

// Runs a command to completion; returns {exit status, stdout}.
inline std::pair<int, std::string> run(const std::vector<std::string>& argv,
                                       const std::vector<std::string>& env,
                                       const std::string& stderr_path = "") {
  Child child(argv, env, stderr_path);
  std::string out = child.read_all();
  return {child.wait(), out};
}

}  // namespace falcon::fake::testing
