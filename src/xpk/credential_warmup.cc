#include "xpk/credential_warmup.h"

#include <exception>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "process/bounded_parallel.h"
#include "xpk/failure_text.h"
#include "xpk/xpk_cli.h"

namespace falcon::xpk {

std::vector<WarmupResult> warm_up_credentials(const XpkCli& xpk, Clock& clock,
                                              const std::vector<ClusterConfig>& clusters,
                                              int max_parallel) {
  const XpkSettings& settings = xpk.settings();
  std::vector<WarmupResult> results(clusters.size());
  run_bounded_parallel(clusters.size(), max_parallel, [&](std::size_t i) {
    const ClusterConfig& cluster = clusters[i];
    WarmupResult& out = results[i];
    out.cluster = cluster.name;
    const auto start = clock.steady_now();
    try {
      CommandSpec spec;
      spec.argv = {settings.gcloud_binary,
                   "container",
                   "clusters",
                   "get-credentials",
                   cluster.cluster_id,
                   "--project=" + cluster.project,
                   "--location=" + cluster.gke_location()};
      spec.timeout = std::chrono::seconds(settings.command_timeout_s);
      const CommandResult r = xpk.run_refreshing_kubeconfig(cluster, std::move(spec));
      out.ok = r.ok();
      if (!r.ok()) {
        out.error = fmt::format("gcloud get-credentials failed for cluster '{}': {}", cluster.name,
                                describe_failure(r).full());
      }
    } catch (const std::exception& e) {
      out.ok = false;
      out.error =
          fmt::format("gcloud get-credentials failed for cluster '{}': {}", cluster.name, e.what());
    } catch (...) {
      out.ok = false;
      out.error = "gcloud get-credentials failed with an unknown exception";
    }
    out.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(clock.steady_now() - start);
  });
  return results;
}

}  // namespace falcon::xpk

namespace falcon {

void to_json(nlohmann::json& j, const WarmupResult& v) {
  j = nlohmann::json{{"cluster", v.cluster},
                     {"ok", v.ok},
                     {"error", v.error ? nlohmann::json(*v.error) : nlohmann::json(nullptr)},
                     {"elapsed_ms", v.elapsed.count()}};
}

}  // namespace falcon
