#include "kube/kube_prober.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gcp/json_fields.h"
#include "gcp/url.h"
#include "kube/cluster_queues.h"
#include "kube/kube_client.h"
#include "kube/kubeconfig.h"
#include "kube/workload_objects.h"
#include "xpk/workload_listing.h"

namespace falcon::kube {
namespace {

using gcp::member_or_null;
using gcp::string_field;

constexpr const char* kWorkloadsPath = "/apis/kueue.x-k8s.io/v1beta1";
constexpr int kPageSize = 500;

class ProbeTimeout : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace

KubeProber::KubeProber(KubeProberOptions options) : options_(std::move(options)) {
  if (!options_.http || !options_.runner || !options_.clock) {
    throw std::invalid_argument("KubeProber: http, runner and clock must be set");
  }
  credentials_ = std::make_unique<ExecCredentialCache>(options_.runner, options_.clock);
}

std::shared_ptr<HttpClient> KubeProber::client_for(const ClusterConfig& cluster,
                                                   const std::string& ca_pem) const {
  if (ca_pem.empty()) return options_.http;
  if (!options_.http_with_ca) {
    throw std::runtime_error(fmt::format(
        "the kubeconfig of cluster '{}' gives a CA, but this prober cannot use one", cluster.name));
  }
  const std::filesystem::path ca_file = options_.state_dir / "kube" / cluster.name / "ca.crt";
  std::lock_guard<std::mutex> lock(mu_);
  write_ca_file(ca_file, ca_pem);
  auto& client = ca_clients_[ca_file.string()];
  if (!client) client = options_.http_with_ca(ca_file.string());
  return client;
}

std::shared_ptr<const KubeProber::Target> KubeProber::target_for(
    const ClusterConfig& cluster) const {
  const std::filesystem::path kubeconfig = options_.state_dir / "kube" / cluster.name / "config";
  std::error_code ec;
  std::string warm_up_failed;
  if (options_.warm_up && !std::filesystem::exists(kubeconfig, ec)) {
    // None yet (a fresh state directory): this cluster's warm-up, once a while, not per probe.
    const auto now = options_.clock->steady_now();
    bool due = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const auto it = warmed_at_.find(cluster.name);
      due = it == warmed_at_.end() || now - it->second >= options_.warm_up_every;
      if (due) warmed_at_[cluster.name] = now;
    }
    if (due) {
      if (const auto why = options_.warm_up(cluster)) warm_up_failed = *why;
    }
  }
  const auto mtime = std::filesystem::last_write_time(kubeconfig, ec);
  const auto size = ec ? 0 : std::filesystem::file_size(kubeconfig, ec);
  std::shared_ptr<const Target> before;
  if (!ec) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = targets_.find(cluster.name);
    if (it != targets_.end()) {
      if (it->second->mtime == mtime && it->second->size == size) return it->second;
      before = it->second;
    }
  }
  auto fresh = std::make_shared<Target>();
  fresh->mtime = mtime;
  fresh->size = size;
  try {
    fresh->kube = read_kubeconfig(kubeconfig);
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format(
        "cluster '{}' (probe.backend kube): {}; {}run `falcon cluster warm-up` to write it",
        cluster.name, e.what(),
        warm_up_failed.empty() ? ""
                               : "fetching its credentials failed (" + warm_up_failed + "); "));
  }
  fresh->http = client_for(cluster, fresh->kube.ca_pem);
  if (before &&
      (before->kube.exec != fresh->kube.exec || before->kube.server != fresh->kube.server)) {
    credentials_->invalidate(cluster.name);  // another server or plugin: a token of its own
  }
  if (!ec) {
    std::lock_guard<std::mutex> lock(mu_);
    targets_[cluster.name] = fresh;
  }
  return fresh;
}

std::vector<xpk::ListedWorkload> KubeProber::list_workloads(const ClusterConfig& cluster) const {
  return list_with_token(cluster, nullptr);
}

std::vector<xpk::ListedWorkload> KubeProber::list_with_token(
    const ClusterConfig& cluster, std::string* token,
    std::optional<double>* admission_delay) const {
  const auto deadline =
      options_.clock->steady_now() + std::chrono::seconds(cluster.probe_timeout_s);
  const auto remaining = [&]() {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - options_.clock->steady_now());
    if (left.count() <= 0) {
      throw ProbeTimeout(fmt::format("probe timed out after {}s", cluster.probe_timeout_s));
    }
    return left;
  };

  const auto cached = target_for(cluster);
  const KubeTarget& target = cached->kube;
  const auto& http = cached->http;

  const auto bearer = [&]() {
    if (!target.exec) return target.token;
    try {
      return credentials_->token(cluster.name, *target.exec, target.server, remaining());
    } catch (const ProbeTimeout&) {
      throw;
    } catch (const std::exception& e) {
      throw std::runtime_error(fmt::format("cluster '{}': {}", cluster.name, e.what()));
    }
  };

  nlohmann::json all = {{"items", nlohmann::json::array()}};
  std::string scope = std::string(kWorkloadsPath) + "/workloads";
  ListCursor pages(fmt::format("the list of workloads of cluster '{}'", cluster.name));
  bool refreshed = false;
  while (true) {
    HttpRequest req;
    req.url = fmt::format("{}{}?limit={}", target.server, scope, kPageSize);
    if (!pages.token().empty()) req.url += "&continue=" + gcp::percent_encode(pages.token());
    req.headers.set("Accept", "application/json");
    // As Go clients (kubectl) ask: the API server compresses only large lists, with gzip.
    req.headers.set("Accept-Encoding", "gzip");
    const std::string current = bearer();
    if (token) *token = current;
    req.headers.set("Authorization", "Bearer " + current);
    req.timeout = remaining();
    req.connect_timeout = std::min(req.timeout, std::chrono::milliseconds(10'000));
    req.max_body_bytes = kMaxAnswer;
    HttpResponse resp;
    try {
      resp = get_retrying_once(*http, req, *options_.clock, deadline);
    } catch (const HttpTransportError& e) {
      if (e.timed_out()) {
        throw ProbeTimeout(fmt::format("probe timed out after {}s", cluster.probe_timeout_s));
      }
      if (e.too_large()) {
        throw std::runtime_error(fmt::format(
            "the Kubernetes API of cluster '{}' answered a page of {} larger than {} bytes",
            cluster.name, scope, kMaxAnswer));
      }
      throw std::runtime_error(
          fmt::format("Kubernetes API server {} of cluster '{}' is unreachable: {}", target.server,
                      cluster.name, e.what()));
    }
    if (resp.status == 401 && target.exec && !refreshed) {
      credentials_->invalidate(cluster.name);  // expired early or revoked: one fresh token
      refreshed = true;
      continue;
    }
    if (resp.status == 401) {
      throw std::runtime_error(fmt::format(
          "the Kubernetes API of cluster '{}' rejected the credential (401 Unauthorized: {}): "
          "run `falcon cluster warm-up` to refresh its kubeconfig and check `gcloud auth list`",
          cluster.name, kube_server_message(resp.body)));
    }
    if (resp.status == 403 && pages.token().empty() &&
        scope.find("/namespaces/") == std::string::npos) {
      // No cluster-wide list: a namespaced grant may still cover the cluster's namespace.
      scope =
          fmt::format("{}/namespaces/{}/workloads", kWorkloadsPath,
                      cluster.default_namespace.empty() ? "default" : cluster.default_namespace);
      continue;
    }
    if (resp.status == 403) {
      throw std::runtime_error(fmt::format(
          "the Kubernetes API of cluster '{}' forbids listing workloads.kueue.x-k8s.io (403 "
          "Forbidden: {}): grant the identity get/list on workloads.kueue.x-k8s.io (e.g. "
          "roles/container.viewer; see docs/deployment.md), or use probe.backend xpk",
          cluster.name, kube_server_message(resp.body)));
    }
    if (resp.status == 404) {
      throw std::runtime_error(fmt::format(
          "cluster '{}' has no Kueue Workload API (404 on {}): Kueue's CRDs are not installed "
          "(xpk installs them with `xpk cluster create`)",
          cluster.name, scope));
    }
    if (resp.status != 200) {
      throw std::runtime_error(
          fmt::format("the Kubernetes API of cluster '{}' answered {} to {}: {}", cluster.name,
                      resp.status, scope, kube_server_message(resp.body)));
    }
    nlohmann::json page;
    try {
      page = parse_workload_list(resp.body);
    } catch (const std::invalid_argument&) {
      throw std::runtime_error(fmt::format(
          "the Kubernetes API of cluster '{}' answered 200 to {} with a body that is not JSON",
          cluster.name, scope));
    }
    if (!page.is_object() || !page.contains("items") || !page["items"].is_array()) {
      throw std::runtime_error(
          fmt::format("the Kubernetes API of cluster '{}' answered 200 to {} with no items list",
                      cluster.name, scope));
    }
    for (auto& item : page["items"]) all["items"].push_back(std::move(item));
    if (!pages.advance(string_field(member_or_null(page, "metadata"), "continue"))) break;
  }
  if (admission_delay) *admission_delay = admission_delay_s(all, options_.clock->now());
  return classify_workload_list(all);
}

std::vector<AcceleratorCapacity> KubeProber::cluster_capacity(const ClusterConfig& cluster) const {
  return capacity_with_token(cluster, "");
}

std::vector<AcceleratorCapacity> KubeProber::capacity_with_token(const ClusterConfig& cluster,
                                                                 const std::string& given) const {
  const auto cached = target_for(cluster);
  const KubeTarget& target = cached->kube;
  const auto timeout = std::chrono::milliseconds(1000L * cluster.probe_timeout_s);
  HttpRequest req;
  req.url = fmt::format("{}{}/clusterqueues", target.server, kWorkloadsPath);
  req.headers.set("Accept", "application/json");
  req.headers.set("Accept-Encoding", "gzip");
  const std::string token =
      !given.empty() ? given
      : target.exec  ? credentials_->token(cluster.name, *target.exec, target.server, timeout)
                     : target.token;
  req.headers.set("Authorization", "Bearer " + token);
  req.timeout = timeout;
  req.connect_timeout = std::min(req.timeout, std::chrono::milliseconds(10'000));
  req.max_body_bytes = kMaxAnswer;
  HttpResponse resp;
  try {
    resp = get_retrying_once(*cached->http, req, *options_.clock,
                             options_.clock->steady_now() + timeout);
  } catch (const HttpTransportError& e) {
    if (e.too_large()) {
      throw std::runtime_error(fmt::format(
          "the Kubernetes API of cluster '{}' answered the ClusterQueue list with more than {} "
          "bytes",
          cluster.name, kMaxAnswer));
    }
    throw std::runtime_error(fmt::format("Kubernetes API server {} of cluster '{}': {}",
                                         target.server, cluster.name, e.what()));
  }
  if (resp.status != 200) {
    throw std::runtime_error(
        fmt::format("the Kubernetes API of cluster '{}' answered {} to the ClusterQueue list: {}",
                    cluster.name, resp.status, kube_server_message(resp.body)));
  }
  const auto list = nlohmann::json::parse(resp.body, nullptr, false);
  try {
    return parse_cluster_queues(list);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(
        fmt::format("the Kubernetes API of cluster '{}' answered the ClusterQueue list with {}",
                    cluster.name, e.what()));
  }
}

ClusterProbeResult KubeProber::probe(const ClusterConfig& cluster) const {
  std::vector<WorkloadInfo> unused;
  return probe_listed(cluster, unused);
}

ClusterProbeResult KubeProber::probe_listed(const ClusterConfig& cluster,
                                            std::vector<WorkloadInfo>& listed) const {
  try {
    std::string token;
    std::optional<double> admission_delay;
    const auto workloads = list_with_token(cluster, &token, &admission_delay);
    ClusterProbeResult r = xpk::count_probe_states(cluster.name, workloads);
    r.admission_delay_s = admission_delay;
    listed.clear();
    listed.reserve(workloads.size());
    for (const auto& w : workloads) listed.push_back({.name = w.row.jobset_name, .state = w.state});
    try {
      r.capacity = capacity_with_token(cluster, token);
    } catch (const std::exception& e) {
      // No ClusterQueue readable (RBAC, old Kueue, a second failure): capacity stays unknown,
      // the probe stands, and says why.
      r.capacity_error = e.what();
    }
    return r;
  } catch (const std::exception& e) {
    ClusterProbeResult r;
    r.cluster = cluster.name;
    r.reachable = false;
    r.error = e.what();
    return r;
  }
}

}  // namespace falcon::kube
