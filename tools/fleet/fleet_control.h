// The fleet's control API: JSON in, JSON out, served under /fleet/v1/ next to the local Google
// endpoints. fleet-xpk uses the first group; tests, benchmarks and scripts use the second.
//
// For fleet-xpk (a cluster is named as xpk names it: project, zone, cluster):
//   GET  /fleet/v1/xpk                 the imitated xpk: version, table_style,
//                                      supports_namespace, progress_lines
//   POST /fleet/v1/credentials         {project, zone, cluster, kubeconfig?} -> {found, name,
//                                      location, context, server, unreachable, latency_ms}
//                                      (get-credentials; records the kubeconfig path)
//   POST /fleet/v1/workloads:get       {project, zone, cluster, workload, namespace?,
//                                      device_type?} -> {failure?, exists, has_capacity}
//   POST /fleet/v1/workloads:list      {project, zone, cluster} -> {failure?, rows: [...]}
//   POST /fleet/v1/workloads:create    {project, zone, cluster, overwrite, workload,
//                                      device_type, tpu_type_flag, num_slices, num_nodes,
//                                      priority, command, docker_image, docker_name,
//                                      namespace, env: {}, ttl_seconds_after_finished}
//                                      -> {failure?, result: created|replaced|exists|no_capacity}
//   POST /fleet/v1/workloads:delete    {project, zone, cluster, workload} -> {failure?, deleted}
//   `failure` is {stderr, exit_code}: what kubectl printed when the cluster is unreachable,
//   flaky this call, or unknown.
//
// For tests and scripts:
//   POST /fleet/v1/clock:advance       {seconds} -> {now, now_ns}; runs the simulation to then
//                                      (manual clock only: 400 at a time_scale above 0)
//   POST /fleet/v1/logs:generate       {cluster (fleet name) | project+zone+cluster, workload,
//                                      namespace?, ranks? [0], slice? 0, lines_per_rank,
//                                      start_time? (RFC 3339), interval_ms? 1,
//                                      omit_completion_index? false} -> {written, pod_names}
//   GET  /fleet/v1/state               FleetSimulator::state()
//   POST /fleet/v1/clusters:kueue      {cluster (fleet name), installed} -> {cluster, kueue}:
//                                      installs or removes the cluster's Kueue CRDs
//   POST /fleet/v1/clusters:clusterQueues  {cluster (fleet name), readable} -> {cluster,
//                                      cluster_queues_readable}: grants or refuses (403) the
//                                      cluster's ClusterQueues
//
// Faults (simulator.h says what each does; `cluster` is the fleet name; 404 for an unknown
// cluster or workload, 400 for a workload in no state to take the fault):
//   POST /fleet/v1/clusters:kill       {cluster, workloads? "keep"|"fail"} -> {cluster,
//                                      unreachable, workloads}
//   POST /fleet/v1/clusters:revive     {cluster} -> {cluster, unreachable}
//   POST /fleet/v1/workloads:evict     {cluster, workload, readmit? true, readmit_after_s? 0,
//                                      preemptor_uid?} -> {cluster, workload, state}
//   POST /fleet/v1/nodes:fail          {cluster, node | workload + slice? 0 + worker? 0,
//                                      exit_code? 137|143} -> {cluster, workload, state, pods}
//   POST /fleet/v1/clusters:failCreates {cluster, count} -> {cluster, failing_creates}
//
// Errors: HTTP 400 (bad JSON or fields) / 404 (unknown route) with {"error": {"message"}}.
#pragma once

#include <mutex>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "fleet/simulator.h"

namespace httplib {
class Server;
}

namespace falcon::fleet {

class ControlError : public std::runtime_error {
 public:
  ControlError(int status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

class FleetControl {
 public:
  // `server_url` is what credentials put in kubeconfigs (the fleet's own URL).
  FleetControl(FleetSimulator& simulator, std::string server_url);

  // Handles `route` (the part after /fleet/v1/, e.g. "workloads:list"). Throws ControlError.
  nlohmann::json handle(const std::string& route, const nlohmann::json& body);

  // Thread-safe: the URL is known only once the server listens.
  void set_server_url(std::string url);
  // The clusters' Kubernetes API (kube_api.h): what `credentials` answers as `server` and
  // `certificate_authority_data`. Unset: `server` is under the fleet's own URL.
  void set_kube_endpoint(std::string url, std::string ca_data);

 private:
  nlohmann::json fault(const std::string& route, const nlohmann::json& body);
  std::string server_url() const;
  std::string kube_base_url() const;
  std::string kube_ca_data() const;

  FleetSimulator& sim_;
  mutable std::mutex mu_;
  std::string server_url_;
  std::string kube_url_;
  std::string kube_ca_data_;
};

// Adds GET and POST /fleet/v1/<route> handlers to `server` (call before it starts listening).
void register_fleet_routes(httplib::Server& server, FleetControl& control);

}  // namespace falcon::fleet
