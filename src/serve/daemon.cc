// The daemon behind `falcon serve` (include/falcon/daemon.h): the fabric and its state store,
// the health loop (the control plane), the supervisor and the API server, wired and run.
#include "falcon/daemon.h"

#include <sys/resource.h>

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "falcon/command_runner.h"
#include "falcon/errors.h"
#include "falcon/fabric.h"
#include "falcon/state_store.h"
#include "kube/kube_client.h"
#include "kube/manager_api.h"
#include "serve/api_server.h"
#include "serve/dispatcher.h"
#include "serve/http_server.h"
#include "serve/replica_identity.h"
#include "serve/serve_log.h"
#include "serve/supervisor.h"
#include "xpk/xpk_cli.h"

namespace falcon {

namespace {

// Room for the connection limit beside the store, the probes' processes and the streams: the
// soft limit of open files goes up toward the hard one (1024 is a common default). When the hard
// limit is too low, a max_connections that was set stays, with a warning; its default is lowered
// to fit, with a note.
ConnectionLimit raise_open_files(const ServeLimits& limits, bool tls) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return fit_connections(limits, tls, RLIM_INFINITY);
  const rlim_t want = static_cast<rlim_t>(limits.connection_limit(tls)) + kOpenFilesBeside;
  if (rl.rlim_cur < want) {
    rl.rlim_cur = std::min(want, rl.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &rl);
    if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return fit_connections(limits, tls, RLIM_INFINITY);
  }
  return fit_connections(limits, tls, rl.rlim_cur);
}

}  // namespace

struct Daemon::Impl {
  DaemonOptions options;
  std::unique_ptr<serve::ServeLog> log;
  std::shared_ptr<ClusterFabric> fabric;
  std::shared_ptr<StateStore> store;
  std::shared_ptr<ControlPlane> control;
  std::shared_ptr<Supervisor> supervisor;
  std::shared_ptr<Dispatcher> dispatcher;  // null without dispatch.manager_kubeconfig
  // The supervisor's name in its lease, kept across restarts (replica_identity.h).
  std::optional<serve::ReplicaIdentity> identity;
  std::string identity_note;   // why it has no kept name, for the log; empty when it has
  ConnectionLimit open_files;  // the connection limit served with, and what to log of it
  std::unique_ptr<ApiServer> server;
  std::string url;
  std::string tokens_file;  // as at start: a reload re-reads this file

  std::mutex stop_mutex;
  std::condition_variable stop_requested;
  bool stopping = false;
  bool abandoned = false;

  explicit Impl(DaemonOptions o) : options(std::move(o)) {}
  void build();
  void build_dispatcher(const FabricConfig& config);
  ApiServerOptions server_options(const FabricConfig& config);
  void log_start(const FabricConfig& config, bool tokens);
  int shut_down();
};

ApiServerOptions Daemon::Impl::server_options(const FabricConfig& config) {
  const ServeSettings& serve = config.serve;
  ApiServerOptions o;
  o.store = store;
  o.control = control;
  o.supervisor = supervisor;
  o.limits = serve.limits;
  open_files = raise_open_files(serve.limits, !options.tls_cert.empty());
  o.limits.max_connections = open_files.max_connections;
  o.threads = serve.http_threads;
  o.loops = serve.http_loops;
  o.allowed_hosts = serve.allowed_hosts;
  o.allowed_origins = serve.allowed_origins;
  o.tls_cert = options.tls_cert;
  o.tls_key = options.tls_key;
  serve::ServeLog* l = log.get();
  o.on_request = [l](const RequestLogEntry& r) { l->request(r); };
  o.on_event = [l](const std::string& message) { l->warn(message); };
  return o;
}

void Daemon::Impl::build() {
  log = std::make_unique<serve::ServeLog>(options.log_fd);
  serve::ServeLog* l = log.get();
  FabricDependencies deps;
  deps.on_log_wait = [l](const LogWaitNotice& notice) { l->info(notice.message); };
  deps.on_notice = [l](const std::string& message) { l->warn(message); };
  deps.counters = std::make_shared<FabricCounters>();  // /metrics
  if (!options.state.empty()) deps.state = open_state_store(options.state);
  fabric = std::make_shared<ClusterFabric>(options.config_path, std::move(deps));
  const auto config = fabric->config();
  const ServeSettings& serve = config->serve;
  log->set_access_log(serve.access_log);

  const std::string listen = options.listen.empty() ? serve.listen : options.listen;
  std::pair<std::string, int> address;
  std::shared_ptr<const TokenTable> tokens;
  tokens_file = options.tokens_file.empty() ? serve.tokens_file : options.tokens_file;
  try {
    address = split_listen_address(listen);
    if (!tokens_file.empty()) {
      tokens = std::make_shared<const TokenTable>(TokenTable::load(tokens_file));
    }
  } catch (const ApiServerError& e) {
    throw DaemonSetupError(e.what());
  }
  // What can be checked before anything starts (the health loop probes at once): the address,
  // whether it needs tokens, the TLS files.
  try {
    const std::string resolved = serve::HttpServer::resolve(address.first);
    if (!tokens && !serve::HttpServer::is_loopback_address(resolved)) {
      throw DaemonSetupError(fmt::format(
          "listening on {} ({}, not a loopback address) needs bearer tokens: set "
          "serve.tokens_file in {} or pass --tokens-file (lines `<token> read|operate`, mode 600)",
          listen, resolved, config->source_path));
    }
    if (options.tls_cert.empty() != options.tls_key.empty()) {
      throw DaemonSetupError("TLS needs both --tls-cert and --tls-key");
    }
    if (!options.tls_cert.empty()) serve::HttpServer::check_tls(options.tls_cert, options.tls_key);
  } catch (const DaemonSetupError&) {
    throw;
  } catch (const std::exception& e) {
    throw DaemonSetupError(e.what());
  }
  // The fabric's store (--state, else serve.state, else <state_dir>/falcon.db): the server
  // cannot run without it (StateStoreError).
  store = fabric->state_store();
  control = make_fabric_control_plane(fabric, store, make_system_clock());
  // The supervisor of managed workloads: acts only while it holds the store's `supervisor` lease.
  SupervisorOptions supervisor_options;
  supervisor_options.control = control;
  supervisor_options.store = store;
  supervisor_options.settings = config->supervisor;
  // Said after the `listening on` line (log_start), which must come first.
  try {
    identity.emplace(serve::ReplicaIdentity::acquire(xpk::resolve_state_dir(config->xpk)));
    supervisor_options.holder = identity->id();
    if (identity->id().empty()) identity_note = identity->problem();
  } catch (const std::exception& e) {
    identity_note = e.what();
  }
  supervisor_options.on_event = [l](const std::string& level, const std::string& message) {
    l->write(level == "error" ? "error" : level == "warn" ? "warn" : "info", message);
  };
  supervisor = std::make_shared<Supervisor>(std::move(supervisor_options));

  build_dispatcher(*config);

  ApiServerOptions o = server_options(*config);
  o.tokens = tokens;
  o.dispatcher = dispatcher;
  int port = 0;
  try {
    server = std::make_unique<ApiServer>(std::move(o));
    port = server->bind(address.first, address.second);
  } catch (const ApiServerError& e) {
    throw DaemonSetupError(e.what());
  }
  // Loopback is decided by the address bound, not by the name given: "127.evil.example" or a
  // name that resolves elsewhere is not loopback.
  if (!tokens && !server->loopback()) {
    throw DaemonSetupError(fmt::format(
        "listening on {} (not a loopback address) needs bearer tokens: set serve.tokens_file in "
        "{} or pass --tokens-file (lines `<token> read|operate`, mode 600)",
        listen, config->source_path));
  }
  const std::string& host = address.first;
  const bool v6 = host.find(':') != std::string::npos;
  url = fmt::format("{}://{}:{}", options.tls_cert.empty() ? "http" : "https",
                    v6 ? "[" + host + "]" : host, port);
  // Nothing is logged before this line: the first line says where to connect.
  log->raw("listening on " + url);
  log_start(*config, tokens != nullptr);
}

// The MultiKueue dispatcher, when dispatch.manager_kubeconfig names a manager (dispatcher.h).
void Daemon::Impl::build_dispatcher(const FabricConfig& config) {
  const DispatchSettings& settings = config.dispatch;
  if (settings.manager_kubeconfig.empty()) return;
  std::shared_ptr<kube::KubeClient> client;
  try {
    client = std::make_shared<kube::KubeClient>(kube::KubeClientOptions{
        .kubeconfig = settings.manager_kubeconfig,
        .runner = make_posix_command_runner(),
        .clock = make_system_clock(),
        .ca_dir = std::filesystem::path(xpk::resolve_state_dir(config.xpk)) / "dispatch"});
  } catch (const std::exception& e) {
    throw DaemonSetupError(
        fmt::format("dispatch.manager_kubeconfig in {}: {}", config.source_path, e.what()));
  }
  DispatcherOptions d;
  d.settings = settings;
  d.manager = kube::make_kube_manager_api(client, settings.api_version, settings.watch_timeout_s);
  d.store = store;
  std::shared_ptr<ControlPlane> plane = control;
  d.decide = [plane](const std::string& accelerator, const PlacementHints& hints) {
    return plane->select_excluding(accelerator, {}, hints);
  };
  std::shared_ptr<ClusterFabric> f = fabric;
  d.registry_clusters = [f] {
    std::vector<std::string> names;
    for (const auto& c : f->config()->clusters) names.push_back(c.name);
    return names;
  };
  serve::ServeLog* l = log.get();
  d.on_event = [l](const std::string& level, const std::string& message) {
    l->write(level == "error" ? "error" : level == "warn" ? "warn" : "info", message);
  };
  dispatcher = std::make_shared<Dispatcher>(std::move(d));
}

ConnectionLimit fit_connections(const ServeLimits& limits, bool tls, std::uint64_t open_files) {
  ConnectionLimit out{.max_connections = limits.connection_limit(tls)};
  const std::uint64_t want = static_cast<std::uint64_t>(out.max_connections) + kOpenFilesBeside;
  if (open_files >= want) return out;
  if (limits.max_connections) {
    out.warning = fmt::format(
        "serve.limits.max_connections {} needs about {} open files, and the hard limit is {}: "
        "connections beyond it are refused by the system (raise it, e.g. LimitNOFILE= in "
        "systemd)",
        out.max_connections, want, open_files);
    return out;
  }
  const int fit = static_cast<int>(std::max(open_files, 2 * kOpenFilesBeside) - kOpenFilesBeside);
  out.note = fmt::format(
      "serve.limits.max_connections: {} (its default is {}; the hard limit of open files, {}, "
      "leaves room for no more; raise it, e.g. LimitNOFILE= in systemd, or set max_connections)",
      fit, out.max_connections, open_files);
  out.max_connections = fit;
  return out;
}

void Daemon::Impl::log_start(const FabricConfig& config, bool tokens) {
  if (!identity_note.empty()) {
    log->info(
        fmt::format("supervisor: a lease name for this run only ({}); after a crash a "
                    "restarted replica waits for the lease to expire",
                    identity_note));
  }
  if (!open_files.warning.empty()) log->warn(open_files.warning);
  if (!open_files.note.empty()) log->info(open_files.note);
  log->info("serving", {{"config", config.source_path},
                        {"clusters", config.clusters.size()},
                        {"state", store->location()},
                        {"auth", tokens ? "bearer tokens" : "none (loopback)"},
                        {"tls", !options.tls_cert.empty()}});
  if (tokens && options.tls_cert.empty() && !server->loopback()) {
    log->warn(
        "bearer tokens travel in clear text: this server listens on a non-loopback address over "
        "plain HTTP; serve HTTPS (--tls-cert, --tls-key) or put a TLS proxy in front");
  }
  if (config.supervisor.enabled) {
    log->info("supervisor started",
              {{"holder", supervisor->holder()},
               {"replicas", store->backend() == "sqlite"
                                ? "one (SQLite: run one falcon serve per database)"
                                : "any number; one acts at a time (lease 'supervisor')"}});
  } else {
    log->info("supervisor disabled (supervisor.enabled: false): managed workloads are not healed");
  }
}

Daemon::Daemon(DaemonOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  impl_->build();
}

Daemon::~Daemon() {
  if (impl_->dispatcher) impl_->dispatcher->stop();
  if (impl_->server) impl_->server->stop(std::chrono::milliseconds(0));
  if (impl_->control) stop_control_plane_loop(*impl_->control);
}

std::string Daemon::url() const { return impl_->url; }

int Daemon::run() {
  Impl& d = *impl_;
  d.supervisor->start();  // its passes do nothing while disabled (a reload may enable it)
  if (d.dispatcher) d.dispatcher->start();
  std::mutex done_mutex;
  std::condition_variable done;
  bool served = false;
  std::thread serving([&] {
    try {
      d.server->serve();
    } catch (const std::exception& e) {
      d.log->error(fmt::format("the server stopped: {}", e.what()));
    }
    std::lock_guard lock(done_mutex);
    served = true;
    done.notify_all();
  });
  {
    std::unique_lock lock(d.stop_mutex);
    d.stop_requested.wait(lock, [&] { return d.stopping; });
  }
  const int grace_s = d.fabric->config()->serve.shutdown_grace_s;
  const auto grace = std::chrono::seconds(grace_s);
  d.log->info("stopping", {{"grace_s", grace_s}});
  d.supervisor->stop();  // releases the lease: another replica takes over at once
  if (d.dispatcher) d.dispatcher->stop();
  d.server->stop(grace);
  {
    std::unique_lock lock(done_mutex);
    if (!done.wait_for(lock, grace + std::chrono::seconds(1), [&] { return served; })) {
      d.log->error(
          fmt::format("requests still running {}s after the stop; exiting anyway", grace_s));
      stop_control_plane_loop(*d.control);
      serving.detach();
      d.abandoned = true;
      return 1;
    }
  }
  serving.join();
  stop_control_plane_loop(*d.control);
  if (const std::size_t abandoned = d.server->abandoned_exports(); abandoned > 0) {
    d.log->warn(fmt::format("{} export{} still running after the grace, recorded as failed",
                            abandoned, abandoned == 1 ? "" : "s"));
    d.abandoned = true;
  }
  d.log->info("stopped");
  return 0;
}

void Daemon::stop() {
  {
    std::lock_guard lock(impl_->stop_mutex);
    impl_->stopping = true;
  }
  impl_->stop_requested.notify_all();
}

void Daemon::reload() {
  Impl& d = *impl_;
  try {
    reload_control_plane(*d.control);
    const auto config = d.fabric->config();
    d.supervisor->set_settings(config->supervisor);
    d.log->set_access_log(config->serve.access_log);
    const ConfigInfo info = d.control->config_info();
    d.log->info(
        "configuration reloaded",
        {{"config", info.source_path}, {"hash", info.content_hash}, {"clusters", info.clusters}});
  } catch (const ClusterConfigError& e) {
    const ConfigInfo info = d.control->config_info();
    d.log->error("configuration reload failed; the previous configuration stays in force",
                 {{"config", info.source_path},
                  {"problems", e.problems()},
                  {"reload_failures", info.reload_failures}});
  } catch (const std::exception& e) {
    d.log->error(fmt::format("configuration reload failed: {}", e.what()));
  }
  if (!d.tokens_file.empty()) {
    try {
      d.server->set_tokens(std::make_shared<const TokenTable>(TokenTable::load(d.tokens_file)));
      d.log->info("tokens reloaded", {{"tokens_file", d.tokens_file}});
    } catch (const std::exception& e) {
      d.log->error("tokens reload failed; the tokens in force stay", {{"error", e.what()}});
    }
  }
  if (!d.options.tls_cert.empty()) {
    try {
      d.server->reload_tls(d.options.tls_cert, d.options.tls_key);
      d.log->info("TLS certificate reloaded", {{"cert", d.options.tls_cert}});
    } catch (const std::exception& e) {
      d.log->error("TLS reload failed; the certificate in force stays", {{"error", e.what()}});
    }
  }
}

bool Daemon::abandoned_work() const { return impl_->abandoned; }

}  // namespace falcon
