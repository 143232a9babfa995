// ClusterProber: is a cluster reachable, and how busy is it?
//
// A probe runs `xpk workload list --cluster=<cluster_id> --project=<project> --zone=<zone>`
// (plus xpk.extra_args; no --filter-by-job or --filter-by-status: it lists everything), with a
// kubeconfig of its own and a deadline of the cluster's probe_timeout_s, then counts the
// listed workloads by state (reference/xpk.md §1.5):
//
//   outcome                        result
//   listed                         reachable=true, queue_depth=#QUEUED, running_count=#RUNNING
//   listed, no workloads           reachable=true, 0 and 0
//   deadline passed                reachable=false, error="probe timed out after <N>s"
//   non-zero exit / killed         reachable=false, error="xpk workload list failed on cluster
//                                  '<name>': exit code 1: <stderr and xpk's error lines>"
//   exit 0 but no list printed     reachable=false, error says the output was not a list
//   anything thrown (binary        reachable=false, error=the exception's message
//   missing, state dir unusable)
//
// probed_at is the ISO 8601 UTC time the probe finished (`2026-04-13T08:00:00.123Z`).
//
// Where the spec and xpk differ (reference/xpk.md): the spec's error is "stderr", but real xpk
// reports most failures on stdout as `[XPK] ` lines, so the error carries stderr *and* those
// lines. The spec counts "state=QUEUED" rows; xpk prints no such state, so rows are classified
// by Status, Status Message and Running/Ran together (§1.5) — a running job often shows
// `QuotaReserved`. xpk's own --filter-by-status is never used (it is wrong on current clusters).
//
// Two backends read the workloads (`probe.backend`, docs/configuration.md): `xpk` runs
// `xpk workload list` as above (the default); `kube` lists Kueue Workload objects from the
// cluster's Kubernetes API with the warmed kubeconfig (src/kube/kube_prober.h). Both classify
// every workload through the one function xpk's table rows go through (xpk::map_row_state), so
// the counts agree; their errors differ in wording but not in meaning.
//
//   falcon::ClusterProber prober(falcon::make_posix_command_runner(), config.xpk,
//                                falcon::make_system_clock());
//   falcon::ClusterProbeResult r = prober.probe(registry.get_cluster("tpu-v4-prod"));
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "falcon/clock.h"
#include "falcon/command_runner.h"
#include "falcon/config.h"
#include "falcon/model.h"
#include "falcon/xpk_cli.h"

namespace falcon {
namespace xpk {
struct ListedWorkload;
}  // namespace xpk

// One way of reading a cluster for a probe. Implementations never throw from probe(): a
// failure is reachable=false with a one-line cause. probed_at is set by ClusterProber.
class ProbeSource {
 public:
  virtual ~ProbeSource() = default;
  virtual ClusterProbeResult probe(const ClusterConfig& cluster) const = 0;
  // The same probe, also filling `listed` with each workload's name and state when the source
  // read them (what a ListingObserver is told). The default reads none.
  virtual ClusterProbeResult probe_listed(const ClusterConfig& cluster,
                                          std::vector<WorkloadInfo>& listed) const {
    (void)listed;
    return probe(cluster);
  }
};

// A cluster's health as some source answers it (a probe now, a health loop's cache). Never
// throws for an unreachable cluster: reachable=false with the cause.
using ProbeFunction = std::function<ClusterProbeResult(const ClusterConfig&)>;

// Told what a probe listed (each workload's name and state, xpk's list or the kube API's) on the
// probing thread, for a caller that keeps workload states: the fabric records the state of every
// submission of its own that a probe shows. What it throws is ignored; the probe's result does not
// change.
using ListingObserver =
    std::function<void(const std::string& cluster, const std::vector<WorkloadInfo>& workloads)>;

class ClusterProber {
 public:
  // `settings` supplies the xpk binary, extra arguments, environment and state directory; the
  // prober runs xpk through an adapter of its own.
  // Throws FalconError only if no state directory can be determined (HOME unset and no passwd
  // entry, and xpk.state_dir empty).
  ClusterProber(std::shared_ptr<CommandRunner> runner, XpkSettings settings,
                std::shared_ptr<Clock> clock);
  // Runs xpk through `xpk`, an adapter shared with the workload manager (the facade builds one
  // per configuration; make_xpk_cli). `xpk` and `clock` must not be null.
  ClusterProber(std::shared_ptr<const xpk::XpkCli> xpk, std::shared_ptr<Clock> clock);
  // Both backends: clusters without a `probe.backend` of their own use `default_backend`.
  // `kube` may be null; a cluster that asks for kube then probes unreachable, saying so.
  // `on_listing` (optional) is told each successful listing, xpk's or the kube backend's.
  ClusterProber(std::shared_ptr<const xpk::XpkCli> xpk, std::shared_ptr<const ProbeSource> kube,
                ProbeBackend default_backend, std::shared_ptr<Clock> clock,
                ListingObserver on_listing = {});
  virtual ~ClusterProber();
  ClusterProber(const ClusterProber&) = delete;
  ClusterProber& operator=(const ClusterProber&) = delete;

  // Probes `cluster` as in the table above. Blocks for up to probe_timeout_s (plus the
  // runner's kill grace). Never throws. Safe to call from many threads at once. Virtual so that
  // a selector can be tested with a fake prober.
  virtual ClusterProbeResult probe(const ClusterConfig& cluster) const;

  // A result available at once, without probing (a cache answer), or nullopt when `cluster`
  // must be probed. The selector asks this first, on its own thread, and starts threads only
  // for the candidates left. This prober has no cache: always nullopt.
  virtual std::optional<ClusterProbeResult> cached(const ClusterConfig& cluster) const;

  // The backend probe(cluster) uses: the cluster's own `probe.backend`, else the default given
  // at construction (xpk). to_string() of it ("xpk" | "kube") is what a probe record names.
  ProbeBackend backend(const ClusterConfig& cluster) const {
    return cluster.probe_backend.value_or(default_backend_);
  }

 protected:
  ClusterProber() = default;  // for fakes that override probe() and run nothing

 private:
  ClusterProbeResult probe_with_xpk(const ClusterConfig& cluster) const;
  void tell_listing(const std::string& cluster,
                    const std::vector<xpk::ListedWorkload>& listed) const;
  void tell_listing(const std::string& cluster, const std::vector<WorkloadInfo>& workloads) const;

  std::shared_ptr<const xpk::XpkCli> xpk_;
  std::shared_ptr<const ProbeSource> kube_;
  ProbeBackend default_backend_ = ProbeBackend::kXpk;
  std::shared_ptr<Clock> clock_;
  ListingObserver on_listing_;
};

}  // namespace falcon
