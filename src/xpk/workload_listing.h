// One `xpk workload list` on one cluster: run, parse, classify. The prober, get_status and
// list_workloads all read a cluster through this one call (DESIGN D4).
//
// xpk's --filter-by-status is never passed (it is wrong on current clusters, reference/xpk.md
// §1.4). --filter-by-job=<name> is passed only when the caller names one workload (get_status):
// xpk then keeps the rows whose name *contains* <name> (a regex match before v1.8), so callers
// still match names exactly. The prober and list_workloads list everything.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "falcon/model.h"
#include "xpk/list_parser.h"

namespace falcon::xpk {

class XpkCli;

struct ListedWorkload {
  ListRow row;
  std::string state;  // map_row_state(row): QUEUED | RUNNING | COMPLETED | FAILED | UNKNOWN
};

struct WorkloadListing {
  std::string cluster;                    // registry name
  std::vector<ListedWorkload> workloads;  // in xpk's order; empty unless ok()
  // Why there is no list, e.g. "xpk workload list failed on cluster 'c': exit code 1: ...",
  // "... timed out after 15.0s", "xpk workload list on cluster 'c' exited 0 but printed no
  // workload list ...". Unset when the list was read.
  std::optional<std::string> error;
  bool timed_out = false;
  std::optional<int> exit_code;  // xpk's exit code; null when it did not exit by itself
  std::string details;           // stderr and xpk's error lines (failure_text.h)

  bool ok() const { return !error.has_value(); }
  // The workloads; throws XpkCommandError(error, cluster, exit_code, details) unless ok().
  const std::vector<ListedWorkload>& workloads_or_throw() const;
};

// The probe's counts over classified workloads, the same for every backend: reachable=true,
// queue_depth = #QUEUED, running_count = #RUNNING (probed_at left empty).
ClusterProbeResult count_probe_states(const std::string& cluster,
                                      const std::vector<ListedWorkload>& workloads);

// Runs `xpk workload list` on `cluster` (with --filter-by-job=<filter_by_job> when set) with a
// deadline of `timeout`, and reads its table. A failed, timed-out or unreadable list is reported
// in the result, not thrown. Throws CommandStartError when xpk cannot be started and FalconError
// when the state directory is unusable. Blocks up to `timeout` (plus the runner's kill grace).
WorkloadListing list_workloads(const XpkCli& xpk, const ClusterConfig& cluster,
                               const std::optional<std::string>& filter_by_job,
                               std::chrono::milliseconds timeout);

}  // namespace falcon::xpk
