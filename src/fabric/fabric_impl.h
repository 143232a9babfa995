// The facade's insides, shared by fabric.cc and doctor.cc.
#pragma once

#include <memory>
#include <mutex>

#include "falcon/fabric.h"
#include "xpk/xpk_cli.h"

namespace falcon {

// The modules built from one configuration snapshot. Replaced whole on reload, so a call in
// flight keeps using the modules it started with.
struct Modules {
  std::shared_ptr<const FabricConfig> config;
  std::shared_ptr<const xpk::XpkCli> xpk;  // shared by the prober, workloads and warm-up
  std::unique_ptr<ClusterProber> prober;
  std::unique_ptr<ClusterSelector> selector;
  std::unique_ptr<XpkWorkloadManager> workloads;
  std::unique_ptr<CloudLogRetriever> logs;
};

struct ClusterFabric::Impl {
  std::string config_path;
  FabricDependencies deps;
  ClusterRegistry registry;
  mutable std::mutex mutex;  // guards the modules pointer swap
  std::shared_ptr<Modules> modules;

  // Builds the modules from the registry's current snapshot and swaps them in.
  void build();
  std::shared_ptr<Modules> current() const;
  // The log query settings for a handle: the slice, and a lower time bound from submitted_at.
  LogQueryOptions query_options(const WorkloadHandle& handle, int slice) const;
};

}  // namespace falcon
