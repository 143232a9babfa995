// Free quota per accelerator from Kueue's ClusterQueues (docs/selection.md "Capacity and
// fragmentation"): what the kube probe backend reads besides the Workload list.
//
//   GET /apis/kueue.x-k8s.io/v1beta1/clusterqueues
//
// For each ClusterQueue and each flavor of spec.resourceGroups[].flavors[] that covers an
// accelerator resource (google.com/tpu, nvidia.com/gpu):
//   nominal  resources[].nominalQuota of that resource (summed over ClusterQueues)
//   used     status.flavorsUsage[].resources[].total, or flavorsReservation's when larger
//            (quota reserved but not yet admitted is not free either)
//   device_type / accelerator   from the flavor's name as xpk writes it, "<slices>x<type>"
//            ("1xv4-64": v4-64, tpu-v4-podslice), or a name that is itself a GKE accelerator
//            label ("tpu-v4-podslice", "nvidia-h100-80gb"); other flavors are left out (their
//            accelerator is only in the ResourceFlavor's node labels, which are not read)
//   largest_free_block  from the annotation kFreeBlocksAnnotation on the ClusterQueue, when
//            present: a JSON object {"<flavor>": [<chips of each free contiguous run>, ...]}. Kueue
//            has no such field: a cluster publishes it from its topology (one block per TPU node
//            pool / ICI domain, free when no pod holds its nodes; Kueue's Topology-Aware
//            Scheduling knows the same from the node labels cloud.google.com/gke-nodepool and
//            cloud.google.com/gke-tpu-topology). Without it the block is unknown (neutral).
//   largest_block  likewise from the annotation kBlocksAnnotation, {"<flavor>": [<chips of each
//            block, free or not>, ...]}: the largest slice the flavor can ever hold whole.
// Quantities are Kubernetes quantities ("32", 32, "1k", "500m").
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "falcon/model.h"

namespace falcon::kube {

inline constexpr const char* kFreeBlocksAnnotation = "falcon.dev/free-blocks";
inline constexpr const char* kBlocksAnnotation = "falcon.dev/blocks";

// A Kubernetes quantity as a number ("2", "1.5", "500m", "4k", "2Ki"); nullopt when malformed.
std::optional<double> parse_quantity(std::string_view text);

// The accelerator capacity of a ClusterQueueList (or a single ClusterQueue). Throws
// std::invalid_argument when `list` is not an object with an items array.
std::vector<AcceleratorCapacity> parse_cluster_queues(const nlohmann::json& list);

}  // namespace falcon::kube
