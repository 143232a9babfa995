// Credential warm-up (`falcon cluster warm-up`, ClusterFabric::warm_up): fetch every cluster's
// credentials once, in parallel, into that cluster's warmed kubeconfig
// (<state_dir>/kube/<cluster>/config), which seeds the private kubeconfig of every later xpk
// call on that cluster (private_kubeconfig.h).
#pragma once

#include <vector>

#include "falcon/clock.h"
#include "falcon/model.h"
#include "falcon/workload_manager.h"

namespace falcon::xpk {

class XpkCli;

// For every cluster, up to `max_parallel` at once (below 1 counts as 1):
//   <xpk.gcloud_binary> container clusters get-credentials <cluster_id> --project=<project>
//     --location=<zone>
// with xpk.env and a deadline of xpk.command_timeout_s, writing into a fresh private
// kubeconfig that replaces the cluster's warmed one (one rename) when gcloud succeeds; a failed
// fetch leaves the previous warmed kubeconfig in place. Returns one result per cluster, in the
// given order, with the time each took on `clock`'s steady time. Never throws for a cluster's
// failure (it is in that cluster's result). Blocks.
std::vector<WarmupResult> warm_up_credentials(const XpkCli& xpk, Clock& clock,
                                              const std::vector<ClusterConfig>& clusters,
                                              int max_parallel);

}  // namespace falcon::xpk
