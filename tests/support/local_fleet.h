// A local fleet in the test process, on a loopback port chosen by the OS, on a manual clock,
// plus a repos.yaml that points the layer at it (fleet-xpk as the xpk binary, fleet-gcloud as
// gcloud, the fleet's Logging/Storage endpoints, a token file, a private state directory and
// runtime directory). The layer under test runs real fleet-xpk and fleet-gcloud subprocesses and
// real HTTP against it.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "fleet/fleet_service.h"
#include "support/temp_dir.h"

namespace falcon::testing {

class LocalFleet {
 public:
  // Four clusters, no latencies, 100-second runs of 20 steps (see local_fleet.cc):
  //   tpu-a (priority 1, full queue), tpu-down (priority 1, unreachable, regional: location
  //   us-east5, zone us-east5-a),
  //   tpu-b (priority 2, free), gpu-x (cluster_id gpu-cluster-x, gpu).
  LocalFleet();
  ~LocalFleet();

  fleet::FleetService& service() { return *service_; }
  const std::string& repos_path() const { return repos_path_; }
  const std::string& state_dir() const { return state_dir_; }
  // xpk.runtime_dir: each xpk call's private kubeconfig while it runs.
  const std::string& runtime_dir() const { return runtime_dir_; }
  std::string url() const { return service_->url(); }

  // Moves simulated time forward and runs the simulation to it.
  void advance(std::chrono::seconds d);

 private:
  TempDir dir_;
  std::unique_ptr<fleet::FleetService> service_;
  std::string repos_path_;
  std::string state_dir_;
  std::string runtime_dir_;
};

}  // namespace falcon::testing
