// What falcon reads of a MultiKueue manager cluster (Kueue's kueue.x-k8s.io API), parsed from
// the objects' JSON into the few fields the dispatcher decides on (docs/dispatch.md):
//
//   Workload           uid, namespace, name, resourceVersion, creationTimestamp,
//                      spec.priority / spec.priorityClassName, the accelerator type
//                      (label falcon.dev/accelerator-type, else the first pod set's nodeSelector
//                      cloud.google.com/gke-tpu-accelerator + gke-tpu-topology, or
//                      cloud.google.com/gke-accelerator for a GPU), status.admissionChecks,
//                      the QuotaReserved and Finished conditions, status.clusterName,
//                      status.nominatedClusterNames, metadata.deletionTimestamp
//   AdmissionCheck     spec.controllerName kueue.x-k8s.io/multikueue -> its MultiKueueConfig
//   MultiKueueConfig   spec.clusters: the workers, in configuration order
//   MultiKueueCluster  the Active condition
//
// Kueue's rule (pkg/workload ShouldSkipClusterNomination, v0.15): a Workload is waiting for a
// dispatcher while its MultiKueue admission check is Pending, it holds a quota reservation on
// the manager, it has not finished and no clusterName is set.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace falcon::kube {

inline constexpr const char* kMultiKueueController = "kueue.x-k8s.io/multikueue";
inline constexpr const char* kAcceleratorLabel = "falcon.dev/accelerator-type";
// Kueue's limit on .status.nominatedClusterNames.
inline constexpr int kMaxNominatedClusters = 20;

struct ManagerWorkload {
  std::string uid;
  std::string namespace_;
  std::string name;
  std::string resource_version;
  std::string created;  // creationTimestamp, RFC 3339
  int priority = 0;     // spec.priority (higher first)
  std::string priority_class;
  std::string accelerator;  // xpk's name ("v4-32"); empty: accelerator_problem says why
  std::string accelerator_problem;
  std::vector<std::pair<std::string, std::string>> checks;  // admission check -> state
  bool quota_reserved = false;
  bool finished = false;
  bool deleting = false;
  std::optional<std::string> cluster_name;
  std::vector<std::string> nominated;

  // The state of admission check `name`, or "" when the workload has none of that name.
  std::string check_state(const std::string& name) const;
};

// Throws std::invalid_argument naming the field when `object` is not a Workload with a name,
// namespace and uid.
ManagerWorkload parse_manager_workload(const nlohmann::json& object);

// How the manager is wired: which MultiKueue admission check dispatches to which workers.
struct MultiKueueWiring {
  // MultiKueue AdmissionCheck -> its MultiKueueConfig's clusters, in configuration order.
  std::map<std::string, std::vector<std::string>> workers_by_check;
  // MultiKueueCluster -> why it is not Active ("" when it is).
  std::map<std::string, std::string> inactive;
  std::vector<std::string> clusters;  // every MultiKueueCluster
};

// From the three lists (AdmissionCheckList, MultiKueueConfigList, MultiKueueClusterList).
// Checks of other controllers are left out; a check whose config does not exist has no workers.
MultiKueueWiring parse_multikueue_wiring(const nlohmann::json& admission_checks,
                                         const nlohmann::json& configs,
                                         const nlohmann::json& clusters);

}  // namespace falcon::kube
