// XpkWorkloadManager: the life of a workload through `xpk workload create|list|delete`
// (the spec's module 4, DESIGN D3/D4).
//
// Every call runs xpk as argv (never a shell), stdin closed, with a kubeconfig of its own
// (seeded from the cluster's warmed one, see docs/deployment.md), xpk.env and xpk.extra_args,
// and a deadline of xpk.command_timeout_s. The spec's get_status/cancel take only a handle;
// here they also take the handle's ClusterConfig (the facade resolves handle.cluster through
// the registry).
//
// Submission record. Every submit records the submission in a SubmissionStore before xpk runs
// when the store can take an intent (the state store: no workload exists that it does not know
// of; a store that cannot take it fails the submit with nothing created; a create that made
// nothing takes its record back), else after a successful create, so that later calls by name
// (another falcon process, days later) can recover what falcon submitted: find_submission, and
// the accelerator column of list_workloads. The facade passes one over the state store
// (falcon.db, docs/state-store.md); a manager built without one appends to
// <state_dir>/submissions.jsonl, the old record file (file mode 0600, directory 0700; format and
// concurrency rules in src/workload/submission_log.h).
//
// Namespaces (DESIGN D3). Stock xpk has no --namespace flag; everything runs in `default`.
// xpk.namespace_flag decides:
//   supported    pass --namespace=<ns> on every create;
//   unsupported  never pass it; a non-default namespace makes submit fail before running xpk;
//   auto         the same as unsupported for the namespace `default` (no flag, no question),
//                otherwise read `xpk workload create --help` once per xpk adapter, and
//                behave as `supported` if it mentions --namespace, else as `unsupported`.
// <ns> is spec.namespace, else the cluster's default_namespace. (The spec passes --namespace
// unconditionally; reference/xpk.md §2.1 shows stock xpk has no such flag and would reject it
// with an argparse error, so the facts win here.)
//
// Other places where the facts of reference/xpk.md override the spec:
//   - the spec's `--command="{spec.command joined}"` loses arguments with spaces or quotes; each
//     word is shell-quoted instead (xpk runs the string through a shell in the container);
//   - device_class `cpu` (CPU device types such as n2-standard-32-4) also uses --device-type;
//   - get_status of a workload xpk's list does not show raises WorkloadNotFoundError, as the
//     spec's error table says (issue 11; issue 3 had reported UNKNOWN): xpk's list cannot tell
//     "never existed" from "finished and garbage-collected after its 12 h TTL", and both mean
//     the cluster no longer has it. cancel raises it from kubectl's NotFound.
//
// Reading workloads with the kube backend. A cluster whose probe.backend is `kube` (its own, or
// the global one) is read by get_status and list_workloads through the kube backend's Kueue
// Workload list (src/kube/kube_prober.h) instead of `xpk workload list`, when the manager was
// given that reader: every Workload becomes the row xpk would print for it and goes through the
// same classification, so both backends give every workload the same state. submit and cancel
// always run xpk.
//
// All methods may be called from many threads at once (and from several falcon processes
// sharing one state directory).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "falcon/clock.h"
#include "falcon/command_runner.h"
#include "falcon/config.h"
#include "falcon/errors.h"
#include "falcon/model.h"
#include "falcon/xpk_cli.h"

namespace falcon {

namespace xpk {
struct ListedWorkload;  // a workload's row and state (src/xpk/workload_listing.h)
}  // namespace xpk

// A reader of a cluster's workloads other than xpk: the kube backend's Workload list.
class WorkloadListSource {
 public:
  virtual ~WorkloadListSource() = default;
  // Every workload of `cluster`, classified as xpk's table would be. Throws std::runtime_error
  // with a one-line cause naming the cluster (unreachable, 401/403, no Kueue CRDs, timeout).
  virtual std::vector<xpk::ListedWorkload> list_workloads(const ClusterConfig& cluster) const = 0;
};

// What falcon remembers about one submission (a line of submissions.jsonl).
struct SubmissionRecord {
  std::string cluster;  // registry name
  std::string workload;
  std::string namespace_;  // JSON "namespace": the namespace the workload was submitted to
  std::string accelerator_type;
  std::string device_class;  // tpu | gpu | cpu
  std::string submitted_at;  // ISO 8601 UTC, taken just before xpk ran
  std::string cluster_id;
  std::string project;
  std::string zone;
  std::string docker_image;
  std::string priority;
  // The state store's row only (submissions.jsonl has neither): what was asked, so that it can
  // be submitted again, and the recorded decision that chose the cluster (0: the caller named
  // it). The row is written once, before xpk runs, with both.
  std::optional<WorkloadSpec> spec;
  std::int64_t selection_id = 0;
  bool operator==(const SubmissionRecord&) const = default;
};

// Where a workload manager remembers its submissions (the seam between it and the state store).
class SubmissionStore {
 public:
  virtual ~SubmissionStore() = default;
  // Remembers `record`, replacing an earlier one of the same (cluster, workload). May throw
  // (FalconError, StateStoreError); submit catches it: the workload exists either way.
  virtual void record(const SubmissionRecord& record) = 0;
  // Before xpk runs: remembers `record` unless a record of the same (cluster, workload) exists
  // (an earlier workload of that name, left as it is); returns whether it did. Throws when it
  // cannot tell or cannot write (StateStoreError, FalconError): submit then runs nothing. The
  // default remembers nothing and returns false, so submit records after the create as before
  // (the append-only record file, which cannot take a record back).
  virtual bool intend(const SubmissionRecord& record);
  // After a create that made nothing: takes back the record intend() wrote. Must not throw. The
  // default does nothing.
  virtual void forget(const SubmissionRecord& record);
  // Before `xpk workload delete` runs: records that `workload` on `cluster` is to be deleted and
  // returns the record's id. Throws when it cannot write (StateStoreError): cancel then deletes
  // nothing. The default records nothing and returns 0 (the record file keeps no deletes).
  virtual std::int64_t intend_delete(const std::string& cluster, const std::string& workload);
  // After it: the outcome of delete `intent` (an id intend_delete returned; 0 is ignored), one
  // of kDeleteDeleted, kDeleteNotFound, kDeleteFailed (state_store.h), with what failed. Must
  // not throw. The default does nothing.
  virtual void deleted(std::int64_t intent, const std::string& outcome, const std::string& detail);
  // The latest record of (`cluster` registry name, `workload`), or nullopt. Must not throw: a
  // store it cannot read answers nullopt.
  virtual std::optional<SubmissionRecord> find(const std::string& cluster,
                                               const std::string& workload) const = 0;
};

// The old record file as a SubmissionStore (src/workload/submission_log.h).
std::shared_ptr<SubmissionStore> make_jsonl_submission_store(const std::string& path);

// A workload spec refused by submit's own checks before xpk ran (name, priority, environment,
// image, command, --xpk-arg, accelerator, namespace): the caller's input is at fault, not xpk
// (the CLI exits 2). A WorkloadSubmitError with a null exit_code() and no stderr.
class InvalidWorkloadSpecError : public WorkloadSubmitError {
 public:
  InvalidWorkloadSpecError(std::string message, std::string cluster, std::string workload)
      : WorkloadSubmitError(std::move(message), std::move(cluster), std::move(workload),
                            std::nullopt, "") {}
  const char* type_name() const noexcept override { return "InvalidWorkloadSpecError"; }
};

// A create that xpk gave up on before its create step (`kubectl apply`): it ended by itself,
// on a pre-apply step that failed (its existence check, e.g. "Unable to connect to the
// server: ... i/o timeout" from a cluster that just died, or its scheduling validation), and
// printed nothing of the create step ("Starting workload create", the apply). Proof that this
// create made no workload, whether or not the cluster answers afterwards. A timeout, a signal
// or a failure in or after the create step is a plain WorkloadSubmitError: there the workload
// may exist.
class WorkloadNotCreatedError : public WorkloadSubmitError {
 public:
  using WorkloadSubmitError::WorkloadSubmitError;
  const char* type_name() const noexcept override { return "WorkloadNotCreatedError"; }
};

// A create refused because a workload of that name exists on the cluster already: xpk said so
// about this workload (not about its service account or roles, which it reports as "already
// exists" on every create) and created nothing. The only submit failure the API answers 409.
class WorkloadExistsError : public WorkloadSubmitError {
 public:
  using WorkloadSubmitError::WorkloadSubmitError;
  const char* type_name() const noexcept override { return "WorkloadExistsError"; }
};

// The outcome of fetching one cluster's credentials (ClusterFabric::warm_up).
struct WarmupResult {
  std::string cluster;
  bool ok = false;
  std::optional<std::string> error;  // why it failed; null when ok
  std::chrono::milliseconds elapsed{0};
  bool operator==(const WarmupResult&) const = default;
};

// {"cluster", "ok", "error" (null when ok), "elapsed_ms"}.
void to_json(nlohmann::json& j, const WarmupResult& v);

class XpkWorkloadManager {
 public:
  // Runs xpk through an adapter of its own. Resolves the state directory now (xpk.state_dir,
  // else $XDG_STATE_HOME/falcon, else ~/.local/state/falcon) and creates it, 0700, when first
  // needed. Throws FalconError only if no state directory can be determined.
  XpkWorkloadManager(std::shared_ptr<CommandRunner> runner, XpkSettings settings,
                     std::shared_ptr<Clock> clock);
  // Runs xpk through `xpk`, an adapter shared with the prober (the facade builds one per
  // configuration; make_xpk_cli), so the answer of `xpk workload create --help` is read
  // once for both. `xpk` and `clock` must not be null.
  // `submissions`: where submissions are remembered; null: <state_dir>/submissions.jsonl.
  // `kube`: the reader get_status and list_workloads use for clusters whose probe.backend is
  // kube (`default_backend` for clusters without one of their own); null: xpk for every cluster.
  XpkWorkloadManager(std::shared_ptr<const xpk::XpkCli> xpk, std::shared_ptr<Clock> clock,
                     std::shared_ptr<SubmissionStore> submissions = nullptr,
                     std::shared_ptr<const WorkloadListSource> kube = nullptr,
                     ProbeBackend default_backend = ProbeBackend::kXpk);
  ~XpkWorkloadManager();
  XpkWorkloadManager(const XpkWorkloadManager&) = delete;
  XpkWorkloadManager& operator=(const XpkWorkloadManager&) = delete;

  // Submits `spec` to `cluster`:
  //   xpk workload create --cluster=<cluster_id> --project=<project> --zone=<zone>
  //     --workload=<name> --docker-image=<image> --command=<command, each word shell-quoted>
  //     --tpu-type=<type> (device_class tpu) | --device-type=<type> (gpu, cpu)
  //     --priority=<priority> [--namespace=<ns>] --env=KEY=VALUE... <xpk.extra_args...>
  //     <spec.extra_args...>
  // Never --quiet (on xpk >= 1.9 it silently replaces a workload of the same name). Validates
  // first, without running anything: the name ([a-z]([-a-z0-9]*[a-z0-9])?, at most 40
  // characters), the priority (very-low|low|medium|high|very-high), env keys
  // ([a-zA-Z_][a-zA-Z0-9_]*) and values (no `"`, `\` or newline: xpk pastes them unescaped into
  // YAML), a non-empty image and command, the accelerator being one the cluster declares, and
  // the namespace rule above. Records the submission before running xpk (see the file comment):
  // a store that cannot take it throws StateStoreError (its database's reason) and nothing runs.
  // Returns the handle (namespace used, submitted_at). When a record of the name existed
  // already, it is replaced after the create succeeded; a failure to write it then does not fail
  // the submit (the workload exists, and the store knows its name).
  // Throws WorkloadSubmitError: a validation failure (exit_code null, nothing run), the binary
  // missing or the state directory unusable, a timeout or signal (exit_code null), or a
  // non-zero exit (its code, and stderr plus xpk's error lines); WorkloadNotCreatedError when
  // that exit came before xpk's create step (see there); WorkloadExistsError when xpk refused
  // the name because a workload of that name exists. Blocks up to
  // xpk.command_timeout_s, plus one `--help` call the first time in auto mode.
  // `selection_id`: the recorded decision that chose `cluster`, kept with the submission.
  WorkloadHandle submit(const ClusterConfig& cluster, const WorkloadSpec& spec,
                        std::int64_t selection_id = 0);

  // The state of `handle.workload_name` on `cluster`: the one call of falcon that passes
  // --filter-by-job=<name> to `xpk workload list` (xpk keeps the rows whose name contains it),
  // then takes the row whose name matches exactly. A name not listed is
  // UNKNOWN (never created, deleted, or removed after xpk's 12 h TTL) with null times.
  // With the kube backend (see above): the cluster's Workload list, the same row taken; its
  // failures are XpkCommandError too (exit code null, the one-line cause as the message).
  // start_time is the row's Created Time, end_time its Status Time once COMPLETED or FAILED
  // (both re-formatted as ISO 8601 with milliseconds). exit_code is always null: xpk's list
  // does not report one. Throws XpkCommandError when the list fails or prints no list,
  // CommandStartError when the binary is missing. Blocks up to xpk.command_timeout_s.
  WorkloadStatus get_status(const ClusterConfig& cluster, const WorkloadHandle& handle);

  // Deletes the workload: `xpk workload delete --workload=<name>` (xpk asks no question on this
  // path; stdin is closed anyway). Returns true when xpk exits 0 (the only non-throwing
  // outcome; the spec's bool is kept). Throws WorkloadNotFoundError when xpk fails and
  // kubectl reported the JobSet NotFound, XpkCommandError for any other failure (timeout,
  // signal, exit code, invalid name), CommandStartError when the binary is missing. Blocks up
  // to xpk.command_timeout_s.
  bool cancel(const ClusterConfig& cluster, const WorkloadHandle& handle);

  // Every workload listed on `cluster` (`xpk workload list` without --filter-by-job or
  // --filter-by-status: xpk's status filter is wrong on current clusters), mapped to our states
  // and, when `state_filter` is set, kept only if the state matches it. accelerator_type comes from
  // the submission record ("" for workloads falcon did not submit). Throws std::invalid_argument
  // for a state_filter that is not one of QUEUED|RUNNING|COMPLETED|FAILED|UNKNOWN, XpkCommandError
  // / CommandStartError as get_status.
  std::vector<WorkloadInfo> list_workloads(const ClusterConfig& cluster,
                                           const std::optional<std::string>& state_filter);

  // The latest submission record for (`cluster` registry name, `workload`), or nullopt, from
  // the SubmissionStore; never throws for a missing or damaged record.
  std::optional<SubmissionRecord> find_submission(const std::string& cluster,
                                                  const std::string& workload) const;

  // <state_dir>/submissions.jsonl: the old record file (used when no SubmissionStore was
  // given; the facade imports it into the state store once).
  std::string submissions_path() const;

 private:
  bool namespace_flag_supported(const std::string& cluster_name, const std::string& workload);
  // The workloads of `cluster` by its backend; throws XpkCommandError / CommandStartError.
  std::vector<xpk::ListedWorkload> read_workloads(
      const ClusterConfig& cluster, const std::optional<std::string>& filter_by_job) const;

  std::shared_ptr<const xpk::XpkCli> xpk_;
  std::shared_ptr<Clock> clock_;
  std::shared_ptr<SubmissionStore> submissions_;
  std::shared_ptr<const WorkloadListSource> kube_;
  ProbeBackend default_backend_ = ProbeBackend::kXpk;
};

}  // namespace falcon
