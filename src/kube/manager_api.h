// What the dispatcher asks of a MultiKueue manager cluster (docs/dispatch.md), behind an
// interface so that its decisions can be tested without one. make_kube_manager_api() is the
// real one, over the manager's Kubernetes API (kube_client.h):
//
//   list_workloads    GET  /apis/kueue.x-k8s.io/<v>/workloads?limit=500[&continue=]
//   watch_workloads   GET  .../workloads?watch=true&resourceVersion=<rv>&timeoutSeconds=<t>
//                          &allowWatchBookmarks=true
//   wiring            GET  admissionchecks, multikueueconfigs, multikueueclusters
//   nominate          PATCH .../namespaces/<ns>/workloads/<name>/status?fieldManager=<name>
//                     Content-Type: application/merge-patch+json
//                     {"metadata":{"resourceVersion":<rv>},"status":{"nominatedClusterNames":[..]}}
//                     (the resourceVersion makes it a compare-and-swap: 409 when the Workload
//                     changed since it was read)
//   kueue_dispatcher  GET  /api/v1/namespaces/kueue-system/configmaps/kueue-manager-config:
//                     multiKueue.dispatcherName of its controller_manager_config.yaml; nullopt
//                     when it cannot be read (RBAC, another install)
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kube/kube_client.h"
#include "kube/multikueue.h"

namespace falcon::kube {

struct WorkloadList {
  std::vector<ManagerWorkload> items;
  std::string resource_version;
};

struct ManagerEvent {
  std::string type;          // ADDED | MODIFIED | DELETED | BOOKMARK
  ManagerWorkload workload;  // BOOKMARK: only resource_version
};

class ManagerApi {
 public:
  virtual ~ManagerApi() = default;
  virtual std::string server() const = 0;
  virtual WorkloadList list_workloads() = 0;
  // Streams the changes after `resource_version` to `on_event` until the server ends the watch,
  // `on_event` returns false or `stop()` is true. KubeError 410 (reason "Gone", also from an
  // ERROR event): the version is too old, list again.
  virtual void watch_workloads(const std::string& resource_version,
                               const std::function<bool(const ManagerEvent&)>& on_event,
                               const std::function<bool()>& stop) = 0;
  virtual MultiKueueWiring wiring() = 0;
  // Sets the Workload's status.nominatedClusterNames, if it is still at its resource version.
  virtual void nominate(const ManagerWorkload& workload, const std::vector<std::string>& clusters,
                        const std::string& field_manager) = 0;
  virtual std::optional<std::string> kueue_dispatcher() = 0;
};

std::shared_ptr<ManagerApi> make_kube_manager_api(std::shared_ptr<KubeClient> client,
                                                  std::string api_version, double watch_timeout_s);

}  // namespace falcon::kube
