// Kueue `Workload` objects (kueue.x-k8s.io/v1beta1) read the way xpk 1.13 reads them for its
// table (reference/xpk.md §1.2), so that the kube probe backend classifies each workload with
// the very function the xpk backend uses on xpk's printed rows (xpk::map_row_state).
//
// One object becomes the row xpk would print for it:
//   Jobset Name   metadata.ownerReferences[0].name
//   Created Time  metadata.creationTimestamp
//   Priority      spec.priorityClassName, else spec.podSets[0].template.spec.priorityClassName
//   VMs Needed    sum of spec.podSets[].count over accelerator pod sets
//   Running/Ran   sum of status.admission.podSetAssignments[].count over accelerator pod sets
//   Done          sum of status.reclaimablePods[].count over accelerator pod sets
//                 (each of the three is `<none>` when its source list is empty or absent, and
//                 a number, possibly 0, otherwise: a CPU workload shows 0)
//   Status        the type of the condition with the greatest lastTransitionTime (the first of
//                 equal ones, as Python's max() picks), mapped to Admitted | Evicted |
//                 QuotaReserved | Finished, any other type `Unknown`; no conditions `<none>`.
//                 The condition's True/False value is ignored, as xpk ignores it.
//   Status Message / Status Time  that condition's message and lastTransitionTime
// An accelerator pod set requests google.com/tpu or nvidia.com/gpu (requests or limits of any
// container) or selects a TPU/GPU node (nodeSelector cloud.google.com/gke-tpu-accelerator or
// cloud.google.com/gke-accelerator).
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "xpk/list_parser.h"
#include "xpk/workload_listing.h"

namespace falcon::kube {

// The row xpk prints for one Workload object. Tolerates missing or mistyped fields the way
// xpk does (they read as empty). Never throws for a JSON object; `item` not an object gives an
// all-`<none>` row.
xpk::ListRow workload_row(const nlohmann::json& item);

// Parses a WorkloadList page (the API server's JSON) keeping only what workload_row reads and the
// list's metadata.continue: every other member (managedFields, annotations, labels, the pod
// template's containers' images, commands, env, ...) is skipped while parsing, so it costs no
// memory and builds no DOM. workload_row gives the same row for the kept JSON as for the whole.
// Throws std::invalid_argument for a body that is not JSON.
nlohmann::json parse_workload_list(const std::string& body);

// Every item of a WorkloadList, with its state (xpk::map_row_state of its row), in list order.
// Throws std::invalid_argument when `list` has no `items` array.
std::vector<xpk::ListedWorkload> classify_workload_list(const nlohmann::json& list);

// How long the cluster's Workloads wait between quota reservation and admission: the time
// Kueue's admission checks take (node provisioning: a ProvisioningRequest, GKE's queued
// provisioning), before which no pod of the Workload starts. For each Workload of `list` whose
// QuotaReserved condition is True: the time from it to its Admitted condition turning True, or,
// not admitted yet and not finished, to `now` (its wait so far). The mean, in seconds, over the
// `last` most recent of these (by admission, `now` for those still waiting); nullopt when no
// Workload has quota reserved. A condition without a readable lastTransitionTime is skipped.
std::optional<double> admission_delay_s(const nlohmann::json& list,
                                        std::chrono::system_clock::time_point now,
                                        std::size_t last = 10);

}  // namespace falcon::kube
