// The subset of the Kubernetes API a cluster of the local fleet serves, under
// <fleet url>/fleet/v1/clusters/<fleet cluster>/ (the `server` of the kubeconfig fleet-gcloud
// writes), built from the same simulator state fleet-xpk prints:
//
//   GET /version, /api, /api/v1, /apis, /apis/kueue.x-k8s.io/v1beta1,
//       /apis/jobset.x-k8s.io/v1alpha2                      discovery (legacy, JSON)
//   GET /apis/kueue.x-k8s.io/v1beta1[/namespaces/<ns>]/workloads[/<name>]
//       WorkloadList / Workload: one Kueue Workload per row of `xpk workload list`, shaped so
//       that xpk 1.13's reading of it gives that very row (kube_api.cc says how)
//   GET /apis/jobset.x-k8s.io/v1alpha2[/namespaces/<ns>]/jobsets[/<name>]     JobSets
//   GET /apis/kueue.x-k8s.io/v1beta1/clusterqueues[/cluster-queue]   the one ClusterQueue xpk
//       creates, `cluster-queue`: spec.resourceGroups[].flavors[].resources[].nominalQuota and
//       status.flavorsUsage / flavorsReservation[].resources[].total from the simulated
//       capacity (FleetSimulator::cluster_queue): a flavor "1x<type>" per device type of
//       `capacity` (its slots x chips per slice), and one per GKE accelerator label of
//       `topology` (its blocks' chips), whose free contiguous runs are published in the
//       annotation falcon.dev/free-blocks ({"<flavor>": [<chips of each free run>]}), and the
//       blocks' sizes in falcon.dev/blocks ({"<flavor>": [<chips of each block>]}). A real
//       cluster has no such annotation unless a controller publishes it from its node pools
//       (cloud.google.com/gke-nodepool, cloud.google.com/gke-tpu-topology) and pods, or from
//       Kueue's Topology-Aware Scheduling; without it falcon leaves fragmentation unknown
//   `?watch=true` on a list: the current objects as ADDED events, then the stream ends (a
//   watch that times out at once); `as=Table` in Accept: a meta.k8s.io/v1 Table with the
//   CRDs' printer columns, as the real API server answers kubectl.
//
// Every route needs `Authorization: Bearer <token>` with a token from
// POST /fleet/v1/kube:token (what the auth-plugin stand-in, `fleet-gcloud
// gke-gcloud-auth-plugin`, prints: an ExecCredential valid for one hour of wall time); 401
// Status otherwise. An unreachable or flaky cluster answers the list 503 with kubectl's words
// (as GKE's DNS endpoint does when the control plane does not answer); the cluster's
// probe latency (and slow latency) is spent before a list answers. A cluster without Kueue's
// CRDs (behaviour.kueue false, or POST /fleet/v1/clusters:kueue) leaves kueue.x-k8s.io out of
// /apis and answers 404 NotFound under /apis/kueue.x-k8s.io/. A cluster whose grant has no
// ClusterQueues (behaviour.cluster_queues_readable false, or POST
// /fleet/v1/clusters:clusterQueues) answers them 403 Forbidden, with the API server's words.
//
// The MultiKueue manager's cluster (the fleet file's `manager:` section, manager.h) serves the
// manager's API as well (manager_api.h): GET, POST, DELETE and PATCH of the paths
// is_manager_path() names go to serve_manager_request (after the token check, 401, and 503 with
// kubectl's words while that cluster is unreachable); its discovery lists kueue.x-k8s.io
// v1beta2 (preferred) and v1beta1 with the manager's resources (v1beta1 also clusterqueues),
// and configmaps under /api/v1. Every other path is as on any cluster; a method other than GET
// there is 405 MethodNotAllowed.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "fleet/simulator.h"

namespace httplib {
class Server;
}

namespace falcon::fleet {

// The Kueue Workload object whose reading by xpk 1.13 is `row`.
nlohmann::json workload_object(const WorkloadRow& row);
// The JobSet of `row`.
nlohmann::json jobset_object(const WorkloadRow& row);

class KubeApi {
 public:
  explicit KubeApi(FleetSimulator& simulator);

  FleetSimulator& simulator() const { return sim_; }
  // Whether the Authorization header carries a valid token (`Bearer <token>`).
  bool authorized(const std::string& authorization) const;

  // A new token and its ExecCredential (client.authentication.k8s.io/v1beta1).
  nlohmann::json issue_token();
  bool token_valid(const std::string& token) const;

  struct Answer {
    int status = 200;
    std::string body;
    std::string content_type = "application/json";
  };
  // One request: `cluster` is the fleet's name, `path` what follows it (e.g. "/api").
  Answer handle(const std::string& cluster, const std::string& path, bool watch, bool as_table,
                const std::string& authorization);

 private:
  FleetSimulator& sim_;
  mutable std::mutex mu_;
  std::mt19937_64 random_;
  std::map<std::string, std::chrono::system_clock::time_point> tokens_;  // token -> expiry
};

// Adds POST /fleet/v1/kube:token to the fleet's own server (call before the fleet's control
// routes, and before the server listens).
void register_kube_token_route(httplib::Server& server, KubeApi& api);

// The clusters' API servers: HTTPS on a port of its own (kubectl sends no credentials over
// plain HTTP), with a self-signed certificate for 127.0.0.1 and localhost made at start, which
// kubeconfigs carry as certificate-authority-data. Serves GET /fleet/v1/clusters/<name>/...,
// and POST, DELETE and PATCH of the manager's paths (manager_api.h); stop() first ends the
// manager's watches (MultiKueueManager::close_watches), so that no streaming watch holds a
// server thread past it. Keep-alive: up to 100 requests per connection, closed after 2 s idle
// (kube-apiserver: 90 s), 64 server threads.
class KubeTlsServer {
 public:
  explicit KubeTlsServer(KubeApi& api);
  ~KubeTlsServer();
  KubeTlsServer(const KubeTlsServer&) = delete;
  KubeTlsServer& operator=(const KubeTlsServer&) = delete;

  // Binds host:0 and serves on a thread. Throws std::runtime_error when it cannot.
  void start(const std::string& host);
  void stop();
  std::string base_url() const;  // https://127.0.0.1:<port>
  std::string ca_data() const;   // base64 of the certificate's PEM
  const std::string& ca_pem() const { return pem_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string pem_;
};

}  // namespace falcon::fleet
