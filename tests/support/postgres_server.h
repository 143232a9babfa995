// A throwaway PostgreSQL server for tests and benchmarks: Debian's postgresql-15 binaries
// (initdb, postgres) run in a fresh temporary directory on a free loopback port, stopped and
// deleted when the object goes. PostgreSQL refuses to run as root, so under root the server
// runs as the `postgres` system user (the package creates it) and the directory is handed to
// it; under any other user it runs as that user. Clients connect over TCP as the superuser
// `falcon` with trust authentication (loopback only).
//
// Readiness is the server's own signal: postmaster.pid's status line says "ready", polled
// with a bounded deadline; a server that exits first is reported with its log.
//
//   falcon::testing::PostgresServer pg;              // throws when it cannot start
//   std::string url = pg.create_database("t1");      // postgresql://falcon@127.0.0.1:PORT/t1
//
// Free of GoogleTest, so benchmarks can use it too.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <string>

namespace falcon::testing {

class PostgresServer {
 public:
  struct Options {
    std::string bin_dir = "/usr/lib/postgresql/15/bin";
    std::chrono::seconds start_timeout{120};  // generous: two cores shared, sanitizer builds
    // false: fsync=off, for tests (a killed client still loses nothing the server
    // acknowledged; only a crash of the machine could). true: the server's defaults.
    bool durable = false;
  };

  // initdb + start. Throws std::runtime_error naming what failed, with the tail of its log.
  PostgresServer();
  explicit PostgresServer(Options options);
  ~PostgresServer();  // fast shutdown, wait, delete the directory
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  int port() const { return port_; }
  // postgresql://falcon@127.0.0.1:<port>/<database>
  std::string url(const std::string& database) const;
  // CREATE DATABASE <name> (a plain identifier); returns its url. Throws std::runtime_error.
  std::string create_database(const std::string& name);
  // A database with a name not used before in this process.
  std::string fresh_database();
  // Runs SQL through psql against `database`; returns psql's stdout. Throws std::runtime_error.
  std::string psql(const std::string& database, const std::string& sql) const;
  // An outage: stops the server (fast shutdown; clients see their connections closed and new
  // ones refused) until restart() starts it again on the same port with the same data. restart
  // throws std::runtime_error when it cannot (the port taken meanwhile, a failed start).
  void shut_down();
  void restart();

 private:
  void init_cluster();
  bool start_on(int port);  // false: the port was taken meanwhile
  void stop();

  Options options_;
  std::filesystem::path dir_;
  int port_ = 0;
  pid_t pid_ = -1;
  int databases_ = 0;
};

// Why this machine cannot run the tests' PostgreSQL (binaries missing, no `postgres` user under
// root), or "" when it can.
std::string postgres_unavailable_reason(const std::string& bin_dir = "/usr/lib/postgresql/15/bin");

// True when FALCON_SKIP_POSTGRES_TESTS=1: the developer explicitly opted out of the PostgreSQL
// half of the store tests on a machine without postgresql-15. Without it they fail, never skip.
bool postgres_tests_opted_out();

// One server for the whole test binary, started on first use and stopped at exit. Throws (on
// every call) std::runtime_error when it could not start.
PostgresServer& shared_postgres_server();

}  // namespace falcon::testing
