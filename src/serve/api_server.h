// ApiServer: `falcon serve`'s HTTP API (issue 13, docs/serve.md). JSON under /v1, described by
// the OpenAPI 3 document it serves at /v1/openapi.json, plus /healthz, /readyz and /metrics.
//
// The server knows HTTP (routes, parsing, limits, auth, errors, metrics); what each route does
// is asked of a ControlPlane (the fabric, its probe cache and the state store in production, a
// fake in tests) and of the StateStore (history: submissions, selections, probes, exports).
//
//   auto control = falcon::make_fabric_control_plane(fabric, store, settings, clock);
//   falcon::ApiServer server({.control = control, .store = store});
//   const int port = server.bind("127.0.0.1", 0);   // throws ApiServerError
//   std::thread t([&] { server.serve(); });          // blocks until stop()
//   ...
//   server.stop();  // stops accepting, ends follows, waits for in-flight requests
//   t.join();
//
// Errors are the CLI's JSON shape, {"error": {"type", "message", ...details}}, with the HTTP
// status of the exit-code class: usage/config/invalid spec 400, auth 401/403, unknown cluster or
// workload 404, workload exists 409, body too large 413, no cluster / unreachable 503, xpk or
// logs failures 502, anything else 500. What the HTTP layer refuses (limits, Host, Origin,
// content type, per-token shares) is in docs/serve.md#security. No input makes the server crash.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "falcon/circuit_breaker.h"
#include "falcon/client.h"
#include "falcon/clock.h"
#include "falcon/config.h"
#include "falcon/fabric_counters.h"
#include "falcon/fence.h"
#include "falcon/log_retriever.h"
#include "falcon/model.h"
#include "serve/health_monitor.h"

namespace falcon {

class StateStore;
class ClusterFabric;
class Dispatcher;
class Supervisor;

// A cluster's cached probe as the API shows it: the health monitor's (result, backend,
// duration, age, consecutive failures, next probe, from_cache).
using ProbeSnapshot = MonitoredProbe;
// The health monitor's counters, for /metrics.
using ProbeCacheStats = HealthMonitor::Stats;

// The configuration in force (GET /v1/config).
struct ConfigInfo {
  std::string source_path;
  std::string content_hash;  // "sha256:<hex>" of the file's bytes as loaded
  std::string loaded_at;     // ISO 8601 UTC
  int clusters = 0;
  std::int64_t reloads = 0;          // successful reloads since start
  std::int64_t reload_failures = 0;  // reloads refused (bad file); the old one stayed
  std::string last_reload_error;     // empty when the last reload succeeded
};

// What a caller of ControlPlane::select_excluding (the supervisor) knows that probes cannot show.
struct PlacementHints {
  // Per cluster, the caller's placements decided and not submitted yet (several recoveries
  // decided at once): each counts as one more QUEUED workload in that cluster's probe, so that
  // decisions made together spread as decisions made one after the other do.
  std::map<std::string, int> in_flight;
  // Clusters that have no room for the workload now (the caller counted their workloads against
  // a capacity it knows): left out while another cluster can take it ("no room: <why>"), chosen
  // as any other candidate when none can.
  std::map<std::string, std::string> no_room;  // cluster -> why
  // Clusters never chosen for this decision, as unreachable candidates saying why (the
  // dispatcher: registry clusters that are not Active workers of the Workload's MultiKueue
  // configuration, workers nominated before that did not admit it).
  std::map<std::string, std::string> left_out;  // cluster -> why
  // Per cluster, when the caller last changed what runs there outside this control plane's
  // submits (the dispatcher: a nomination, an admission it saw): a cached probe made before
  // then is stale and probed again, as after this control plane's own submits.
  std::map<std::string, std::chrono::steady_clock::time_point> placed_at;
};

// What the routes and the supervisor ask: the FabricClient operations a caller of the layer
// has (client.h: the same ones a remote client sends here), answered in this process from the
// health loop's probe cache, plus what only the server needs (below). Every method may be
// called from many threads at once and throws the layer's errors (errors.h), which the server
// maps to HTTP statuses. FabricClient::submit with SubmitRequest::managed is the routes'
// business (the supervisor's place_workload): an implementation refuses it.
class ControlPlane : public FabricClient {
 public:
  // The configuration of `cluster` (the registry's; no store read). Throws UnknownClusterError.
  virtual ClusterConfig cluster_config(const std::string& cluster) const = 0;
  // The cached probe of `cluster` (nullopt when none yet). Throws UnknownClusterError.
  virtual std::optional<ProbeSnapshot> cached_probe(const std::string& cluster) const = 0;
  // A probe of `cluster` no older than the configured maximum age (probed now when the cached
  // one is older), as `falcon cluster status` shows it. Throws UnknownClusterError. The default:
  // the cached probe, ClusterUnreachableError when there is none yet.
  virtual ProbeSnapshot fresh_probe(const std::string& cluster);
  // The circuit breakers of `cluster` (its own, then one per accelerator slot), as
  // ClusterFabric::cluster_breakers reports them (circuit_breaker.h); empty without a state
  // store. The default: none.
  virtual std::vector<BreakerReport> breakers(const std::string& cluster) const;
  // FabricClient::cluster_health: fresh_probe's result and the breakers after it.
  ClusterHealth cluster_health(const std::string& cluster) override;

  // The whole decision (an explained select, FabricClient::select with explain), from probes
  // no older than the configured maximum age, recorded; candidate_probes as used, with their
  // ages. Throws NoAvailableClusterError.
  virtual Decision select_explained(const std::string& accelerator_type) = 0;
  // select_explained for an answer that needs only the chosen cluster, the decision's id and
  // the candidates' probes (the default POST /v1/select, Decision::brief): an implementation may
  // repeat its last decision for the accelerator while nothing that decision read has changed
  // (same_as set, `selection` without candidates, probe_results and scores, each of
  // candidate_probes only its cluster, reachable, age_ms and from_cache; a decision of its own
  // in the store when serve.record_repeats says so). The default: select_explained().
  virtual Decision select_brief(const std::string& accelerator_type);
  // FabricClient::select: select_brief, or select_explained with request.explain; a policy
  // override is refused (the server decides under its own selection.policy).
  Decision select(const SelectRequest& request) override;
  // The repeat select_brief would answer now without waiting, when it is the standing decision
  // itself (serve.record_repeats none: nothing to record); nullopt when select_brief would
  // decide afresh, wait for a decision being made, or record the repeat. Never blocks: `falcon
  // serve`'s event loop calls it. The default: nullopt.
  virtual std::optional<Decision> prepare_repeat(const std::string& accelerator_type);
  // The same, never choosing a cluster of `excluded` (a recovery's failed cluster): those count
  // as unreachable candidates ("excluded: ..."), and with what the caller knows of its own
  // placements (`hints`, below). The default selects, ignores the hints and refuses an excluded
  // answer with NoAvailableClusterError.
  virtual Decision select_excluding(const std::string& accelerator_type,
                                    const std::vector<std::string>& excluded,
                                    const PlacementHints& hints);
  Decision select_excluding(const std::string& accelerator_type,
                            const std::vector<std::string>& excluded) {
    return select_excluding(accelerator_type, excluded, PlacementHints{});
  }
  // Feeds a failure of `cluster` to its circuit breaker (a recovery's failed cluster). The
  // default: nothing.
  virtual void record_cluster_failure(const std::string& cluster);
  // The defaults of a managed submission (repos.yaml `supervisor:`). The default: built-in ones.
  virtual SupervisorSettings supervisor_defaults() const { return {}; }
  // Storage fencing (fence.h): advances managed workload `name`'s epoch and returns the ticket
  // its next copy starts with; nullopt without supervisor.fence. Throws LogRetrievalError when
  // the fence cannot be written: the copy is then not started. The default: no fence.
  virtual std::optional<FenceTicket> advance_fence(const std::string& name);

  // One rank's lines as a range read as it goes: the routes read the first line before they
  // answer, so that a failure is answered with its status, not a broken body (FabricClient's
  // read_logs pushes lines and follows).
  virtual LogLines read_log(const WorkloadHandle& handle, int rank, const LogFilter& filter,
                            int slice) const = 0;
  // Throws std::invalid_argument, before anything is read, for a rank of `ranks` that the
  // workload does not have (when its shape is known): an export is checked before it is
  // accepted. The default checks nothing.
  virtual void check_export(const WorkloadHandle& handle,
                            const std::optional<std::vector<int>>& ranks) const;

  virtual ConfigInfo config_info() const = 0;
  virtual ProbeCacheStats cache_stats() const = 0;
  // What the layer did (xpk calls, Logging reads, uploads), for /metrics; empty when it counts
  // nothing.
  virtual FabricCounters::Snapshot fabric_counters() const { return {}; }
  // True once every cluster has a cached probe (GET /readyz).
  virtual bool ready() const = 0;
  // Why the state store cannot be written now (its last write failed, with the database's
  // reason), or nullopt (GET /readyz answers 503 with it). The default knows of nothing.
  virtual std::optional<std::string> store_problem() const { return std::nullopt; }
};

// A bearer token's rights: `read` (GET) or `operate` (everything).
enum class TokenRole { kRead, kOperate };

// Tokens loaded from serve.tokens_file: one `token role` pair a line, `#` comments and blank
// lines ignored. Throws ApiServerError naming the file and line for a malformed line, an unknown
// role, a token shorter than 16 characters, a token listed twice (whatever its roles), or a file
// that others can read or write or the group can write (group read is allowed: Kubernetes
// Secrets are mounted so).
class TokenTable {
 public:
  static TokenTable load(const std::string& path);
  // Throws ApiServerError when `token` is in the table already.
  void add(const std::string& token, TokenRole role);
  struct Match {
    TokenRole role = TokenRole::kRead;
    std::string id;  // the first 12 hex digits of the token's SHA-256: names it in limits, never
                     // the token itself
  };
  // `token`'s entry, compared in constant time against every entry; nullopt when unknown.
  std::optional<Match> match(const std::string& token) const;
  std::optional<TokenRole> find(const std::string& token) const;
  bool empty() const { return entries_.empty(); }

 private:
  std::vector<std::pair<std::string, TokenRole>> entries_;  // (SHA-256 of the token, role)
};

// Setting up or starting the server failed (bad listen address, port in use, missing tokens).
class ApiServerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "host:port" or "[v6]:port" split in two. Throws ApiServerError for anything else.
std::pair<std::string, int> split_listen_address(const std::string& listen);

// One finished HTTP request, for the access log (never headers: they may carry a token). The
// path is escaped (values.h printable): no byte of it can end or forge a log line.
struct RequestLogEntry {
  std::string method;
  std::string route;  // the route template: "/v1/workloads/{cluster}/{name}"
  std::string path;
  int status = 0;
  double seconds = 0;
  std::string error;  // the error message of a 4xx/5xx answer
};

struct ApiServerOptions {
  std::shared_ptr<ControlPlane> control;  // required
  std::shared_ptr<StateStore> store;      // required
  std::shared_ptr<Clock> clock;           // null: the system clock
  // Null: no token needed (a loopback listen address only: the daemon refuses others). Else every
  // route but /healthz, /readyz, /v1/whoami and the dashboard's files needs a bearer token;
  // mutations need `operate`. set_tokens() replaces it.
  std::shared_ptr<const TokenTable> tokens;
  ServeLimits limits;  // every bound on what clients send (docs/serve.md#security)
  int threads = 16;    // workers: requests whose handlers may block
  int loops = 2;       // I/O threads owning the connections
  // Host header values answered besides the listen address (and, on loopback, localhost,
  // 127.0.0.1 and [::1] with the port); "*" answers any. Others get 421.
  std::vector<std::string> allowed_hosts;
  // Origins whose pages may send state-changing requests besides the server's own; others 403.
  std::vector<std::string> allowed_origins;
  std::string tls_cert;  // both set: HTTPS
  std::string tls_key;
  std::function<void(const RequestLogEntry&)> on_request;
  // The supervisor of managed workloads, for /metrics (null: no supervisor metrics). Managed
  // submissions and the recoveries routes work without it (they use the store).
  std::shared_ptr<Supervisor> supervisor;
  // The MultiKueue dispatcher (docs/dispatch.md), when `dispatch:` names a manager: /readyz
  // waits for it, GET /v1/dispatch shows it, /metrics counts its nominations. Null: none.
  std::shared_ptr<Dispatcher> dispatcher;
  // Told about background work (exports) that failed, for the log.
  std::function<void(const std::string&)> on_event;
};

class ApiServer {
 public:
  // Throws ApiServerError (a TLS certificate or key that cannot be used).
  explicit ApiServer(ApiServerOptions options);
  ~ApiServer();  // stops
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Binds `host:port` (port 0: one the OS picks) and returns the port. Throws ApiServerError.
  int bind(const std::string& host, int port);
  // Whether the address bound is a loopback address (decided by the address, not the name).
  bool loopback() const;
  // Serves until stop(); returns after in-flight requests finished. Requires bind().
  void serve();
  // Stops accepting, ends follows and waits for exports up to `grace`; returns at once when
  // called again. Exports still running then, or still queued, are marked failed ("server
  // stopped").
  void stop(std::chrono::milliseconds grace = std::chrono::seconds(10));
  bool stopping() const;
  // Exports stop() marked failed after the grace; their threads still run (a process that
  // exits then should not run its static destructors under them: std::_Exit).
  std::size_t abandoned_exports() const;

  // Replaces the tokens (SIGHUP): requests from then on are checked against `tokens`.
  void set_tokens(std::shared_ptr<const TokenTable> tokens);
  // Replaces the TLS certificate and key (SIGHUP): connections made from then on use them.
  // Throws ApiServerError when they cannot be used (the old ones stay).
  void reload_tls(const std::string& cert_file, const std::string& key_file);

  // Every route as "METHOD /path/{param}" (the OpenAPI spelling), sorted.
  std::vector<std::string> routes() const;
  // The OpenAPI 3 document served at /v1/openapi.json.
  static const nlohmann::json& openapi();
  // The /metrics text (Prometheus text exposition format 0.0.4).
  std::string metrics_text() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The production control plane: the fabric (which records submissions, decisions, probes and
// observed states in its state store), a HealthMonitor keeping every cluster's probe fresh
// (serve.probe_interval_s, jitter, back-off, max_parallel_probes; history in `store`), and
// selections answered from probes no older than serve.max_probe_age_s. A submission's spec is
// kept with its row, so it can be submitted again.
//
// `fabric` and `store` must not be null. The monitor's loop starts at once; it stops with the
// object or stop_control_plane_loop().
std::shared_ptr<ControlPlane> make_fabric_control_plane(std::shared_ptr<ClusterFabric> fabric,
                                                        std::shared_ptr<StateStore> store,
                                                        std::shared_ptr<Clock> clock);
// Ends the probe loop of a control plane made by make_fabric_control_plane (waits for probes in
// flight); nothing for another control plane.
void stop_control_plane_loop(ControlPlane& control);
// Re-reads the fabric's configuration (ClusterFabric::reload) and tells the probe cache about
// the new clusters and settings. On a bad file: counts the failure, keeps the old configuration and
// rethrows the ClusterConfigError.
void reload_control_plane(ControlPlane& control);

}  // namespace falcon
