// What a simulated pod prints and how GKE's logging agent turns it into Cloud Logging entries.
//
// A pod's output is a script, computed line by line from a seed (nothing is stored):
//
//   XPK Start: Mon Jun  1 10:00:02 UTC 2026                              stdout, INFO
//   step=1 loss=2.4113 step_time=5.580s tokens/s=93958.6                 stdout, INFO
//   ... (steps x lines_per_step; extra lines carry grad_norm, hbm, mfu)
//   Traceback (most recent call last): ...                                stderr, ERROR (failing
//   pod) XPK End: Mon Jun  1 10:10:00 UTC 2026                                stdout, INFO
//   EXIT_CODE=0                                                           stdout, INFO
//
// Entries carry exactly what GKE and xpk produce (reference/xpk.md §4, gcp.md §1.3-1.4):
// resource k8s_container{project_id, location, cluster_name, namespace_name, pod_name,
// container_name}, pod labels under labels."k8s-pod/<key with dots as underscores>"
// (jobset-name, job-index, batch job-completion-index, xpk workload, restart-attempt,
// job-name, replicatedjob-name, kueue podset), GKE's top-level controller labels, the
// node in labels."compute.googleapis.com/resource_name", logName
// projects/<p>/logs/stdout|stderr with severity INFO|ERROR, a nanosecond timestamp and a
// 16-character insertId. receiveTimestamp is left to the Logging server, as entries:write does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace falcon::fleet {

// Deterministic pseudo-random numbers (splitmix64), so the same seed gives the same fleet.
std::uint64_t mix64(std::uint64_t x);
std::uint64_t hash_string(std::string_view text, std::uint64_t seed = 0);

// `<workload>-slice-job-<slice>-<worker>-<5 chars>`, the chars drawn from Kubernetes' random
// suffix alphabet ("bcdfghjklmnpqrstvwxz2456789") using `seed`.
std::string make_pod_name(const std::string& workload, int slice, int worker, std::uint64_t seed);

// `date`'s default output in UTC, as xpk's markers print it: `Mon Jun  1 10:00:02 UTC 2026`.
std::string format_date_command(std::int64_t time_ns);

struct PodIdentity {
  std::string project;
  std::string location;
  std::string cluster_name;
  std::string namespace_name = "default";
  std::string workload;
  std::string pod_name;
  std::string container_name = "jax-tpu";
  std::string node_name;  // compute.googleapis.com/resource_name
  int slice = 0;
  int worker = 0;
  int restart_attempt = 0;
  bool omit_completion_index = false;  // the entry lacks the completion-index label
};

struct LogLine {
  std::int64_t time_ns = 0;
  std::string text;
  bool is_stderr = false;
};

// One pod's run from start_ns to end_ns, as a numbered list of lines with strictly increasing
// timestamps (line i is at least start_ns + i). The end markers (XPK End, EXIT_CODE) are at
// end_ns - 1 and end_ns, so every line falls inside [start_ns, end_ns]; only a run shorter than
// about 67 ns per line has lines up to line_count() ns after end_ns.
struct PodScript {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  int steps = 100;
  int lines_per_step = 1;
  bool failing = false;  // this pod raises the error that fails the JobSet
  int exit_code = 0;     // printed as EXIT_CODE=<n>
  std::uint64_t seed = 0;

  std::size_t line_count() const;
  // Line `index` (< line_count()).
  LogLine line(std::size_t index) const;
  // The two lines a pod prints when it is terminated early (SIGTERM): XPK End and EXIT_CODE=143.
  static LogLine termination_line(std::int64_t time_ns, int which);
};

// The number of steps that makes a pod print exactly `total_lines` lines (with one line per
// step): total minus the start/end/exit markers and, for the failing pod, the error lines.
int steps_for_total_lines(int total_lines, bool failing);

// The LogEntry parts every line of one pod shares, per stream (see LogRun in log_sink.h),
// prepared once.
class PodLogWriter {
 public:
  explicit PodLogWriter(const PodIdentity& pod);
  // The shared part of the pod's stdout entries (severity INFO) or stderr entries (ERROR).
  const std::shared_ptr<const nlohmann::json>& shared(bool is_stderr) const {
    return is_stderr ? stderr_shared_ : stdout_shared_;
  }
  // The complete entry for `line`.
  nlohmann::json entry(const LogLine& line) const;
  const PodIdentity& pod() const { return pod_; }

 private:
  PodIdentity pod_;
  std::shared_ptr<const nlohmann::json> stdout_shared_;
  std::shared_ptr<const nlohmann::json> stderr_shared_;
};

}  // namespace falcon::fleet
