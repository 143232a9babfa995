// A `falcon serve` child process for end-to-end tests: started with --listen 127.0.0.1:0, its
// port read from the first stderr line (`listening on http://127.0.0.1:PORT`), its stderr kept
// by a thread in log(). Killed (SIGKILL) if still running when destroyed.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/run_falcon.h"

namespace falcon::testing {

// A `falcon serve` child process; its stderr is read by a thread into `log()`.
class ServeProcess {
 public:
  ServeProcess(const std::string& config, const std::string& state,
               std::vector<std::string> extra = {}) {
    int err[2];
    if (::pipe(err) != 0) throw std::runtime_error("pipe");
    const std::string bin = built_binary("falcon");
    std::vector<std::string> args{bin, "--config", config, "serve", "--state", state};
    // --listen 127.0.0.1:0 unless `extra` names another address.
    if (std::find(extra.begin(), extra.end(), "--listen") == extra.end()) {
      args.insert(args.end(), {"--listen", "127.0.0.1:0"});
    }
    args.insert(args.end(), extra.begin(), extra.end());
    // Built before the fork: this process has threads (the fleet's), so the child may only make
    // async-signal-safe calls until exec. An allocation there can block forever on a lock that
    // another thread held at the fork (a serve that never starts, seen under ASan).
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(err[1], STDERR_FILENO);
      ::close(err[0]);
      ::close(err[1]);
      ::execv(bin.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(err[1]);
    fd_ = err[0];
    reader_ = std::thread([this] {
      char buf[4096];
      for (;;) {
        const ssize_t n = ::read(fd_, buf, sizeof buf);
        if (n <= 0) break;
        std::lock_guard lock(mutex_);
        log_.append(buf, static_cast<std::size_t>(n));
        changed_.notify_all();
      }
      std::lock_guard lock(mutex_);
      eof_ = true;
      changed_.notify_all();
    });
    const std::regex listening("listening on https?://[^ \\n]+:(\\d+)");
    const std::string first = wait_for(listening);
    std::smatch m;
    std::regex_search(first, m, listening);
    // The address is the first line.
    if (m.empty() || log().rfind("listening on", 0) != 0) {
      const std::string text = log();
      ::kill(pid_, SIGKILL);
      wait_exit();
      reader_.join();
      ::close(fd_);
      throw std::runtime_error("falcon serve did not start as expected: " + text);
    }
    port_ = std::stoi(m[1]);
  }
  ~ServeProcess() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      wait_exit();
    }
    if (reader_.joinable()) reader_.join();
    ::close(fd_);
  }

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string log() const {
    std::lock_guard lock(mutex_);
    return log_;
  }
  // Waits until GET /readyz answers 200: every cluster probed once by the health loop (and its
  // breaker fed). Throws after `limit`.
  void wait_ready(std::chrono::seconds limit = std::chrono::seconds(120)) const {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (auto pause = std::chrono::milliseconds(5);;
         pause = std::min(pause * 2, std::chrono::milliseconds(200))) {
      if (readyz_status() == 200) return;
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error("falcon serve did not become ready: " + log());
      }
      std::this_thread::sleep_for(pause);  // polling the server's own readiness signal
    }
  }
  // The log once it matches `pattern` (or the process closed stderr: then whatever it wrote).
  std::string wait_for(const std::regex& pattern) {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, std::chrono::seconds(120),
                      [&] { return eof_ || std::regex_search(log_, pattern); });
    return log_;
  }
  void signal(int sig) const { ::kill(pid_, sig); }
  // Exit status (WEXITSTATUS, or 128 + signal).
  int wait_exit() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    exited_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  int readyz_status() const {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int status = 0;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
      const std::string request = "GET /readyz HTTP/1.0\r\n\r\n";
      if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size())) {
        char buf[64] = {};
        if (::recv(fd, buf, sizeof buf - 1, MSG_WAITALL) >= 12) status = std::atoi(buf + 9);
      }
    }
    ::close(fd);
    return status;
  }

  pid_t pid_ = -1;
  int fd_ = -1;
  int port_ = 0;
  bool exited_ = false;
  std::thread reader_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::string log_;
  bool eof_ = false;
};

}  // namespace falcon::testing
