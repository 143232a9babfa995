// The whole of `repos.yaml`: the spec's `clusters:` section plus four optional sections that
// tune the layer. Plain structs with documented defaults, validated in one place
// (load_fabric_config). docs/configuration.md is the reference for every key.
//
//   clusters:            # required: name -> cluster (the spec's format)
//   xpk:                 # optional: how xpk is run
//     binary: xpk
//   gcp:                 # optional: Google endpoints, credentials, quotas
//     logging_reads_per_minute: 60
//   selection:           # optional: how clusters are chosen
//     max_parallel_probes: 16
//   probe:               # optional: how clusters are probed (a cluster may override it)
//     backend: xpk       # xpk | kube
//   serve:               # optional: `falcon serve` (the health loop, the state store)
//     probe_interval_s: 30
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "falcon/model.h"

namespace falcon {

// Whether the configured xpk takes `--namespace` on `workload create` (stock xpk does not).
// Spelled "auto" | "supported" | "unsupported" in YAML.
enum class NamespaceFlag {
  kAuto,        // read `xpk workload create --help` once, when a non-default namespace is asked
  kSupported,   // pass --namespace
  kUnsupported  // never pass it; a non-default namespace fails the submit
};

const char* to_string(NamespaceFlag flag);  // "auto" | "supported" | "unsupported"
// The value spelled `text` exactly; nullopt otherwise.
std::optional<NamespaceFlag> parse_namespace_flag(std::string_view text);

struct XpkSettings {
  std::string binary = "xpk";              // path, or a name looked up in PATH
  std::vector<std::string> extra_args;     // added to every xpk call, e.g. --skip-validation
  std::map<std::string, std::string> env;  // added to every xpk call's environment
  NamespaceFlag namespace_flag = NamespaceFlag::kAuto;
  int command_timeout_s = 900;           // create and delete (probes use probe_timeout_s)
  std::string gcloud_binary = "gcloud";  // used by warm-up
  std::string state_dir;                 // empty: $XDG_STATE_HOME/falcon or
                                         // ~/.local/state/falcon
  std::string runtime_dir;  // each xpk call's private kubeconfig; empty: $XDG_RUNTIME_DIR/falcon,
                            // else /dev/shm/falcon-<uid>, else <state_dir>/run
  bool operator==(const XpkSettings&) const = default;
};

struct GcpSettings {
  // Empty values fall back to the environment, then to Google's hosts (see docs).
  std::string logging_endpoint;       // FALCON_LOGGING_ENDPOINT, https://logging.googleapis.com
  std::string storage_endpoint;       // STORAGE_EMULATOR_HOST, https://storage.googleapis.com
  std::string token_endpoint;         // FALCON_TOKEN_ENDPOINT, https://oauth2.googleapis.com/token
                                      // (authorized_user refresh; service accounts use token_uri)
  std::string metadata_host;          // GCE_METADATA_HOST, metadata.google.internal
  std::string access_token_file;      // FALCON_ACCESS_TOKEN_FILE: a file holding a bearer token
  std::string ca_file;                // extra CA bundle for TLS; empty: the system's
  int logging_reads_per_minute = 60;  // entries:list calls per project per minute
  int http_timeout_s = 60;
  // A multiple of 256 KiB. Exports buffer one chunk per rank, so the default is the protocol's
  // minimum: an export is paced by the read quota, not by uploads (see docs/configuration.md).
  int upload_chunk_bytes = 256 << 10;
  // Log export past the read quota (docs/log-export.md). A Log Router sink's archive in Cloud
  // Storage, gs://BUCKET[/PREFIX] (the sink's <log id>/YYYY/MM/DD/... layout under it); empty:
  // none. `--via sink` reads it; `--via auto` does when it covers the export's window.
  std::string log_archive;
  // How late the sink's hourly files are complete: an hour ending more than this long ago is in
  // the archive (Cloud Logging documents 2 to 3 hours).
  int log_archive_lag_s = 3 * 3600;
  // entries:copy: whether `--via auto` may start copy operations (an explicit `--via copy` runs
  // whatever this says, when log_copy_staging is set).
  bool log_copy = false;
  // Where copy operations write, gs://BUCKET[/PREFIX]: each export stages under
  // PREFIX/falcon-copy/<workload>-<time>/ and deletes it afterwards. Empty: copy is not possible.
  std::string log_copy_staging;
  // The log bucket copied from, LOCATION/BUCKET_ID in each cluster's project.
  std::string log_copy_source = "global/_Default";
  int log_copy_poll_s = 5;               // between operations.get calls
  int log_copy_permission_wait_s = 600;  // WAITING_FOR_PERMISSIONS this long: cancel, fail
  bool operator==(const GcpSettings&) const = default;
};

// Circuit breakers (issue 15, circuit_breaker.h): `selection.breaker` in repos.yaml.
struct BreakerSettings {
  int failures = 3;          // consecutive failed probes (or submits) that open a breaker
  int cooldown_s = 60;       // the first trip's cool-down; each further trip doubles it ...
  int cooldown_max_s = 900;  // ... up to this cap
  bool operator==(const BreakerSettings&) const = default;
};

// How a cluster is chosen among the eligible candidates (docs/selection.md). Spelled
// "priority" | "score" | "least-wait" in YAML and JSON.
enum class SelectionPolicy {
  kPriority,  // the spec's: lowest slot priority, then smaller queue, then file order
  kScore,     // the weighted score of the signals (ScoreWeights), highest wins
  kLeastWait  // the smallest predicted admission wait (queue over drain rate)
};

const char* to_string(SelectionPolicy policy);  // "priority" | "score" | "least-wait"
// The policy spelled `text` exactly; nullopt otherwise.
std::optional<SelectionPolicy> parse_selection_policy(std::string_view text);

// `selection.weights`: the weight of each term of the score policy (docs/selection.md has the
// formula). Each 0..1000; their sum must be positive.
struct ScoreWeights {
  double priority = 1.0;     // 1 / slot priority
  double queue = 1.0;        // 1 - queue_depth / (max_queue_depth + 1)
  double wait = 2.0;         // 1 / (1 + predicted_wait_s / wait_scale_s)
  double recent_wait = 1.0;  // 1 / (1 + recent_wait_s / wait_scale_s)
  double health = 2.0;       // share of successful probes and submits
  double latency = 0.5;      // 1 / (1 + latency_ms / latency_scale_ms)
  double capacity = 1.0;     // free chips / nominal quota (left out when not known)
  bool operator==(const ScoreWeights&) const = default;
};

// `selection.signals`: how the history is read and the signals scaled.
struct SignalSettings {
  int window_s = 1800;               // the history window the signals are computed over
  double wait_scale_s = 600;         // a wait of this long scores 0.5
  double latency_scale_ms = 1000;    // a probe latency of this long scores 0.5
  double prior_drain_per_min = 1.0;  // drain rate assumed without any history
  bool operator==(const SignalSettings&) const = default;
};

// `selection.fragmentation`: how a cluster's fragmentation (1 - largest free block / free chips)
// weighs on its score, and whether a cluster that cannot fit the request's slice is ruled out
// (docs/selection.md "Capacity and fragmentation"). 0 <= low < high <= 1; weights 0..1.
struct FragmentationSettings {
  double low = 0.3;         // fragmentation below this: weight_low
  double high = 0.6;        // below this: weight_mid; at or above it: weight_high
  double weight_low = 1.0;  // the score is multiplied by the weight of its band
  double weight_mid = 0.7;
  double weight_high = 0.3;
  // score and least-wait: a cluster whose free chips, or largest free block, are smaller than
  // the request's slice is not a candidate (priority, the spec's rule, does not look)
  bool require_fit = true;

  // The weight of `fragmentation` (0..1).
  double weight_for(double fragmentation) const;
  bool operator==(const FragmentationSettings&) const = default;
};

struct SelectionSettings {
  int max_parallel_probes = 16;
  BreakerSettings breaker;
  SelectionPolicy policy = SelectionPolicy::kPriority;
  // `selection.policy_by_accelerator`: a policy per accelerator type (canonical spelling),
  // overriding `policy` for that type.
  std::map<std::string, SelectionPolicy> policy_by_accelerator;
  ScoreWeights weights;
  SignalSettings signals;
  FragmentationSettings fragmentation;

  // The policy for `accelerator_type` (either spelling).
  SelectionPolicy policy_for(const std::string& accelerator_type) const;
  bool operator==(const SelectionSettings&) const = default;
};

// `probe:`: how clusters are probed unless a cluster's own `probe:` says otherwise.
struct ProbeSettings {
  ProbeBackend backend = ProbeBackend::kXpk;
  bool operator==(const ProbeSettings&) const = default;
};

// Which requests `falcon serve` writes to its access log (stderr).
enum class AccessLog {
  kAll,     // every request
  kErrors,  // those answered 4xx or 5xx
  kNone,    // none (5xx answers are still logged: they are warnings)
};

// What `falcon serve` stores of a brief select that repeats the standing decision
// (serve.record_repeats, docs/serve.md#select-at-volume).
enum class RepeatRecords {
  kNone,     // nothing: the answer is the standing decision, already stored
  kWritten,  // a row of its own, answered once written (not waiting for the disk)
  kDurable,  // a row of its own, answered once on disk
};

// `serve.limits`: what `falcon serve` takes from its clients, each bounded
// (docs/serve.md#security). Times in seconds (decimals allowed), sizes in bytes. A "token" is a
// bearer token of serve.tokens_file; a server without tokens counts each client address instead.
struct ServeLimits {
  // Connections open at once; beyond, the oldest idle or slow one is closed. Unset: 16,384 over
  // plain HTTP, 1,024 over TLS (a slow TLS connection holds about 100 KiB of OpenSSL's and
  // Asio's buffers, a plain one about 9 KiB: either default keeps a server full of slow clients
  // under 256 MB).
  std::optional<int> max_connections;
  static constexpr int kDefaultMaxConnections = 16384;
  static constexpr int kDefaultMaxTlsConnections = 1024;
  int connection_limit(bool tls) const {
    return max_connections.value_or(tls ? kDefaultMaxTlsConnections : kDefaultMaxConnections);
  }
  int max_connections_per_address = 128;      // beyond: new ones from that address are closed
  int max_tls_handshakes = 256;               // of max_connections; beyond: the oldest closed
  int max_target_bytes = 8 << 10;             // request target (path and query): 414
  int max_header_bytes = 16 << 10;            // request line and headers: 431
  int max_header_fields = 100;                // 431
  int max_body_bytes = 1 << 20;               // 413
  int max_body_bytes_in_flight = 64 << 20;    // request bodies held at once: 503
  int max_header_bytes_in_flight = 32 << 20;  // heads past each connection's first 4 KiB: wait
  int max_json_depth = 32;                    // nesting of a JSON body: 400
  int max_json_values = 10000;                // values in a JSON body: 400
  double idle_timeout_s = 10;                 // a keep-alive connection with no request
  double header_timeout_s = 10;               // a TLS handshake; a request's line and headers
  double body_timeout_s = 30;                 // a request's body
  double write_timeout_s = 60;                // an answer (each chunk of a streamed one)
  int max_queued_requests = 256;              // waiting for one of serve.http_threads: 503
  int max_requests_per_token = 8;             // requests of one token at once: 429
  int max_streams = 64;                       // log reads and follows streaming at once: 503
  int max_streams_per_token = 4;              // 429
  int max_exports = 4;                        // exports running at once (more wait, queued)
  int max_queued_exports = 32;                // exports waiting: 429
  int max_answer_bytes = 8 << 20;             // lists stop short of this ("truncated": true)
  bool operator==(const ServeLimits&) const = default;
};

// `falcon serve`: where it listens, its state store and its health loop (issue 13).
struct ServeSettings {
  std::string listen = "127.0.0.1:8787";  // host:port (IPv6 in brackets); port 0 picks one
  std::string state;        // state store URL (docs/state-store.md); empty: <state_dir>/falcon.db
  std::string tokens_file;  // bearer tokens (token -> role); empty: none
  // Host header values answered besides the listen address itself ("host" or "host:port"; "*":
  // any): others get 421, so a DNS name rebound to this address cannot reach the API.
  std::vector<std::string> allowed_hosts;
  // Origins (scheme://host[:port]) whose pages may send state-changing requests besides the
  // server's own; others get 403.
  std::vector<std::string> allowed_origins;
  ServeLimits limits;
  int probe_interval_s = 30;  // each cluster is probed this often
  double probe_jitter = 0.1;  // 0..0.5: intervals are scaled by 1 +/- this
  int max_probe_age_s = 60;   // select never decides on an older probe
  // A brief POST /v1/select repeats the last decision for its accelerator while nothing it read
  // has changed, for at most this long (docs/serve.md); 0 decides every request afresh.
  int select_reuse_ms = 1000;
  // none: a repeat answers the standing decision (its id and decided_at), storing nothing more;
  // written/durable: each repeat is a decision row of its own (same_as), answered once written
  // to the store, or once on disk.
  RepeatRecords record_repeats = RepeatRecords::kNone;
  AccessLog access_log = AccessLog::kAll;
  int unreachable_backoff_max_s = 600;  // cap of the doubling interval of an unreachable cluster
  int max_parallel_probes = 8;          // loop probes running at once
  int probe_retention_full_h = 24;      // probes younger than this are all kept
  int probe_bucket_min = 60;            // older ones: one per cluster per bucket
  int probe_drop_after_h = 0;           // older than this are deleted; 0 keeps them
  // Decisions older than this are deleted unless a submission names one (or a kept repeat
  // shares its explanation); 0 keeps every decision.
  int selection_retention_h = 24;
  int shutdown_grace_s = 10;  // in-flight requests get this long on SIGTERM
  // Requests whose handlers may block (store reads, xpk, log reads) served at once; a connection
  // waiting for its next request holds no thread, nor does a streamed answer (its own thread).
  int http_threads = 16;
  int http_loops = 2;  // I/O threads owning the connections (reading, parsing, writing)
  // The health loop's probes (its threads and the processes they start) run at this nice value
  // (0..19): background probes yield the CPU to requests. On-demand probes run at the caller's.
  int probe_nice = 10;
  bool operator==(const ServeSettings&) const = default;
};

// The supervisor of managed workloads in `falcon serve` (repos.yaml `supervisor:`,
// docs/self-healing.md). Times in seconds; decimals allowed (tests scale time down).
struct SupervisorSettings {
  bool enabled = true;              // false: managed workloads are recorded but nobody heals them
  double interval_s = 10;           // how often every managed workload is checked
  double lease_ttl_s = 30;          // the `supervisor` lease; renewed every min(interval, ttl/3)
  double unreachable_grace_s = 60;  // cluster unreachable this long: an infrastructure incident
  double readmit_grace_s = 120;     // evicted (RUNNING, then QUEUED) and not readmitted this long
  double fencing_lease_s = 300;     // the old cluster unreachable this long counts as the old gone
  // While fenced incarnations wait for their cluster to answer, that cluster's list is read this
  // often, and they are deleted the moment it answers (not at the next pass).
  double fenced_poll_s = 1;
  double backoff_s = 5;         // first delay after a failed replacement submit; doubles ...
  double backoff_max_s = 300;   // ... up to this
  int max_submit_attempts = 5;  // replacement submits tried per incident
  int max_recoveries = 3;       // default of `job submit --managed --max-recoveries`
  double stable_after_s = 300;  // default of `--stable-after`: RUNNING this long = recovered
  // A managed workload QUEUED this long on its cluster, never admitted, moves to another cluster
  // that can admit it now (late binding); 0: it waits where it is.
  double move_queued_after_s = 600;
  // gs://BUCKET[/PREFIX]: storage fencing (fence.h): an epoch object per managed workload,
  // advanced before each copy starts, passed to it as FALCON_FENCE_URI / FALCON_FENCE_EPOCH.
  // Empty: no fence.
  std::string fence;
  bool operator==(const SupervisorSettings&) const = default;
};

// `dispatch:`: `falcon serve` as the external dispatcher of a MultiKueue manager cluster
// (docs/dispatch.md). Without `manager_kubeconfig` there is no dispatcher.
struct DispatchSettings {
  std::string manager_kubeconfig;  // the manager cluster (its current context)
  // The name set as multiKueue.dispatcherName in the manager's Kueue configuration; when that
  // configuration can be read and names another dispatcher, falcon nominates nothing.
  std::string dispatcher_name = "falcon.dev/dispatcher";
  // The MultiKueue AdmissionChecks whose Workloads falcon nominates for; empty: every one.
  std::vector<std::string> admission_checks;
  int width = 1;                    // clusters nominated at once (1..20, Kueue's limit)
  double renominate_after_s = 300;  // none of them admitted it this long: nominate others
  // A Workload no worker has room for now waits on the manager (late binding) instead of being
  // nominated where it would queue; false: nominate the best candidate even so.
  bool hold_until_room = true;
  // With hold_until_room, the first Workload held keeps the worker where its room comes first
  // from Workloads of lower priority (docs/dispatch.md, step 4); false: any Workload that fits
  // takes any room (a lower mean wait, a higher one for large high-priority slices).
  bool keep_room = true;
  double retry_s = 5;           // waiting Workloads are decided again at least this often
  double watch_timeout_s = 60;  // each watch of the manager's Workloads (then watched again)
  // MultiKueueCluster name -> registry cluster name; a worker not listed has its own name.
  std::map<std::string, std::string> clusters;
  std::string api_version = "v1beta2";  // of kueue.x-k8s.io (v1beta1 for Kueue < 0.15)
  // Preemption (docs/dispatch.md "Preemption"): a Workload of spec.priority >=
  // preempt_min_priority that no worker has had room for this long (seconds; absent: never) is
  // nominated to the one preempting worker where a running Workload of lower priority holds a
  // slice at least as large (its eviction frees a run the slice fits in), the first such in
  // Kueue's order, at the least chip-time since its admission; the worker's Kueue
  // (withinClusterQueue: LowerPriority) evicts it.
  std::optional<double> preempt_after_s;
  int preempt_min_priority = 750;  // xpk's `high`
  // A preempting nomination whose worker has evicted nothing (no Workload of the manager taken
  // back from it) and not admitted the Workload this long (seconds) was for a worker whose
  // Kueue did not preempt for it: decided again without it, and that worker is not
  // nominated to preempt for as large a slice at no higher priority until a Workload of at
  // least that priority leaves it (finishes, is taken back or deleted), or renominate_after_s
  // has passed.
  double preempt_confirm_s = 120;
  // MultiKueueCluster names whose ClusterQueue preempts; empty: every worker.
  std::vector<std::string> preempting_workers;
  bool operator==(const DispatchSettings&) const = default;
};

struct FabricConfig {
  std::string source_path;              // the file it was read from
  std::vector<ClusterConfig> clusters;  // in file order
  XpkSettings xpk;
  GcpSettings gcp;
  SelectionSettings selection;
  ServeSettings serve;
  ProbeSettings probe;
  SupervisorSettings supervisor;
  DispatchSettings dispatch;
  bool operator==(const FabricConfig&) const = default;
};

// The largest configuration file read (bytes). Every string in it is bounded too; the bounds are
// listed in docs/configuration.md.
inline constexpr std::size_t kMaxConfigBytes = 1 << 20;

// Reads and validates `path`. Throws ClusterConfigError listing every problem, each as
// `path:line:col: clusters.<name>.<field>: <problem>` (unreadable or oversized file, YAML
// syntax, missing or unknown keys, wrong types, bad or oversized values, duplicates). A message
// quotes at most a short prefix of a bad value. Accelerator types come out in their canonical
// (xpk) spelling, `location` filled in from `zone` when absent, relative paths of `xpk:` and
// `gcp:` resolved against the file's folder. Never crashes on any input.
FabricConfig load_fabric_config(const std::string& path);

// Same, from text; `source_name` is used in messages in place of a path.
FabricConfig parse_fabric_config(std::string_view yaml_text, const std::string& source_name);

}  // namespace falcon
