// ClusterRegistry: the clusters of `repos.yaml`, loaded once and read many times.
//
// The registry serves an immutable snapshot. load() parses and validates the whole file first
// and only then swaps the snapshot in, atomically: a failed load leaves the previous registry in
// force, a successful one replaces it whole, and a reader on another thread sees the old or the
// new registry, never a mix. All methods are safe to call from many threads.
//
//   falcon::ClusterRegistry registry;
//   registry.load("repos.yaml");                        // throws ClusterConfigError
//   for (auto& [cluster, priority] : registry.find_by_accelerator("tpu-v4-128")) ...
//   // the same clusters: registry.find_by_accelerator("v4-128")
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "falcon/config.h"
#include "falcon/model.h"

namespace falcon {

class ClusterRegistry {
 public:
  ClusterRegistry();

  // Loads `config_path`, replacing what was loaded before. Throws ClusterConfigError (with every
  // problem found) and then keeps the previous snapshot.
  void load(const std::string& config_path);

  // Installs `config`, a configuration load_fabric_config already read and validated, in place
  // of what was loaded before (for a caller that needs the configuration before the registry
  // does, so that the file is parsed once).
  void load(FabricConfig config);

  // Every registered cluster, in file order.
  std::vector<ClusterConfig> list_clusters() const;

  // The cluster named `name`. Throws UnknownClusterError (the spec's KeyError).
  ClusterConfig get_cluster(const std::string& name) const;

  // Clusters offering `accelerator_type` (in either spelling, "tpu-v4-64" or "v4-64"), with that
  // slot's priority, by ascending priority; equal priorities keep file order. Empty when none
  // does.
  std::vector<std::pair<ClusterConfig, int>> find_by_accelerator(
      const std::string& accelerator_type) const;

  // The whole current configuration (clusters and settings). Never null: before the first
  // load it is an empty configuration with defaults.
  std::shared_ptr<const FabricConfig> snapshot() const;

 private:
  mutable std::mutex mutex_;  // guards the pointer swap only; readers copy the shared_ptr
  std::shared_ptr<const FabricConfig> snapshot_;
};

}  // namespace falcon
