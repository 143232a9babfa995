#include <exception>

#include <fmt/format.h>

#include "falcon/errors.h"
#include "falcon/prober.h"
#include "util/time_format.h"
#include "xpk/failure_text.h"
#include "xpk/list_parser.h"
#include "xpk/xpk_cli.h"

namespace falcon {
namespace {

ClusterProbeResult unreachable(const ClusterConfig& cluster, std::string error) {
  ClusterProbeResult r;
  r.cluster = cluster.name;
  r.reachable = false;
  r.error = std::move(error);
  return r;
}

}  // namespace

ClusterProber::ClusterProber(std::shared_ptr<CommandRunner> runner, XpkSettings settings,
                             std::shared_ptr<Clock> clock)
    : xpk_(std::make_shared<const xpk::XpkCli>(std::move(runner), std::move(settings))),
      clock_(std::move(clock)) {}

ClusterProber::~ClusterProber() = default;

ClusterProbeResult ClusterProber::probe(const ClusterConfig& cluster) const {
  ClusterProbeResult result;
  try {
    const auto timeout = std::chrono::seconds(cluster.probe_timeout_s);
    const CommandResult run = xpk_->run(xpk_->workload_command(cluster, "list", {}, {}, timeout));
    if (run.timed_out) {
      result =
          unreachable(cluster, fmt::format("probe timed out after {}s", cluster.probe_timeout_s));
    } else if (!run.ok()) {
      result = unreachable(cluster, fmt::format("xpk workload list failed on cluster '{}': {}",
                                                cluster.name, xpk::describe_failure(run).full()));
    } else if (auto list = xpk::parse_workload_list(run.stdout_text); !list) {
      result = unreachable(
          cluster, fmt::format("xpk workload list on cluster '{}' exited 0 but printed no "
                               "workload list (no 'Workload List Output:' line and no table "
                               "header); is '{}' a supported xpk?",
                               cluster.name, xpk_->settings().binary));
    } else {
      int queued = 0;
      int running = 0;
      for (const auto& row : list->rows) {
        const std::string state = xpk::map_row_state(row);
        queued += state == kStateQueued;
        running += state == kStateRunning;
      }
      result.cluster = cluster.name;
      result.reachable = true;
      result.queue_depth = queued;
      result.running_count = running;
    }
  } catch (const std::exception& e) {
    result = unreachable(cluster, e.what());
  } catch (...) {
    result = unreachable(cluster, "probe failed with an unknown exception");
  }
  try {
    result.probed_at = format_iso8601(clock_->now());
  } catch (...) {
    // A clock that throws is a broken fake; leave probed_at empty rather than escape.
  }
  return result;
}

}  // namespace falcon
