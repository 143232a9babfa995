// The `kube` probe backend (probe.backend: kube): one list of Kueue Workload objects from the
// cluster's Kubernetes API instead of a `xpk workload list` process.
//
//   kubeconfig  <state_dir>/kube/<cluster>/config, the warmed kubeconfig `falcon cluster
//               warm-up` writes (gcloud get-credentials): server, CA, exec plugin. Read once
//               and kept with its HTTPS client (whose pooled connections are reused) while the
//               file's modification time and size stay the same; a rewritten kubeconfig (a new
//               warm-up) is read again, and when its server or exec plugin changed, the
//               cluster's cached credential is dropped
//   credential  the exec plugin's token, cached until the expiry it states (exec_credential.h)
//   request     GET <server>/apis/kueue.x-k8s.io/v1beta1/workloads?limit=500 (all namespaces,
//               following `continue`); when that is forbidden (403), the same under
//               /namespaces/<cluster's default_namespace>/ (a namespaced RoleBinding);
//               Accept-Encoding: gzip (as Go clients ask; kube-apiserver compresses only large
//               lists); each page parsed keeping only what the classification reads
//               (parse_workload_list)
//   result      every item classified as xpk's table would (workload_objects.h), counted by
//               xpk::count_probe_states: queue_depth=#QUEUED, running_count=#RUNNING; and
//               admission_delay_s: how long the last 10 Workloads to get quota waited for
//               admission (Kueue's admission checks, e.g. node provisioning), from their
//               QuotaReserved and Admitted conditions
//
// Each GET that fails in passing (408, 429, 500, 502, 503, 504, a connection refused or broken) is
// sent once more within the probe's deadline (kube_client.h get_retrying_once).
//
// Failures, each reachable=false with a one-line cause naming the cluster:
//   no warmed kubeconfig      "... run `falcon cluster warm-up`"
//   plugin failed             the plugin and its last stderr line
//   deadline passed           "probe timed out after <N>s" (as the xpk backend says)
//   no connection             "Kubernetes API server <server> of cluster 'c' is unreachable: ..."
//   401 (after one refresh)   "... rejected the credential (401): run `falcon cluster warm-up` ..."
//   403                       "... forbids listing workloads.kueue.x-k8s.io (403): grant get/list
//   ..." 404                       "... has no Kueue Workload API (404 ...): is Kueue installed?"
//   other status / bad body   the status and the server's message
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "falcon/clock.h"
#include "falcon/command_runner.h"
#include "falcon/http_client.h"
#include "falcon/prober.h"
#include "falcon/workload_manager.h"
#include "kube/exec_credential.h"
#include "xpk/workload_listing.h"

namespace falcon::kube {

struct KubeProberOptions {
  std::filesystem::path state_dir;   // where warm-up writes kube/<cluster>/config
  std::shared_ptr<HttpClient> http;  // for servers whose kubeconfig gives no CA
  // An HTTP client that trusts the CA bundle at `ca_file` (a kubeconfig's
  // certificate-authority-data, written next to the kubeconfig). Null: such kubeconfigs fail.
  std::function<std::shared_ptr<HttpClient>(const std::string& ca_file)> http_with_ca;
  std::shared_ptr<CommandRunner> runner;  // runs exec plugins
  std::shared_ptr<Clock> clock;
  // Writes a cluster's missing kubeconfig (the credential warm-up of that cluster alone);
  // returns why it could not, nullopt when it did. Called when a probe finds no kubeconfig, at
  // most once per cluster every warm_up_every. Null: a missing kubeconfig fails the probe,
  // saying to run `falcon cluster warm-up`.
  std::function<std::optional<std::string>(const ClusterConfig&)> warm_up;
  std::chrono::milliseconds warm_up_every{60'000};
};

class KubeProber final : public ProbeSource, public WorkloadListSource {
 public:
  // Throws std::invalid_argument when http, runner or clock is null.
  explicit KubeProber(KubeProberOptions options);

  ClusterProbeResult probe(const ClusterConfig& cluster) const override;
  ClusterProbeResult probe_listed(const ClusterConfig& cluster,
                                  std::vector<WorkloadInfo>& listed) const override;

  // The workloads of `cluster`, classified; throws std::runtime_error with the one-line cause
  // of the table above (the "timed out" case included).
  std::vector<xpk::ListedWorkload> list_workloads(const ClusterConfig& cluster) const override;

  // The accelerator capacity of `cluster`'s ClusterQueues (cluster_queues.h). Throws
  // std::runtime_error with the cause (no kubeconfig, transport, status) when it cannot.
  std::vector<AcceleratorCapacity> cluster_capacity(const ClusterConfig& cluster) const;

  const ExecCredentialCache& credentials() const { return *credentials_; }

 private:
  // The cluster's kubeconfig and the client for its server: cached, or read now. Throws
  // std::runtime_error with the one-line cause.
  struct Target {
    std::filesystem::file_time_type mtime;
    std::uintmax_t size = 0;
    KubeTarget kube;
    std::shared_ptr<HttpClient> http;
  };
  std::shared_ptr<const Target> target_for(const ClusterConfig& cluster) const;
  // list_workloads, also giving the bearer token it used (reused for the ClusterQueue list)
  // and the list's admission delay (admission_delay_s of workload_objects.h), each when asked.
  std::vector<xpk::ListedWorkload> list_with_token(
      const ClusterConfig& cluster, std::string* token,
      std::optional<double>* admission_delay = nullptr) const;
  // cluster_capacity with `token` (empty: ask the credential cache).
  std::vector<AcceleratorCapacity> capacity_with_token(const ClusterConfig& cluster,
                                                       const std::string& token) const;
  std::shared_ptr<HttpClient> client_for(const ClusterConfig& cluster,
                                         const std::string& ca_pem) const;

  KubeProberOptions options_;
  std::unique_ptr<ExecCredentialCache> credentials_;
  mutable std::mutex mu_;
  mutable std::map<std::string, std::shared_ptr<HttpClient>> ca_clients_;  // by CA file
  mutable std::map<std::string, std::shared_ptr<const Target>> targets_;   // by cluster
  // Cluster -> when its missing kubeconfig was last warmed up (options_.warm_up).
  mutable std::map<std::string, std::chrono::steady_clock::time_point> warmed_at_;
};

}  // namespace falcon::kube
