#include "support/postgres_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace falcon::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string tail(const std::string& text, std::size_t max = 2000) {
  return text.size() <= max ? text : "..." + text.substr(text.size() - max);
}

// Whose account the server runs under: the `postgres` user when we are root, else ourselves.
struct Account {
  bool switch_user = false;
  uid_t uid = 0;
  gid_t gid = 0;
};

Account server_account() {
  Account a;
  if (::geteuid() != 0) return a;
  const passwd* pw = ::getpwnam("postgres");
  if (pw == nullptr) {
    throw std::runtime_error(
        "running as root, and PostgreSQL refuses root, but there is no `postgres` user to run "
        "it as (install postgresql-15: scripts/setup.sh)");
  }
  a.switch_user = true;
  a.uid = pw->pw_uid;
  a.gid = pw->pw_gid;
  return a;
}

// Starts argv with stdout and stderr appended to `log`, as `account`; the child dies with us.
// Everything the child needs is prepared before fork: it only makes system calls, then execs.
pid_t spawn(const std::vector<std::string>& argv, const fs::path& log, const Account& account,
            const std::vector<std::string>& extra_env = {}) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) env_storage.emplace_back(*e);
  for (const auto& e : extra_env) env_storage.push_back(e);
  std::vector<char*> envp;
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string log_path = log.string();
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || null_fd < 0) ::_exit(126);
    ::dup2(null_fd, 0);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    if (account.switch_user) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(account.gid) != 0 ||
          ::setuid(account.uid) != 0) {
        ::_exit(126);
      }
    }
    // After the credentials change (which clears it): the server dies if the test process does.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
    ::execve(args[0], args.data(), envp.data());
    ::_exit(127);
  }
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A loopback port free right now (the OS picks it). The server binds it a moment later; if
// another process takes it in between, the start is retried on a new port.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string err = std::strerror(errno);
    ::close(fd);
    throw std::runtime_error("cannot find a free port: " + err);
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

// The status line (the 8th) of postmaster.pid: "starting", "ready", "stopping", ...
std::string postmaster_status(const fs::path& data_dir) {
  std::ifstream in(data_dir / "postmaster.pid");
  std::string line;
  for (int i = 0; i < 8 && std::getline(in, line); ++i) {
  }
  while (!line.empty() && (line.back() == ' ' || line.back() == '\n')) line.pop_back();
  return line;
}

}  // namespace

std::string postgres_unavailable_reason(const std::string& bin_dir) {
  for (const char* tool : {"initdb", "postgres", "psql"}) {
    const fs::path p = fs::path(bin_dir) / tool;
    if (::access(p.c_str(), X_OK) != 0) {
      return p.string() + " is missing (install postgresql-15: scripts/setup.sh)";
    }
  }
  try {
    server_account();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

bool postgres_tests_opted_out() {
  const char* v = std::getenv("FALCON_SKIP_POSTGRES_TESTS");
  return v != nullptr && std::string(v) == "1";
}

PostgresServer::PostgresServer() : PostgresServer(Options{}) {}

PostgresServer::PostgresServer(Options options) : options_(std::move(options)) {
  if (const std::string reason = postgres_unavailable_reason(options_.bin_dir); !reason.empty()) {
    throw std::runtime_error("cannot start PostgreSQL for tests: " + reason);
  }
  std::string tmpl = (fs::temp_directory_path() / "falcon-pg-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
  }
  dir_ = tmpl;
  try {
    const Account account = server_account();
    if (account.switch_user && ::chown(dir_.c_str(), account.uid, account.gid) != 0) {
      throw std::runtime_error("cannot hand " + dir_.string() +
                               " to the postgres user: " + std::strerror(errno));
    }
    init_cluster();
    bool started = false;
    for (int attempt = 0; attempt < 5 && !started; ++attempt) started = start_on(free_port());
    if (!started) throw std::runtime_error("PostgreSQL found no free port in 5 attempts");
  } catch (...) {
    stop();
    std::error_code ec;
    fs::remove_all(dir_, ec);
    throw;
  }
}

PostgresServer::~PostgresServer() {
  stop();
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

void PostgresServer::init_cluster() {
  const fs::path log = dir_ / "initdb.log";
  const std::vector<std::string> argv{(fs::path(options_.bin_dir) / "initdb").string(),
                                      "-D",
                                      (dir_ / "data").string(),
                                      "-U",
                                      "falcon",
                                      "--auth=trust",
                                      "--encoding=UTF8",
                                      "--locale=C",
                                      "--no-sync"};
  const Account account = server_account();
  const int rc = wait_exit(spawn(argv, log, account));
  if (rc != 0) {
    const std::string hint =
        account.switch_user
            ? " (running as root, so initdb ran as the `postgres` user: it must be able to reach " +
                  dir_.string() + "; point TMPDIR at a directory it can, such as /tmp)"
            : "";
    throw std::runtime_error("initdb failed (exit " + std::to_string(rc) + ")" + hint + ":\n" +
                             tail(read_text(log)));
  }
}

bool PostgresServer::start_on(int port) {
  const fs::path log = dir_ / "server.log";
  const fs::path data = dir_ / "data";
  std::vector<std::string> argv{(fs::path(options_.bin_dir) / "postgres").string(),
                                "-D",
                                data.string(),
                                "-p",
                                std::to_string(port),
                                "-k",
                                dir_.string(),
                                "-c",
                                "listen_addresses=127.0.0.1",
                                "-c",
                                "max_connections=200",
                                "-c",
                                "log_min_messages=warning"};
  if (!options_.durable) {
    argv.insert(argv.end(), {"-c", "fsync=off", "-c", "full_page_writes=off"});
  }
  const auto log_size_before = read_text(log).size();
  pid_ = spawn(argv, log, server_account());
  const auto deadline = Clock::now() + options_.start_timeout;
  for (;;) {
    if (postmaster_status(data) == "ready") {
      port_ = port;
      return true;
    }
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      const std::string output = read_text(log).substr(log_size_before);
      if (output.find("could not bind") != std::string::npos ||
          output.find("Address already in use") != std::string::npos) {
        return false;
      }
      throw std::runtime_error("PostgreSQL exited while starting:\n" + tail(output));
    }
    if (Clock::now() > deadline) {
      const std::string output = read_text(log).substr(log_size_before);
      stop();
      throw std::runtime_error("PostgreSQL was not ready within " +
                               std::to_string(options_.start_timeout.count()) + " s:\n" +
                               tail(output));
    }
    // Polling the server's own readiness flag, bounded by the deadline above.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void PostgresServer::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGINT);  // fast shutdown: roll back open transactions, close sessions
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_ = -1;
}

void PostgresServer::shut_down() { stop(); }

void PostgresServer::restart() {
  if (pid_ > 0) return;
  if (!start_on(port_)) {
    throw std::runtime_error("the test PostgreSQL could not start again on port " +
                             std::to_string(port_) + " (taken meanwhile)");
  }
}

std::string PostgresServer::url(const std::string& database) const {
  return "postgresql://falcon@127.0.0.1:" + std::to_string(port_) + "/" + database;
}

std::string PostgresServer::psql(const std::string& database, const std::string& sql) const {
  const fs::path out =
      dir_ / ("psql-" + std::to_string(::getpid()) + "-" +
              std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id())) + ".out");
  std::error_code ec;
  fs::remove(out, ec);
  const std::vector<std::string> argv{(fs::path(options_.bin_dir) / "psql").string(),
                                      "-X",
                                      "-q",
                                      "-A",
                                      "-t",
                                      "-v",
                                      "ON_ERROR_STOP=1",
                                      "-h",
                                      "127.0.0.1",
                                      "-p",
                                      std::to_string(port_),
                                      "-U",
                                      "falcon",
                                      "-d",
                                      database,
                                      "-c",
                                      sql};
  const int rc = wait_exit(spawn(argv, out, Account{}));
  std::string output = read_text(out);
  fs::remove(out, ec);
  if (rc != 0) {
    throw std::runtime_error("psql -c '" + sql + "' failed (exit " + std::to_string(rc) +
                             "): " + tail(output));
  }
  return output;
}

std::string PostgresServer::create_database(const std::string& name) {
  psql("postgres", "CREATE DATABASE " + name);
  return url(name);
}

std::string PostgresServer::fresh_database() {
  static std::mutex mutex;
  int n = 0;
  {
    std::lock_guard lock(mutex);
    n = ++databases_;
  }
  // Appended piecewise: `"t" + std::to_string(...)` trips a false -Wrestrict in g++ 12 at -O2.
  std::string name = "t";
  name += std::to_string(::getpid());
  name += '_';
  name += std::to_string(n);
  return create_database(name);
}

PostgresServer& shared_postgres_server() {
  static std::mutex mutex;
  static std::unique_ptr<PostgresServer> server;
  static std::optional<std::string> failure;
  std::lock_guard lock(mutex);
  if (server) return *server;
  if (failure) throw std::runtime_error(*failure);
  try {
    server = std::make_unique<PostgresServer>();
  } catch (const std::exception& e) {
    failure = e.what();
    throw;
  }
  return *server;
}

}  // namespace falcon::testing
