// Daemon: `falcon serve` as a library class (docs/serve.md). Configuration in; run() serves
// until stop(); reload() is SIGHUP. The CLI's `falcon serve` is a thin main over it, and tests
// build it in-process.
//
//   falcon::Daemon daemon({.config_path = "repos.yaml", .listen = "127.0.0.1:0"});
//   std::thread signals([&] { /* sigwait: SIGHUP -> daemon.reload(), else daemon.stop() */ });
//   const int code = daemon.run();  // blocks until stop(); the exit code
//
// The constructor loads the configuration, opens the state store, builds the health loop, the
// supervisor and the API server, and binds the listen address; the first line it writes to the
// log is `listening on http(s)://HOST:PORT`, then JSON lines (or `time level message key=value`
// when the log is a terminal).
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "falcon/config.h"

namespace falcon {

// The daemon cannot start as configured: a bad listen address, an address in use, no tokens on
// a non-loopback address, a certificate or tokens file that cannot be used. The message names
// the file, flag or key. (A bad repos.yaml is ClusterConfigError, a store that cannot be opened
// StateStoreError.)
class DaemonSetupError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct DaemonOptions {
  std::string config_path;  // repos.yaml
  // Each overrides its serve: key when not empty.
  std::string listen;       // serve.listen, host:port
  std::string state;        // serve.state, a state store URL
  std::string tokens_file;  // serve.tokens_file
  std::string tls_cert;     // PEM certificate chain: serve HTTPS (with tls_key)
  std::string tls_key;
  int log_fd = 2;  // where log lines go (stderr); the daemon does not close it
};

// The connection limit `falcon serve` serves with when it may open `open_files` files (its
// soft limit, raised toward the hard one first): serve.limits.max_connections (its default over
// plain HTTP or TLS) needs that many plus kOpenFilesBeside for the store, the probes' processes
// and the streams. When there are fewer, a max_connections that was set stays, with a warning
// (the system refuses connections beyond the files), and the default is lowered to fit, with a
// note.
inline constexpr std::uint64_t kOpenFilesBeside = 512;
struct ConnectionLimit {
  int max_connections = 0;
  std::string warning;  // for the log; empty when there is none
  std::string note;
};
ConnectionLimit fit_connections(const ServeLimits& limits, bool tls, std::uint64_t open_files);

class Daemon {
 public:
  // Builds and binds everything (see the file comment). Throws DaemonSetupError,
  // ClusterConfigError, StateStoreError.
  explicit Daemon(DaemonOptions options);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // "http://HOST:PORT" (https with TLS), the port the OS picked for port 0.
  std::string url() const;

  // Serves until stop(), then stops gracefully within serve.shutdown_grace_s and returns the
  // exit code: 0, or 1 when requests were still running a second after the grace. Call once.
  int run();
  // From any thread (a signal handler thread): run() begins stopping. Returns at once.
  void stop();
  // SIGHUP: reloads repos.yaml (a bad file keeps the configuration in force), the tokens file
  // and the TLS certificate and key (one that cannot be used keeps the old one). Each failure is
  // logged; never throws.
  void reload();
  // After run(): exports were still running after the grace (recorded as failed in the store).
  // Their threads still run: the process should leave with std::_Exit, not run destructors.
  bool abandoned_work() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace falcon
