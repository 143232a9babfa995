// The Kubernetes API of the fleet's MultiKueue manager cluster (manager.h), served by the
// clusters' API server (kube_api.h) under <kube url>/fleet/v1/clusters/<manager cluster>/, for
// kueue.x-k8s.io/v1beta1 and v1beta2 alike (the objects say the version asked for):
//
//   GET    /apis/kueue.x-k8s.io/<v>/admissionchecks[/<name>]        cluster-scoped lists and
//   GET    /apis/kueue.x-k8s.io/<v>/multikueueconfigs[/<name>]      objects
//   GET    /apis/kueue.x-k8s.io/<v>/multikueueclusters[/<name>]
//   GET    /apis/kueue.x-k8s.io/<v>/workloads                       every namespace
//   GET    /apis/kueue.x-k8s.io/<v>/namespaces/<ns>/workloads[/<name>[/status]]
//   POST   /apis/kueue.x-k8s.io/<v>/namespaces/<ns>/workloads       201 and the Workload
//                                                                   (MultiKueueManager::
//                                                                   create_workload)
//   DELETE /apis/kueue.x-k8s.io/<v>/namespaces/<ns>/workloads/<name>   200 and the Workload as
//                                                                   it was
//   PATCH  /apis/kueue.x-k8s.io/<v>/namespaces/<ns>/workloads/<name>/status
//          application/merge-patch+json or application/json-patch+json: 200 and the Workload;
//          only status.nominatedClusterNames may change, a metadata.resourceVersion in the
//          patch is a precondition (409 Conflict when it is not the Workload's)
//   GET    /api/v1/namespaces/kueue-system/configmaps[/kueue-manager-config]   Kueue's
//          configuration, whose controller_manager_config.yaml names multiKueue.dispatcherName
//
// Lists carry metadata.resourceVersion (the manager's counter) and take labelSelector (k=v,
// k==v, k!=v, k, !k), fieldSelector (metadata.name, metadata.namespace with =, ==, !=); limit is
// ignored (one page, no continue). `Accept: ...;as=Table` answers a meta.k8s.io/v1 Table with
// the CRDs' printer columns (kubectl get). Errors are Status objects (kind Status; reason
// BadRequest 400, NotFound 404, MethodNotAllowed 405, Conflict or AlreadyExists 409, Gone 410,
// UnsupportedMediaType 415, Invalid 422 with details.causes[].field, TooManyRequests 429).
//
// Watch: GET .../workloads?watch=true[&resourceVersion=N][&timeoutSeconds=T]
// [&allowWatchBookmarks=true] (with the same selectors, and as=Table) streams one JSON object a
// line, {"type": "ADDED"|"MODIFIED"|"DELETED", "object": {...}}, chunked, as the changes
// happen: every change after N; without N (or 0) first the current Workloads as ADDED. It ends
// after T seconds (default and most kWatchTimeoutSeconds; with bookmarks allowed a BOOKMARK
// carrying the last resourceVersion comes last), when the fleet stops, or at once with an ERROR
// event (a Status 410 Gone, "too old resource version") when N is older than the changes the
// manager keeps (MultiKueueManager::kEventHistory). At most MultiKueueManager::kMaxWatches
// stream at once; one more is 429. A watch whose client went away holds its slot until its
// next event or its end.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace falcon::fleet {

class MultiKueueManager;

// The longest a watch of the manager's Workloads streams, and how long it does by default.
inline constexpr int kWatchTimeoutSeconds = 60;

// Whether `path` (what follows /fleet/v1/clusters/<cluster>) is one the manager answers.
bool is_manager_path(const std::string& path);

// The manager's entries of an APIResourceList of kueue.x-k8s.io (discovery).
nlohmann::json manager_api_resources();

// Answers one request on a manager path. The caller has checked the token and that the
// cluster answers.
void serve_manager_request(MultiKueueManager& manager, const std::string& method,
                           const std::string& path, const httplib::Request& request,
                           httplib::Response& response);

}  // namespace falcon::fleet
