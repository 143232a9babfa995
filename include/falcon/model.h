// Value types of the cluster layer, exactly as the spec names them.
//
// Every type here is a plain value: copy it, compare it with ==, turn it into JSON and back.
// Nothing in the layer mutates a value after handing it out; snapshots shared between threads
// are `const`. JSON field names are the spec's field names (`accelerator_slots`, not the YAML
// key `accelerator_types`); an absent optional is `null`; times are ISO 8601 UTC strings with
// milliseconds and `Z` (`2026-04-13T08:00:00.000Z`).
//
//   falcon::WorkloadSpec spec{.name = "llama-8b-bench", .docker_image = "gcr.io/p/img:1",
//                             .command = {"python3", "train.py", "--steps=100"},
//                             .accelerator_type = "tpu-v4-64", .priority = "medium"};
//   nlohmann::json j = spec;                         // {"name": "llama-8b-bench", ...}
//   auto back = j.get<falcon::WorkloadSpec>();       // back == spec
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace falcon {

// Workload states as the layer reports them (xpk's own words are mapped onto these).
inline constexpr const char* kStateQueued = "QUEUED";
inline constexpr const char* kStateRunning = "RUNNING";
inline constexpr const char* kStateCompleted = "COMPLETED";
inline constexpr const char* kStateFailed = "FAILED";
inline constexpr const char* kStateUnknown = "UNKNOWN";

// True for COMPLETED and FAILED.
bool is_terminal_state(const std::string& state);
// True for the five states above.
bool is_valid_state(const std::string& state);

// What kind of machine an accelerator type is; picks xpk's --tpu-type (TPU) or --device-type
// (GPU, CPU). Spelled "tpu" | "gpu" | "cpu" in YAML and JSON.
enum class DeviceClass { kTpu, kGpu, kCpu };

const char* to_string(DeviceClass device_class);  // "tpu" | "gpu" | "cpu"
// The class spelled `text` exactly ("tpu", "gpu", "cpu"); nullopt otherwise.
std::optional<DeviceClass> parse_device_class(std::string_view text);

// How a cluster is probed (docs/configuration.md, `probe.backend`): by running
// `xpk workload list` (the default) or by listing Kueue Workload objects from the cluster's
// Kubernetes API with the warmed kubeconfig. Spelled "xpk" | "kube" in YAML and JSON.
enum class ProbeBackend { kXpk, kKube };

const char* to_string(ProbeBackend backend);  // "xpk" | "kube"
// The backend spelled `text` exactly; nullopt otherwise.
std::optional<ProbeBackend> parse_probe_backend(std::string_view text);

// An accelerator type a cluster offers, and how much the layer prefers it there.
struct AcceleratorSlot {
  std::string type;  // canonical: xpk's name, "v4-64", "h100-80gb-8" (accelerator_types.h)
  DeviceClass device_class = DeviceClass::kTpu;
  int priority = 1;  // 1 is the most preferred; sorted ascending
  bool operator==(const AcceleratorSlot&) const = default;
};

// One cluster of `repos.yaml`.
struct ClusterConfig {
  std::string name;        // registry key, "tpu-v4-prod"
  std::string provider;    // "gke"
  std::string project;     // GCP project id
  std::string zone;        // what xpk gets as --zone: "us-central2-b", or a region
  std::string cluster_id;  // GKE cluster name
  std::vector<AcceleratorSlot> accelerator_slots;
  std::string default_namespace = "default";
  std::string gcs_bucket;  // "gs://falcon-tpu-v4", or empty
  int max_queue_depth = 5;
  int probe_timeout_s = 15;
  std::map<std::string, std::string> labels;
  // The GKE cluster's location: its region for a regional cluster, its zone for a zonal one
  // (what gcloud takes as --location). The loader defaults it to `zone`; a ClusterConfig built
  // by hand may leave it empty: read it through gke_location().
  std::string location;
  // `probe.backend` of this cluster; null: the file's global `probe.backend` (default xpk).
  std::optional<ProbeBackend> probe_backend;

  // `location`, or `zone` when it is empty: the one place that default lives.
  const std::string& gke_location() const { return location.empty() ? zone : location; }

  // The slot for `accelerator_type` in either spelling ("tpu-v4-64" or "v4-64"), or nullptr
  // when the cluster does not offer it.
  const AcceleratorSlot* find_slot(const std::string& accelerator_type) const;
  bool operator==(const ClusterConfig&) const = default;
};

// Free quota of one Kueue ResourceFlavor of a cluster, from its ClusterQueue (docs/selection.md
// "Capacity and fragmentation"): nominal quota and usage of the accelerator resource
// (google.com/tpu, nvidia.com/gpu), in chips. Only the kube probe backend reads it.
struct AcceleratorCapacity {
  std::string flavor;       // the ResourceFlavor's name ("1xv4-64", "tpu-v4-podslice")
  std::string device_type;  // the xpk type the flavor is named for ("v4-64"); empty if none
  std::string accelerator;  // the GKE accelerator label it stands for ("tpu-v4-podslice")
  std::string resource;     // "google.com/tpu" | "nvidia.com/gpu"
  double nominal = 0;       // nominalQuota, summed over the ClusterQueue's resource groups
  double used = 0;          // the larger of status.flavorsUsage and flavorsReservation
  // The largest block of free chips one slice can take whole (a free node pool, a free ICI
  // domain); null when the cluster does not say (see docs/selection.md for the source).
  std::optional<double> largest_free_block;
  // The largest block, free or not: the largest slice the flavor can ever hold whole; null when
  // the cluster does not say.
  std::optional<double> largest_block;
  bool operator==(const AcceleratorCapacity&) const = default;
};

// The outcome of probing one cluster.
struct ClusterProbeResult {
  std::string cluster;
  bool reachable = false;
  std::optional<int> queue_depth;    // QUEUED workloads; null when unreachable
  std::optional<int> running_count;  // RUNNING workloads; null when unreachable
  std::optional<std::string> error;  // why it is unreachable; null when reachable
  std::string probed_at;             // ISO 8601 UTC
  // Free quota per flavor (kube backend); empty when not known (xpk backend, no ClusterQueue
  // readable). JSON "capacity", present only when not empty.
  std::vector<AcceleratorCapacity> capacity;
  // Kube backend: why capacity could not be read on a probe that otherwise succeeded (the
  // ClusterQueue list answered 403 to a grant without it, or another error status, failed twice
  // in passing, or was not JSON), naming the cluster; the probe stands and capacity is not
  // known, so neither the fit rule nor a capacity score counts it. Null when capacity was read or
  // not asked for (xpk backend). JSON "capacity_error", present only when set.
  std::optional<std::string> capacity_error;
  // Kube backend: how long its recent Workloads waited between quota reservation and admission
  // (Kueue's admission checks, e.g. node provisioning), in seconds (kube/workload_objects.h);
  // null when not known. JSON "admission_delay_s", present only when known.
  std::optional<double> admission_delay_s;
  bool operator==(const ClusterProbeResult&) const = default;
};

// The signals a candidate was judged on (docs/selection.md "Signals"): its probe, and its
// history in the state store over the signal window. Null: not known (no probe, no history).
struct ClusterSignals {
  std::optional<int> queue_depth;           // QUEUED workloads at the probe
  std::optional<int> running;               // RUNNING workloads at the probe
  std::optional<double> drain_per_min;      // workloads admitted per minute over the window
  std::optional<double> recent_wait_s;      // mean admission wait of the window's admissions
  std::optional<double> admission_delay_s;  // the probe's: recent quota-to-admission time
  std::optional<double> health;             // share of successful probes and submits, 0..1
  int health_samples = 0;                   // how many probes and submits `health` counts
  std::optional<double> latency_ms;         // mean probe duration over the window
  // Capacity of the requested accelerator (docs/selection.md "Capacity and fragmentation"),
  // null when the probe gave none: the request's slice in chips, the free chips of the
  // matching flavors, their largest free block, 1 - largest free block / free chips, and their
  // largest block free or not (a slice larger never fits there).
  std::optional<double> slice_chips;
  std::optional<double> free_chips;
  std::optional<double> nominal_chips;
  std::optional<double> largest_free_block;
  std::optional<double> fragmentation;
  std::optional<double> largest_block;
  bool operator==(const ClusterSignals&) const = default;
};

// One signal's part in a candidate's ranking: its value, where the policy's formula puts it
// (0..1, 1 best), its weight and its contribution (docs/selection.md "Policies").
struct SignalTerm {
  std::string signal;                // priority | queue | wait | recent_wait | health | ...
  std::optional<double> value;       // in the signal's own unit; null when not known
  std::optional<double> normalized;  // 0..1; null when the policy does not use it
  double weight = 0;                 // the policy's weight (0: shown, not counted)
  double contribution = 0;           // what it adds to the candidate's total
  bool operator==(const SignalTerm&) const = default;
};

// How one candidate fared in a decision: its signals, each term of the policy, its total, its
// rank and, in one line, why it was chosen, lost or skipped.
struct CandidateScore {
  std::string cluster;
  int priority = 1;         // the accelerator slot's priority on this cluster
  int max_queue_depth = 5;  // the cluster's limit when it was decided
  bool eligible = false;    // reachable, queue not full, not refused by a circuit breaker
  std::string skip_reason;  // why it was not eligible; empty when eligible
  ClusterSignals signals;
  std::vector<SignalTerm> terms;
  // score: the weighted score (higher wins); least-wait: the predicted admission wait in
  // seconds (lower wins); priority, or not eligible: null.
  std::optional<double> total;
  int rank = 0;         // 1: selected; 2, 3, ...: the runners-up; 0: not eligible
  std::string verdict;  // "selected: ...", "lost to <name>: ...", "skipped: ..."
  bool operator==(const CandidateScore&) const = default;
};

// The full record of one cluster choice, for audit.
struct ClusterSelection {
  std::string selected_cluster;
  std::string accelerator;
  std::vector<std::string> candidates;  // in priority order
  std::vector<ClusterProbeResult> probe_results;
  std::string reason;  // "selected <name>: reachable, queue_depth=<N> <= max=<M>"
  std::string decided_at;
  // The decision's id in the state store (StateStore::get_selection); 0 when it was not stored.
  std::int64_t selection_id = 0;
  // Why a decision made with a state store open is not in it (the store's error: a full disk,
  // a database restart); empty when it was recorded or no store is open. JSON "not_recorded",
  // present only when not empty.
  std::string not_recorded;
  // The policy that decided ("priority" | "score" | "least-wait") and every candidate's part in
  // it, in candidate order (the --explain table). Empty in records older than issue 15.
  std::string policy;
  std::vector<CandidateScore> scores;
  bool operator==(const ClusterSelection&) const = default;
};

// What the business layer asks to run.
struct WorkloadSpec {
  std::string name;  // [a-z]([-a-z0-9]*[a-z0-9])?, at most 40 characters (xpk's rule)
  std::string docker_image;
  std::vector<std::string> command;  // argv; joined shell-quoted into xpk's --command
  std::string accelerator_type;      // either spelling: "tpu-v4-64" or "v4-64"
  std::string priority = "medium";   // very-low | low | medium | high | very-high
  std::map<std::string, std::string> env;
  std::optional<std::string> namespace_;  // JSON "namespace"; null: the cluster's default
  std::vector<std::string> extra_args;    // appended verbatim, last, to `xpk workload create`
  bool operator==(const WorkloadSpec&) const = default;
};

// Identifies a submitted workload for later calls.
struct WorkloadHandle {
  std::string workload_name;
  std::string cluster;
  std::string namespace_;  // JSON "namespace"
  std::string submitted_at;
  bool operator==(const WorkloadHandle&) const = default;
};

struct WorkloadStatus {
  std::string workload_name;
  std::string state;  // QUEUED | RUNNING | COMPLETED | FAILED | UNKNOWN
  std::optional<std::string> start_time;
  std::optional<std::string> end_time;
  std::optional<int> exit_code;
  bool operator==(const WorkloadStatus&) const = default;
};

// One row of `xpk workload list`, summarised.
struct WorkloadInfo {
  std::string name;
  std::string state;
  std::string accelerator_type;  // from falcon's submission record; empty when not known
  std::optional<std::string> start_time;
  bool operator==(const WorkloadInfo&) const = default;
};

struct LogFilter {
  std::optional<std::vector<int>> ranks;  // null: every rank; [0]: rank 0 only
  std::optional<std::string> since;       // RFC 3339; only entries at or after it
  std::optional<std::string> grep;        // a Cloud Logging query expression, run server-side
  std::optional<int> tail_lines;          // only the last N lines
  bool operator==(const LogFilter&) const = default;
};

struct LogExportResult {
  std::string workload_name;
  std::string cluster;
  std::vector<int> exported_ranks;
  std::map<int, std::string> gcs_uris;  // JSON keys are the rank as a string: {"0": "gs://..."}
  std::string exported_at;
  bool operator==(const LogExportResult&) const = default;
};

// JSON in both directions (nlohmann ADL hooks). from_json throws nlohmann::json::exception on
// a missing field or a wrong type. ClusterConfig's `location` may be absent (it is then `zone`).
void to_json(nlohmann::json& j, const DeviceClass& v);
void from_json(const nlohmann::json& j, DeviceClass& v);
void to_json(nlohmann::json& j, const AcceleratorSlot& v);
void from_json(const nlohmann::json& j, AcceleratorSlot& v);
void to_json(nlohmann::json& j, const ClusterConfig& v);
void from_json(const nlohmann::json& j, ClusterConfig& v);
void to_json(nlohmann::json& j, const AcceleratorCapacity& v);
void from_json(const nlohmann::json& j, AcceleratorCapacity& v);
void to_json(nlohmann::json& j, const ClusterProbeResult& v);
void from_json(const nlohmann::json& j, ClusterProbeResult& v);

// One probe as a health loop holds it (`falcon serve`'s, and a server's answers): the result,
// how it was obtained, and how old it is.
struct MonitoredProbe {
  ClusterProbeResult result;  // result.probed_at: ISO 8601 UTC, when the probe finished
  std::string backend;        // how it was probed: "xpk" | "kube" (the cluster's probe.backend)
  std::int64_t duration_ms = 0;
  // Age at the time of the call that returned it (steady clock), in milliseconds.
  std::int64_t age_ms = 0;
  // Consecutive failed probes (unreachable) up to and including this one; 0 when reachable.
  int consecutive_failures = 0;
  // When the loop will probe this cluster next (system clock, ISO 8601 UTC); empty when the
  // loop is not running.
  std::string next_probe_at;
  bool from_cache = false;  // answered from the cache (fresh()), not probed by this call
};

// {"result": ClusterProbeResult, "backend", "duration_ms", "age_ms", "consecutive_failures",
//  "next_probe_at" (null when empty), "from_cache"}.
void to_json(nlohmann::json& j, const MonitoredProbe& v);
void from_json(const nlohmann::json& j, MonitoredProbe& v);
void to_json(nlohmann::json& j, const ClusterSignals& v);
void from_json(const nlohmann::json& j, ClusterSignals& v);
void to_json(nlohmann::json& j, const SignalTerm& v);
void from_json(const nlohmann::json& j, SignalTerm& v);
void to_json(nlohmann::json& j, const CandidateScore& v);
void from_json(const nlohmann::json& j, CandidateScore& v);
void to_json(nlohmann::json& j, const ClusterSelection& v);
void from_json(const nlohmann::json& j, ClusterSelection& v);
void to_json(nlohmann::json& j, const WorkloadSpec& v);
void from_json(const nlohmann::json& j, WorkloadSpec& v);
void to_json(nlohmann::json& j, const WorkloadHandle& v);
void from_json(const nlohmann::json& j, WorkloadHandle& v);
void to_json(nlohmann::json& j, const WorkloadStatus& v);
void from_json(const nlohmann::json& j, WorkloadStatus& v);
void to_json(nlohmann::json& j, const WorkloadInfo& v);
void from_json(const nlohmann::json& j, WorkloadInfo& v);
void to_json(nlohmann::json& j, const LogFilter& v);
void from_json(const nlohmann::json& j, LogFilter& v);
void to_json(nlohmann::json& j, const LogExportResult& v);
void from_json(const nlohmann::json& j, LogExportResult& v);

}  // namespace falcon
