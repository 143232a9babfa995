#include "falcon/registry.h"

#include <algorithm>

#include "falcon/errors.h"
#include "falcon/values.h"

namespace falcon {

ClusterRegistry::ClusterRegistry() : snapshot_(std::make_shared<const FabricConfig>()) {}

void ClusterRegistry::load(const std::string& config_path) {
  // Parse and validate fully before touching the current snapshot.
  load(load_fabric_config(config_path));
}

void ClusterRegistry::load(FabricConfig config) {
  auto next = std::make_shared<const FabricConfig>(std::move(config));
  std::lock_guard<std::mutex> lock(mutex_);
  snapshot_ = std::move(next);
}

std::shared_ptr<const FabricConfig> ClusterRegistry::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return snapshot_;
}

std::vector<ClusterConfig> ClusterRegistry::list_clusters() const { return snapshot()->clusters; }

ClusterConfig ClusterRegistry::get_cluster(const std::string& name) const {
  const auto config = snapshot();
  for (const auto& c : config->clusters) {
    if (c.name == name) return c;
  }
  check_cluster_name("cluster", name);  // a name that cannot be one is the caller's mistake
  std::vector<std::string> known;
  for (const auto& c : config->clusters) known.push_back(c.name);
  throw UnknownClusterError(name, known);
}

std::vector<std::pair<ClusterConfig, int>> ClusterRegistry::find_by_accelerator(
    const std::string& accelerator_type) const {
  const auto config = snapshot();
  // Sorted as pointers, copied once: a cluster's configuration is not small.
  std::vector<std::pair<const ClusterConfig*, int>> found;
  for (const auto& c : config->clusters) {
    if (const AcceleratorSlot* slot = c.find_slot(accelerator_type)) {
      found.emplace_back(&c, slot->priority);
    }
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const auto& a, const auto& b) { return a.second < b.second; });
  std::vector<std::pair<ClusterConfig, int>> out;
  out.reserve(found.size());
  for (const auto& [c, priority] : found) out.emplace_back(*c, priority);
  return out;
}

}  // namespace falcon
