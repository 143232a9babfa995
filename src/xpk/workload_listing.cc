#include "xpk/workload_listing.h"

#include <fmt/format.h>

#include "falcon/errors.h"
#include "xpk/failure_text.h"
#include "xpk/xpk_cli.h"

namespace falcon::xpk {

const std::vector<ListedWorkload>& WorkloadListing::workloads_or_throw() const {
  if (error) throw XpkCommandError(*error, cluster, exit_code, details);
  return workloads;
}

WorkloadListing list_workloads(const XpkCli& xpk, const ClusterConfig& cluster,
                               const std::optional<std::string>& filter_by_job,
                               std::chrono::milliseconds timeout) {
  std::vector<std::string> flags;
  if (filter_by_job) flags.push_back("--filter-by-job=" + *filter_by_job);
  const CommandResult run = xpk.run_workload(cluster, "list", flags, {}, timeout);

  WorkloadListing out;
  out.cluster = cluster.name;
  if (!run.ok()) {
    const auto failure = describe_failure(run);
    out.error =
        fmt::format("xpk workload list failed on cluster '{}': {}", cluster.name, failure.full());
    out.timed_out = run.timed_out;
    if (!run.timed_out && run.term_signal == 0) out.exit_code = run.exit_code;
    out.details = failure.details;
    return out;
  }
  auto list = parse_workload_list(run.stdout_text);
  if (!list) {
    out.error = fmt::format(
        "xpk workload list on cluster '{}' exited 0 but printed no workload list (no "
        "'Workload List Output:' line and no table header); is '{}' a supported xpk?",
        cluster.name, xpk.settings().binary);
    out.exit_code = 0;
    return out;
  }
  out.workloads.reserve(list->rows.size());
  for (auto& row : list->rows) {
    std::string state = map_row_state(row);
    out.workloads.push_back(ListedWorkload{std::move(row), std::move(state)});
  }
  return out;
}

ClusterProbeResult count_probe_states(const std::string& cluster,
                                      const std::vector<ListedWorkload>& workloads) {
  ClusterProbeResult r;
  r.cluster = cluster;
  r.reachable = true;
  int queued = 0;
  int running = 0;
  for (const auto& w : workloads) {
    queued += w.state == kStateQueued;
    running += w.state == kStateRunning;
  }
  r.queue_depth = queued;
  r.running_count = running;
  return r;
}

}  // namespace falcon::xpk
