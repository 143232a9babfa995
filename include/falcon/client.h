// FabricClient: what the CLI and the business layer can ask the cluster layer, answered either
// in this process (a ClusterFabric) or by a `falcon serve` through its HTTP API, with the same
// types and the same errors. The CLI holds one and has no other path: `falcon --server URL`
// only chooses which of the two it builds.
//
//   auto client = falcon::make_remote_client({.url = "http://127.0.0.1:8787", .token = t});
//   // or: falcon::make_local_client(std::make_shared<falcon::ClusterFabric>("repos.yaml"));
//   falcon::Decision d = client->select({.accelerator_type = "tpu-v4-64"});
//   falcon::Submission s = client->submit({.spec = spec});  // selects, submits, records
//   client->read_logs({.cluster = s.handle.cluster, .workload = spec.name},
//                     [](const std::string& line) { std::cout << line << "\n"; });
//
// Errors are the layer's (errors.h, values.h) in both: a server's error answer of a type the
// layer knows is thrown as that type with its details (NoAvailableClusterError with its probes
// and scores, WorkloadNotFoundError, ...); an answer the layer cannot type is an ApiError, a
// server that cannot be reached an ApiUnreachableError (api_client.h). What one side cannot do
// is an InvalidValueError naming the option: a policy override through a server (it decides
// under its own selection.policy), a managed workload in-process (the supervisor lives in the
// server).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "falcon/api_client.h"
#include "falcon/circuit_breaker.h"
#include "falcon/log_retriever.h"
#include "falcon/model.h"
#include "falcon/selector.h"

namespace falcon {

class ClusterFabric;

// A registered cluster and its circuit breakers (the cluster's own, then one per accelerator
// slot; empty when there is no state store).
struct ClusterEntry {
  ClusterConfig config;
  std::vector<BreakerReport> breakers;
};

// One cluster's health now: in-process probed by this call; through a server its probe no older
// than one second (probed for this call if need be). The breakers as after that probe.
struct ClusterHealth {
  ClusterProbeResult probe;
  std::vector<BreakerReport> breakers;
};

struct SelectRequest {
  std::string accelerator_type;
  // The whole decision: candidates, probe results and every candidate's scores. Without it a
  // server answers briefly (Decision::brief), from its cache and possibly repeating its standing
  // decision; in-process there is no brief answer.
  bool explain = false;
  // Decide under this policy instead of the configured one (in-process only).
  std::optional<SelectionPolicy> policy;
};

struct Decision {
  ClusterSelection selection;  // selection.selection_id: the record (0: not recorded)
  // A server's brief answer: `selection` has no candidates, probe_results or scores, and each
  // of candidate_probes only result.cluster, result.reachable, age_ms and from_cache.
  bool brief = false;
  // Through a server: each candidate's probe, how old it was and whether it came from the
  // server's cache. Empty in-process (every candidate was probed by the call).
  std::vector<MonitoredProbe> candidate_probes;
  // A brief answer that repeats the server's standing decision: that decision's id; else 0.
  std::int64_t same_as = 0;
  // A brief answer: each candidate that was not eligible and why (unreachable, queue full,
  // refused by a circuit breaker, which kept it from being probed), by cluster name.
  std::map<std::string, std::string> skipped;
};

// The whole decision as ClusterSelection's JSON plus "candidate_probes" when there are any; a
// brief one as the server's brief answer (docs/serve.md, POST /v1/select).
void to_json(nlohmann::json& j, const Decision& v);

// --managed's options (docs/self-healing.md).
struct ManagedOptions {
  std::optional<int> max_recoveries;
  std::optional<double> stable_after_s;
  bool recover_on_failure = false;
};

struct SubmitRequest {
  WorkloadSpec spec;
  std::string cluster;  // empty: the best cluster for spec.accelerator_type, selected now
  // With `cluster`: the recorded decision that chose it (Decision::selection.selection_id, a
  // select made first), kept with the submission as if this call had selected. 0: none. A
  // server refuses an id it has no decision for, or whose decision chose another cluster.
  std::int64_t selection_id = 0;
  // Run as a managed workload (through a server only: its supervisor heals it).
  std::optional<ManagedOptions> managed;
};

struct Submission {
  WorkloadHandle handle;
  // The decision that chose the cluster (its selection_id is recorded with the submission);
  // null when the request named the cluster.
  std::optional<ClusterSelection> selection;
};

// {"handle", "selection" (null when none)}.
void to_json(nlohmann::json& j, const Submission& v);

struct Cancellation {
  WorkloadHandle handle;
  bool cancelled = false;
};

// {"workload_name", "cluster", "cancelled"}.
void to_json(nlohmann::json& j, const Cancellation& v);

// One recovery incident of a managed workload as people read it: its times and the SVRT's
// phases in seconds (docs/self-healing.md). Null members are unknown or not reached yet.
struct Recovery {
  std::string id;
  std::string workload;
  std::string kind;  // infrastructure | application
  std::string cause;
  std::string from_cluster;
  std::optional<std::string> to_cluster;
  std::optional<std::string> replacement;
  std::optional<std::string> t_violation, t_detected, t_decided, t_submitted, t_admitted,
      t_recovered;  // ISO 8601 UTC
  std::optional<double> svrt_s;
  std::optional<double> detection_s, decision_s, submit_s, admission_s, stability_s;
  int attempts = 0;
  std::string outcome;
};

// {"id", "workload", "kind", "cause", "from_cluster", "to_cluster", "replacement", "t_violation",
//  ..., "t_recovered", "svrt_s", "phases": {"detection_s", ...}, "attempts", "outcome"}: the
// items of GET /v1/recoveries.
void to_json(nlohmann::json& j, const Recovery& v);
void from_json(const nlohmann::json& j, Recovery& v);

// A rank's log lines. `since` is RFC 3339 (values.h check_since makes one from an age); without
// it the window starts a little before the workload's recorded submission, else 24 hours ago.
struct LogRequest {
  std::string cluster;
  std::string workload;
  int rank = 0;
  int slice = 0;
  std::optional<std::string> since;
  std::optional<std::string> grep;  // a Cloud Logging query
  int tail = 0;                     // > 0: only the last `tail` lines
  bool follow = false;              // go on until the workload has finished (or `stop`)
};

struct ExportRequest {
  std::string cluster;
  std::string workload;
  std::string dest;                       // gs://bucket/prefix
  std::optional<std::vector<int>> ranks;  // null: every rank that wrote
  int slice = 0;
  std::optional<std::string> since;  // RFC 3339
  std::optional<std::string> grep;
  std::optional<ExportVia> via;  // null: auto
  bool keep_staging = false;
};

// What an export tells its caller while it runs. Through a server its steps and per-rank
// progress come from polling GET /v1/exports/{id}; `cancelled` then stops waiting (the export
// goes on in the server) with a LogRetrievalError of status "CANCELLED" naming where to follow
// it. In-process `cancelled` cancels the export (a copy operation, its staged objects).
struct ExportObserver {
  std::function<void(const ExportStatus&)> on_status;
  std::function<void(const ExportProgress&)> on_progress;
  std::function<bool()> cancelled;
};

class FabricClient {
 public:
  virtual ~FabricClient() = default;

  // --- Clusters
  virtual std::vector<ClusterEntry> list_clusters() = 0;
  // Throws UnknownClusterError.
  virtual ClusterHealth cluster_health(const std::string& cluster) = 0;
  // Throws NoAvailableClusterError (with the candidates' probes and scores).
  virtual Decision select(const SelectRequest& request) = 0;
  // A recorded decision (the state store's). Throws InvalidValueError("--replay-selection")
  // naming an id the store does not have.
  virtual ClusterSelection recorded_selection(std::int64_t id) = 0;

  // --- Workloads
  // Selects when no cluster is named, submits, and records the submission with the decision
  // that chose its cluster. Throws NoAvailableClusterError, WorkloadSubmitError, ...
  virtual Submission submit(const SubmitRequest& request) = 0;
  // A workload known by name: its namespace and submission time from the records (the state
  // store's, or the submission log's in-process). Throws UnknownClusterError,
  // WorkloadNotFoundError.
  virtual WorkloadHandle handle_for(const std::string& cluster, const std::string& workload) = 0;
  // Throws WorkloadNotFoundError, UnknownClusterError, XpkCommandError.
  virtual WorkloadStatus status(const std::string& cluster, const std::string& workload) = 0;
  virtual Cancellation cancel(const std::string& cluster, const std::string& workload) = 0;
  // What the cluster's xpk lists now. Throws UnknownClusterError, XpkCommandError.
  virtual std::vector<WorkloadInfo> list_workloads(const std::string& cluster,
                                                   const std::optional<std::string>& state) = 0;
  // The newest recovery incidents first, at most 1000, of one managed workload or of all.
  virtual std::vector<Recovery> recoveries(const std::optional<std::string>& workload) = 0;

  // --- Logs
  // Hands each line to `on_line` as it comes. `stop` is polled while following (and between
  // lines): when it returns true the read ends normally.
  virtual void read_logs(const LogRequest& request,
                         const std::function<void(const std::string&)>& on_line,
                         const std::function<bool()>& stop = {}) = 0;
  // Throws InvalidValueError("--ranks") for a rank the workload does not have,
  // LogRetrievalError.
  virtual LogExportResult export_logs(const ExportRequest& request,
                                      const ExportObserver& observer = {}) = 0;
};

// In this process, over `fabric`. `on_notice` (optional) is told what a person should know and
// is not an error, one sentence without prefix: a log window guessed because no submission was
// recorded.
std::unique_ptr<FabricClient> make_local_client(
    std::shared_ptr<ClusterFabric> fabric, std::function<void(const std::string&)> on_notice = {});

// Through a `falcon serve` at options.url (docs/serve.md). Throws std::invalid_argument for a
// URL that is not http(s)://host[:port][/].
std::unique_ptr<FabricClient> make_remote_client(ApiClientOptions options);

}  // namespace falcon
