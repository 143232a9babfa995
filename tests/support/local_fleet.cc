#include "support/local_fleet.h"

#include <fmt/format.h>

#include "fleet/fleet_config.h"
#include "support/run_falcon.h"

namespace falcon::testing {
namespace {

constexpr const char* kFleetYaml = R"(
time_scale: 0
defaults: {duration_s: 100, steps: 20}
logs: {omit_completion_index_every: 3}
workers_per_slice: {tpu-v4-64: 4}
clusters:
  tpu-a:
    project: proj-tpu
    zone: us-central2-b
    cluster_id: tpu-a
    capacity: {tpu-v4-64: 1}
    workloads:
      - {name: long-run, device_type: tpu-v4-64, duration_s: 86400}
      - {name: waiting, count: 3, device_type: tpu-v4-64, duration_s: 100}
  tpu-down:
    project: proj-tpu
    zone: us-east5-a
    location: us-east5
    cluster_id: tpu-down
    capacity: {tpu-v4-64: 4}
    behaviour: {unreachable: true}
  tpu-b:
    project: proj-tpu
    zone: us-central2-b
    cluster_id: tpu-b
    capacity: {tpu-v4-64: 2}
  gpu-x:
    project: proj-gpu
    zone: us-central1-a
    cluster_id: gpu-cluster-x
    capacity: {a100-40gb-8: 2}
)";

constexpr const char* kReposYaml = R"(clusters:
  tpu-a:
    project: proj-tpu
    zone: us-central2-b
    cluster_id: tpu-a
    accelerator_types: [{{type: tpu-v4-64, device_class: tpu, priority: 1}}]
    max_queue_depth: 2
    probe_timeout_s: 20
  tpu-down:
    project: proj-tpu
    zone: us-east5-a
    location: us-east5
    cluster_id: tpu-down
    accelerator_types: [{{type: tpu-v4-64, device_class: tpu, priority: 1}}]
    probe_timeout_s: 20
  tpu-b:
    project: proj-tpu
    zone: us-central2-b
    cluster_id: tpu-b
    accelerator_types: [{{type: tpu-v4-64, device_class: tpu, priority: 2}}]
    probe_timeout_s: 20
  gpu-x:
    project: proj-gpu
    zone: us-central1-a
    cluster_id: gpu-cluster-x
    default_namespace: default
    accelerator_types: [{{type: a100-40gb-8, device_class: gpu, priority: 1}}]
    probe_timeout_s: 20
xpk:
  binary: {xpk}
  gcloud_binary: {gcloud}
  env: {{FALCON_FLEET_URL: "{url}"}}
  state_dir: {state}
  runtime_dir: {run}
  command_timeout_s: 60
gcp:
  logging_endpoint: {url}
  storage_endpoint: {url}
  access_token_file: {token}
  logging_reads_per_minute: 6000
)";

}  // namespace

LocalFleet::LocalFleet() {
  fleet::FleetServiceOptions options;
  options.time_scale = 0;
  service_ = std::make_unique<fleet::FleetService>(
      fleet::parse_fleet_config(kFleetYaml, "test-fleet.yaml"), options);
  service_->start();
  state_dir_ = (dir_.path() / "state").string();
  runtime_dir_ = (dir_.path() / "run").string();
  const auto token = dir_.write("token", service_->token() + "\n");
  repos_path_ =
      dir_.write("repos.yaml",
                 fmt::format(kReposYaml, fmt::arg("xpk", built_binary("fleet-xpk")),
                             fmt::arg("gcloud", built_binary("fleet-gcloud")),
                             fmt::arg("url", service_->url()), fmt::arg("state", state_dir_),
                             fmt::arg("run", runtime_dir_), fmt::arg("token", token.string())))
          .string();
}

LocalFleet::~LocalFleet() { service_->stop(); }

void LocalFleet::advance(std::chrono::seconds d) {
  service_->clock().advance(d);
  service_->simulator().advance();
}

}  // namespace falcon::testing
