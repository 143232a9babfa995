// falcon serve: the control plane process. Loads repos.yaml, opens the state store, keeps the
// probe cache fresh and serves the HTTP API until SIGTERM/SIGINT; SIGHUP reloads repos.yaml.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <thread>

#include "cli/cli.h"
#include "falcon/api_server.h"
#include "falcon/errors.h"
#include "falcon/state_store.h"
#include "falcon/supervisor.h"

namespace falcon::cli {
namespace {

struct ServeArgs {
  std::string listen;
  std::string state;
  std::string tls_cert;
  std::string tls_key;
  std::string tokens_file;
};

// Structured logs on stderr: one JSON object a line, or `time level message key=value` on a tty.
// Access-log lines (one per request) are written in batches, at most kAccessFlush after they
// were made, so that thousands of requests a second cost no write each; every other line is
// written at once, after the access lines before it.
class Log {
 public:
  Log() : tty_(::isatty(STDERR_FILENO) == 1), flusher_([this] { flush_loop(); }) {}
  ~Log() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_one();
    flusher_.join();
    std::lock_guard lock(mutex_);
    write_out();
  }
  Log(const Log&) = delete;
  Log& operator=(const Log&) = delete;

  void write(const char* level, const std::string& message, nlohmann::json fields = {}) {
    const std::string time = format_now();
    std::string line;
    if (tty_) {
      line = fmt::format("{} {:<5} {}", time, level, message);
      if (fields.is_object()) {
        for (const auto& [k, v] : fields.items()) {
          line += fmt::format(" {}={}", k, v.is_string() ? v.get<std::string>() : v.dump());
        }
      }
    } else {
      nlohmann::json j = {{"time", time}, {"level", level}, {"msg", message}};
      if (fields.is_object()) {
        for (const auto& [k, v] : fields.items()) j[k] = v;
      }
      line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    append(line, true);
  }
  void info(const std::string& m, nlohmann::json f = {}) { write("info", m, std::move(f)); }
  void warn(const std::string& m, nlohmann::json f = {}) { write("warn", m, std::move(f)); }
  void error(const std::string& m, nlohmann::json f = {}) { write("error", m, std::move(f)); }

  // Which requests request() writes (serve.access_log; SIGHUP changes it).
  void set_access_log(AccessLog which) { access_log_.store(which, std::memory_order_relaxed); }

  // The access log: a server error (5xx) is a warning, written at once, whatever
  // serve.access_log says.
  void request(const RequestLogEntry& r) {
    const bool warn = r.status >= 500;
    const AccessLog which = access_log_.load(std::memory_order_relaxed);
    if (!warn && (which == AccessLog::kNone || (which == AccessLog::kErrors && r.status < 400))) {
      return;
    }
    if (tty_) {
      nlohmann::json fields = {{"method", r.method},
                               {"route", r.route},
                               {"path", r.path},
                               {"status", r.status},
                               {"ms", static_cast<std::int64_t>(r.seconds * 1000)}};
      if (!r.error.empty()) fields["error"] = r.error;
      write(warn ? "warn" : "info", "request", std::move(fields));
      return;
    }
    const auto quoted = [](const std::string& s) {
      return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    };
    std::string line = fmt::format(
        R"({{"time":"{}","level":"{}","msg":"request","method":{},"route":{},"path":{},)"
        R"("status":{},"ms":{})",
        format_now(), warn ? "warn" : "info", quoted(r.method), quoted(r.route), quoted(r.path),
        r.status, static_cast<std::int64_t>(r.seconds * 1000));
    if (!r.error.empty()) line += ",\"error\":" + quoted(r.error);
    line += '}';
    append(line, warn);
  }

 private:
  static constexpr auto kAccessFlush = std::chrono::milliseconds(100);
  std::atomic<AccessLog> access_log_{AccessLog::kAll};
  static constexpr std::size_t kMaxBuffered = 64 << 10;

  void append(const std::string& line, bool now) {
    std::lock_guard lock(mutex_);
    buffer_ += line;
    buffer_ += '\n';
    if (now || buffer_.size() >= kMaxBuffered) write_out();
  }
  // Under mutex_.
  void write_out() {
    std::size_t off = 0;
    while (off < buffer_.size()) {
      const ssize_t w = ::write(STDERR_FILENO, buffer_.data() + off, buffer_.size() - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) break;  // stderr is gone: nothing else to tell it
      off += static_cast<std::size_t>(w);
    }
    buffer_.clear();
  }
  void flush_loop() {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      wake_.wait_for(lock, kAccessFlush);
      if (!buffer_.empty()) write_out();
    }
  }
  static std::string format_now() {
    const auto now = std::chrono::system_clock::now();
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
    const std::time_t secs = static_cast<std::time_t>(ms / 1000);
    std::tm tm{};
    ::gmtime_r(&secs, &tm);
    return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900,
                       tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms % 1000);
  }
  bool tty_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::string buffer_;
  std::thread flusher_;  // last: started once the rest is ready
};

int run_serve(Context& ctx, const ServeArgs& args) {
  // The server is the one that runs the commands: $FALCON_SERVER (set for the clients of this
  // shell, perhaps) is not for it; an explicit --server is a mistake.
  if (!ctx.server_flag.empty()) {
    throw UsageError(fmt::format(
        "serve: --server {} makes no sense here: `falcon serve` is the server (use --listen)",
        ctx.server_flag));
  }
  // Signals are taken by one thread with sigwait; every thread started from here inherits the
  // mask, so none of them is interrupted.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);  // a client that went away is a failed write, not a dead server

  Log log;
  FabricDependencies deps;
  deps.on_log_wait = [&log](const LogWaitNotice& notice) { log.info(notice.message); };
  deps.on_notice = [&log](const std::string& message) { log.warn(message); };
  deps.counters = std::make_shared<FabricCounters>();  // /metrics
  if (!args.state.empty()) deps.state = open_state_store(args.state);
  auto fabric = std::make_shared<ClusterFabric>(ctx.config_path(), std::move(deps));
  const auto config = fabric->config();
  const ServeSettings& serve = config->serve;

  const std::string listen = args.listen.empty() ? serve.listen : args.listen;
  std::pair<std::string, int> address;
  try {
    address = split_listen_address(listen);
  } catch (const ApiServerError& e) {
    throw UsageError(e.what());
  }
  const auto& [host, port] = address;
  const std::string tokens_file = args.tokens_file.empty() ? serve.tokens_file : args.tokens_file;
  std::shared_ptr<const TokenTable> tokens;
  try {
    if (!tokens_file.empty()) {
      tokens = std::make_shared<const TokenTable>(TokenTable::load(tokens_file));
    } else if (!is_loopback_host(host)) {
      throw UsageError(fmt::format(
          "listening on {} (not loopback) needs bearer tokens: set serve.tokens_file in {} or "
          "pass --tokens-file (lines `<token> read|operate`, mode 600)",
          listen, config->source_path));
    }
  } catch (const ApiServerError& e) {
    throw UsageError(e.what());
  }

  // The fabric's store (--state, else serve.state, else <state_dir>/falcon.db): the server
  // cannot run without it (StateStoreError, exit 1).
  std::shared_ptr<StateStore> store = fabric->state_store();

  ApiServerOptions options;
  options.store = store;
  options.tokens = tokens;
  options.tls_cert = args.tls_cert;
  options.tls_key = args.tls_key;
  options.threads = serve.http_threads;
  options.loops = serve.http_loops;
  log.set_access_log(serve.access_log);
  options.on_request = [&log](const RequestLogEntry& r) { log.request(r); };
  options.on_event = [&log](const std::string& message) { log.warn(message); };

  // Nothing is logged before the bound address: the first stderr line says where to connect.
  std::shared_ptr<ControlPlane> control =
      make_fabric_control_plane(fabric, store, make_system_clock());
  options.control = control;
  // The supervisor of managed workloads: acts only while it holds the store's `supervisor` lease.
  SupervisorOptions supervisor_options;
  supervisor_options.control = control;
  supervisor_options.store = store;
  supervisor_options.settings = config->supervisor;
  supervisor_options.on_event = [&log](const std::string& level, const std::string& message) {
    log.write(level == "error" ? "error" : level == "warn" ? "warn" : "info", message);
  };
  auto supervisor = std::make_shared<Supervisor>(std::move(supervisor_options));
  options.supervisor = supervisor;
  std::unique_ptr<ApiServer> server;
  int bound = 0;
  try {
    server = std::make_unique<ApiServer>(options);
    bound = server->bind(host, port);
  } catch (const ApiServerError& e) {
    throw UsageError(e.what());
  }
  const bool v6 = host.find(':') != std::string::npos;
  std::cerr << fmt::format("listening on {}://{}:{}", args.tls_cert.empty() ? "http" : "https",
                           v6 ? "[" + host + "]" : host, bound)
            << std::endl;
  log.info("serving", {{"config", config->source_path},
                       {"clusters", config->clusters.size()},
                       {"state", store->location()},
                       {"auth", tokens ? "bearer tokens" : "none (loopback)"},
                       {"tls", !args.tls_cert.empty()}});
  if (config->supervisor.enabled) {
    log.info("supervisor started",
             {{"holder", supervisor->holder()},
              {"replicas", store->backend() == "sqlite"
                               ? "one (SQLite: run one falcon serve per database)"
                               : "any number; one acts at a time (lease 'supervisor')"}});
  } else {
    log.info("supervisor disabled (supervisor.enabled: false): managed workloads are not healed");
  }
  supervisor->start();  // its passes do nothing while disabled (a reload may enable it)

  std::atomic<bool> served{false};
  std::mutex done_mutex;
  std::condition_variable done;
  std::thread serving([&] {
    try {
      server->serve();
    } catch (const std::exception& e) {
      log.error(fmt::format("the server stopped: {}", e.what()));
    }
    std::lock_guard lock(done_mutex);
    served = true;
    done.notify_all();
  });

  int signal_number = 0;
  for (;;) {
    if (sigwait(&signals, &signal_number) != 0) continue;
    if (signal_number != SIGHUP) break;
    try {
      reload_control_plane(*control);
      supervisor->set_settings(fabric->config()->supervisor);
      log.set_access_log(fabric->config()->serve.access_log);
      const ConfigInfo info = control->config_info();
      log.info(
          "configuration reloaded",
          {{"config", info.source_path}, {"hash", info.content_hash}, {"clusters", info.clusters}});
    } catch (const ClusterConfigError& e) {
      const ConfigInfo info = control->config_info();
      log.error("configuration reload failed; the previous configuration stays in force",
                {{"config", info.source_path},
                 {"problems", e.problems()},
                 {"reload_failures", info.reload_failures}});
    } catch (const std::exception& e) {
      log.error(fmt::format("configuration reload failed: {}", e.what()));
    }
  }

  const auto grace = std::chrono::seconds(serve.shutdown_grace_s);
  log.info("stopping", {{"signal", signal_number == SIGINT ? "SIGINT" : "SIGTERM"},
                        {"grace_s", serve.shutdown_grace_s}});
  supervisor->stop();  // releases the lease: another replica takes over at once
  server->stop(grace);
  {
    std::unique_lock lock(done_mutex);
    if (!done.wait_for(lock, grace + std::chrono::seconds(1), [&] { return served.load(); })) {
      log.error(fmt::format("requests still running {}s after {}; exiting anyway",
                            serve.shutdown_grace_s,
                            signal_number == SIGINT ? "SIGINT" : "SIGTERM"));
      stop_control_plane_loop(*control);
      std::_Exit(kExitInternal);
    }
  }
  serving.join();
  stop_control_plane_loop(*control);
  if (const std::size_t abandoned = server->abandoned_exports(); abandoned > 0) {
    // Their threads still run: leave without running destructors under them. The store has
    // them as failed ("server stopped").
    log.warn(fmt::format("{} export{} still running after the grace, recorded as failed", abandoned,
                         abandoned == 1 ? "" : "s"));
    log.info("stopped");
    std::cout.flush();
    std::_Exit(kExitOk);
  }
  log.info("stopped");
  return kExitOk;
}

}  // namespace

void add_serve_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand(
      "serve",
      "Run the control plane: the probe cache, the state store and the HTTP API (docs/serve.md)");
  cmd->add_option("--listen", args->listen,
                  "host:port to listen on (default serve.listen, 127.0.0.1:8787; port 0 picks one "
                  "and the first stderr line names it)");
  cmd->add_option("--state", args->state,
                  "state store URL (default serve.state, else <state_dir>/falcon.db)");
  cmd->add_option("--tokens-file", args->tokens_file,
                  "bearer tokens, lines `<token> read|operate` (default serve.tokens_file)");
  cmd->add_option("--tls-cert", args->tls_cert, "PEM certificate: serve HTTPS");
  cmd->add_option("--tls-key", args->tls_key, "PEM private key of --tls-cert");
  bind(cmd, ctx, args, &run_serve);
}

}  // namespace falcon::cli
