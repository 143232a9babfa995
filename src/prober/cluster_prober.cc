#include <exception>
#include <stdexcept>

#include <fmt/format.h>

#include "falcon/errors.h"
#include "falcon/prober.h"
#include "util/time_format.h"
#include "xpk/workload_listing.h"
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
    : ClusterProber(std::make_shared<const xpk::XpkCli>(std::move(runner), std::move(settings)),
                    std::move(clock)) {}

ClusterProber::ClusterProber(std::shared_ptr<const xpk::XpkCli> xpk, std::shared_ptr<Clock> clock)
    : xpk_(std::move(xpk)), clock_(std::move(clock)) {
  if (!xpk_ || !clock_) throw std::invalid_argument("ClusterProber: xpk and clock must be set");
}

ClusterProber::ClusterProber(std::shared_ptr<const xpk::XpkCli> xpk,
                             std::shared_ptr<const ProbeSource> kube, ProbeBackend default_backend,
                             std::shared_ptr<Clock> clock, ListingObserver on_listing)
    : ClusterProber(std::move(xpk), std::move(clock)) {
  kube_ = std::move(kube);
  default_backend_ = default_backend;
  on_listing_ = std::move(on_listing);
}

ClusterProber::~ClusterProber() = default;

std::optional<ClusterProbeResult> ClusterProber::cached(const ClusterConfig&) const {
  return std::nullopt;
}

ClusterProbeResult ClusterProber::probe(const ClusterConfig& cluster) const {
  ClusterProbeResult result;
  if (backend(cluster) == ProbeBackend::kKube) {
    try {
      std::vector<WorkloadInfo> listed;
      result = kube_ ? kube_->probe_listed(cluster, listed)
                     : unreachable(cluster, fmt::format("cluster '{}' asks for probe.backend kube, "
                                                        "but this prober has no kube backend",
                                                        cluster.name));
      if (result.reachable) tell_listing(cluster.name, listed);
    } catch (const std::exception& e) {
      result = unreachable(cluster, e.what());
    }
  } else {
    result = probe_with_xpk(cluster);
  }
  try {
    result.probed_at = format_iso8601(clock_->now());
  } catch (...) {
    // A clock that throws is a broken fake; leave probed_at empty rather than escape.
  }
  return result;
}

void ClusterProber::tell_listing(const std::string& cluster,
                                 const std::vector<xpk::ListedWorkload>& listed) const {
  if (!on_listing_) return;
  std::vector<WorkloadInfo> workloads;
  workloads.reserve(listed.size());
  for (const auto& w : listed) workloads.push_back({.name = w.row.jobset_name, .state = w.state});
  tell_listing(cluster, workloads);
}

void ClusterProber::tell_listing(const std::string& cluster,
                                 const std::vector<WorkloadInfo>& workloads) const {
  if (!on_listing_ || workloads.empty()) return;
  try {
    on_listing_(cluster, workloads);
  } catch (...) {
    // The observer's trouble is its own: the probe stands.
  }
}

ClusterProbeResult ClusterProber::probe_with_xpk(const ClusterConfig& cluster) const {
  ClusterProbeResult result;
  try {
    const auto listing = xpk::list_workloads(*xpk_, cluster, std::nullopt,
                                             std::chrono::seconds(cluster.probe_timeout_s));
    if (listing.timed_out) {
      result =
          unreachable(cluster, fmt::format("probe timed out after {}s", cluster.probe_timeout_s));
    } else if (!listing.ok()) {
      result = unreachable(cluster, *listing.error);
    } else {
      result = xpk::count_probe_states(cluster.name, listing.workloads);
      tell_listing(cluster.name, listing.workloads);
    }
  } catch (const std::exception& e) {
    result = unreachable(cluster, e.what());
  } catch (...) {
    result = unreachable(cluster, "probe failed with an unknown exception");
  }
  return result;
}

}  // namespace falcon
