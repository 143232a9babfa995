#include "fleet/kube_api.h"

#include <thread>

#include <fmt/format.h>
#include <httplib.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "common/base64.h"
#include "common/rfc3339.h"
#include "fleet/manager.h"
#include "fleet/manager_api.h"

namespace falcon::fleet {
namespace {

using nlohmann::json;

constexpr const char* kKueue = "kueue.x-k8s.io";
constexpr const char* kJobSet = "jobset.x-k8s.io";

// A stable 5-hex-digit suffix, as Kueue names a Workload jobset-<name>-<hash>.
std::string short_hash(const std::string& s) {
  std::uint32_t h = 2166136261u;
  for (unsigned char c : s) h = (h ^ c) * 16777619u;
  return fmt::format("{:05x}", h & 0xFFFFF);
}

std::string uid_of(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return fmt::format("{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}", h >> 32, (h >> 16) & 0xFFFF,
                     h & 0xFFF, (h >> 20) & 0xFFF, h & 0xFFFFFFFFFFFFull);
}

json condition(const std::string& type, const std::string& reason, const std::string& message,
               const std::string& time) {
  return {{"type", type},       {"status", "True"},           {"reason", reason},
          {"message", message}, {"lastTransitionTime", time}, {"observedGeneration", 1}};
}

json status_json(int code, const std::string& reason, const std::string& message) {
  return {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
          {"status", "Failure"}, {"message", message}, {"reason", reason},
          {"code", code}};
}

KubeApi::Answer answer(int status, const json& body) {
  return {status, body.dump(), "application/json"};
}

json resource(const std::string& name, const std::string& kind, const std::string& singular,
              std::vector<std::string> short_names) {
  json r = {{"name", name},
            {"singularName", singular},
            {"namespaced", true},
            {"kind", kind},
            {"verbs",
             {"delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"}}};
  if (!short_names.empty()) r["shortNames"] = short_names;
  return r;
}

// An APIGroup serving `versions`, the first preferred.
json group(const std::string& name, const std::vector<std::string>& versions) {
  json list = json::array();
  for (const std::string& v : versions) {
    list.push_back({{"groupVersion", name + "/" + v}, {"version", v}});
  }
  return {{"name", name}, {"versions", list}, {"preferredVersion", list[0]}};
}

std::string age(const std::string& created, std::chrono::system_clock::time_point now) {
  const auto t = tools::parse_rfc3339(created);
  if (!t) return "<unknown>";
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(now - *t).count();
  if (s < 120) return fmt::format("{}s", std::max<long long>(s, 0));
  if (s < 3600 * 3) return fmt::format("{}m", s / 60);
  if (s < 86400 * 2) return fmt::format("{}h", s / 3600);
  return fmt::format("{}d", s / 86400);
}

json table_column(const std::string& name, const std::string& type,
                  const std::string& format = "") {
  return {
      {"name", name}, {"type", type}, {"format", format}, {"description", name}, {"priority", 0}};
}

json partial_metadata(const json& object) {
  return {{"kind", "PartialObjectMetadata"},
          {"apiVersion", "meta.k8s.io/v1"},
          {"metadata", object["metadata"]}};
}

}  // namespace

json workload_object(const WorkloadRow& row) {
  const std::string name =
      fmt::format("jobset-{}-{}", row.name, short_hash(row.namespace_ + "/" + row.name));
  const bool accelerator = row.vms_needed.value_or(0) > 0;
  json pod_spec = {
      {"priorityClassName", row.priority},
      {"restartPolicy", "OnFailure"},
      {"containers",
       json::array(
           {{{"name", "jax-tpu"}, {"image", "python:3.10"}, {"resources", json::object()}}})}};
  if (accelerator) {
    pod_spec["nodeSelector"] = {{"cloud.google.com/gke-tpu-accelerator", "tpu-v4-podslice"}};
    pod_spec["containers"][0]["resources"] = {{"limits", {{"google.com/tpu", "4"}}},
                                              {"requests", {{"google.com/tpu", "4"}}}};
  }
  json pod_sets = json::array();
  if (row.vms_needed) {
    pod_sets.push_back({{"name", "slice-job"},
                        {"count", accelerator ? *row.vms_needed : 1},
                        {"template", {{"metadata", json::object()}, {"spec", pod_spec}}}});
  }
  json status = json::object();
  if (row.vms_running) {
    status["admission"] = {
        {"clusterQueue", "cluster-queue"},
        {"podSetAssignments", json::array({{{"name", "slice-job"},
                                            {"count", accelerator ? *row.vms_running : 1},
                                            {"flavors", {{"google.com/tpu", "2xv4-64"}}}}})}};
  }
  if (row.vms_done) {
    status["reclaimablePods"] =
        json::array({{{"name", "slice-job"}, {"count", accelerator ? *row.vms_done : 1}}});
  }
  // The conditions Kueue would have written, ending with the one xpk shows (the latest; among
  // equal times the first, which is why a running workload often reads QuotaReserved).
  json conditions = json::array();
  if (row.status) {
    const std::string time = row.status_time.value_or(row.created);
    const std::string message = row.message.value_or("");
    const std::string& s = *row.status;
    const auto earlier = [&](const std::string& type, const std::string& reason,
                             const std::string& msg) {
      if (row.created < time) conditions.push_back(condition(type, reason, msg, row.created));
    };
    if (s == "QuotaReserved") {
      json c =
          condition("QuotaReserved", row.vms_running ? "QuotaReserved" : "Pending", message, time);
      if (!row.vms_running) c["status"] = "False";
      conditions.push_back(c);
      if (row.vms_running) {
        conditions.push_back(condition("Admitted", "Admitted", "The workload is admitted", time));
      }
    } else if (s == "Admitted") {
      earlier("QuotaReserved", "QuotaReserved", "Quota reserved in ClusterQueue cluster-queue");
      conditions.push_back(condition("Admitted", "Admitted", message, time));
    } else if (s == "Finished") {
      earlier("QuotaReserved", "QuotaReserved", "Quota reserved in ClusterQueue cluster-queue");
      earlier("Admitted", "Admitted", "The workload is admitted");
      const bool failed = message.find("failed") != std::string::npos;
      conditions.push_back(condition("Finished", failed ? "Failed" : "Succeeded", message, time));
    } else if (s == "Evicted") {
      conditions.push_back(condition("Evicted", "Preempted", message, time));
    } else {  // Unknown: a condition type xpk does not name
      conditions.push_back(condition("PodsReady", "PodsReady", message, time));
    }
  }
  if (!row.conditions.empty()) {
    // The simulator's own list (each condition at its own time; Evicted, Preempted, ...).
    conditions = json::array();
    for (const auto& c : row.conditions) {
      json one = condition(c.type, c.reason, c.message, c.time);
      one["status"] = c.status ? "True" : "False";
      conditions.push_back(std::move(one));
    }
  }
  if (!conditions.empty()) status["conditions"] = conditions;
  return {
      {"apiVersion", std::string(kKueue) + "/v1beta1"},
      {"kind", "Workload"},
      {"metadata",
       {{"name", name},
        {"namespace", row.namespace_},
        {"uid", uid_of("wl/" + row.namespace_ + "/" + row.name)},
        {"resourceVersion", "1"},
        {"generation", 1},
        {"creationTimestamp", row.created},
        {"labels", {{"kueue.x-k8s.io/queue-name", "multislice-queue"}}},
        {"ownerReferences", json::array({{{"apiVersion", std::string(kJobSet) + "/v1alpha2"},
                                          {"kind", "JobSet"},
                                          {"name", row.name},
                                          {"uid", uid_of("js/" + row.namespace_ + "/" + row.name)},
                                          {"controller", true},
                                          {"blockOwnerDeletion", true}}})}}},
      {"spec",
       {{"active", true},
        {"queueName", "multislice-queue"},
        {"priorityClassName", row.priority},
        {"priorityClassSource", "scheduling.k8s.io/priorityclass"},
        {"podSets", pod_sets}}},
      {"status", status}};
}

json jobset_object(const WorkloadRow& row) {
  json status = {{"restarts", 0}};
  if (row.state == "COMPLETED" || row.state == "FAILED") {
    const bool ok = row.state == "COMPLETED";
    status["terminalState"] = ok ? "Completed" : "Failed";
    status["conditions"] =
        json::array({condition(ok ? "Completed" : "Failed", ok ? "AllJobsCompleted" : "FailedJobs",
                               row.message.value_or(""), row.status_time.value_or(row.created))});
  }
  return {{"apiVersion", std::string(kJobSet) + "/v1alpha2"},
          {"kind", "JobSet"},
          {"metadata",
           {{"name", row.name},
            {"namespace", row.namespace_},
            {"uid", uid_of("js/" + row.namespace_ + "/" + row.name)},
            {"resourceVersion", "1"},
            {"generation", 1},
            {"creationTimestamp", row.created},
            {"labels", {{"kueue.x-k8s.io/queue-name", "multislice-queue"}}}}},
          {"spec",
           {{"suspend", row.state == "QUEUED"},
            {"ttlSecondsAfterFinished", 43200},
            {"replicatedJobs", json::array({{{"name", "slice-job"}, {"replicas", 1}}})}}},
          {"status", status}};
}

KubeApi::KubeApi(FleetSimulator& simulator) : sim_(simulator), random_(std::random_device{}()) {}

json KubeApi::issue_token() {
  const auto expires = std::chrono::system_clock::now() + std::chrono::hours(1);
  std::string token;
  {
    std::lock_guard<std::mutex> lock(mu_);
    token = fmt::format("fleet.{:016x}{:016x}", random_(), random_());
    tokens_[token] = expires;
  }
  const std::string when = tools::format_rfc3339(tools::to_nanos(expires), 0);  // ...T08:00:00Z
  return {{"kind", "ExecCredential"},
          {"apiVersion", "client.authentication.k8s.io/v1beta1"},
          {"spec", {{"interactive", false}}},
          {"status", {{"token", token}, {"expirationTimestamp", when}}}};
}

bool KubeApi::token_valid(const std::string& token) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = tokens_.find(token);
  return it != tokens_.end() && std::chrono::system_clock::now() < it->second;
}

bool KubeApi::authorized(const std::string& authorization) const {
  const std::string prefix = "Bearer ";
  return authorization.rfind(prefix, 0) == 0 && token_valid(authorization.substr(prefix.size()));
}

namespace {

// --- ClusterQueues (slice-shaped capacity, issue 15): cluster-scoped, read-only.

json cluster_queue_resource() {
  json r = resource("clusterqueues", "ClusterQueue", "clusterqueue", {"cq"});
  r["namespaced"] = false;
  r["verbs"] = {"get", "list", "watch"};
  return r;
}

// GET .../clusterqueues (`rest` empty) or .../clusterqueues/<name> (`rest` "/<name>").
KubeApi::Answer cluster_queue_answer(FleetSimulator& sim, const std::string& cluster,
                                     const std::string& rest, bool watch) {
  auto reply = [](int status, const json& body) {
    return KubeApi::Answer{status, body.dump(), "application/json"};
  };
  const FleetSimulator::ClusterQueueView view = sim.cluster_queue(cluster);
  if (view.failure) {
    std::string message = view.failure->stderr_text;
    while (!message.empty() && message.back() == '\n') message.pop_back();
    return reply(503, status_json(503, "ServiceUnavailable", message));
  }
  const bool named = !rest.empty() && rest != "/";
  if (view.forbidden) {
    // RBAC without clusterqueues in the caller's roles: what the API server answers.
    json status = status_json(
        403, "Forbidden",
        fmt::format(
            "clusterqueues.kueue.x-k8s.io {}is forbidden: User \"falcon@example.com\" cannot {} "
            "resource \"clusterqueues\" in API group \"kueue.x-k8s.io\" at the cluster "
            "scope",
            named ? fmt::format("\"{}\" ", rest.substr(1)) : "",
            named   ? "get"
            : watch ? "watch"
                    : "list"));
    status["details"] = {{"group", "kueue.x-k8s.io"}, {"kind", "clusterqueues"}};
    if (named) status["details"]["name"] = rest.substr(1);
    return reply(403, status);
  }
  if (named) {
    if (rest != "/cluster-queue") {
      return reply(404, status_json(404, "NotFound",
                                    fmt::format("clusterqueues.kueue.x-k8s.io \"{}\" not found",
                                                rest.substr(1))));
    }
    return reply(200, view.object);
  }
  if (watch) {
    return {200, json{{"type", "ADDED"}, {"object", view.object}}.dump() + "\n",
            "application/json"};
  }
  return reply(200, {{"kind", "ClusterQueueList"},
                     {"apiVersion", "kueue.x-k8s.io/v1beta1"},
                     {"metadata", {{"resourceVersion", "1"}}},
                     {"items", json::array({view.object})}});
}

}  // namespace

KubeApi::Answer KubeApi::handle(const std::string& cluster, const std::string& path, bool watch,
                                bool as_table, const std::string& authorization) {
  if (!authorized(authorization)) {
    return answer(401, status_json(401, "Unauthorized", "Unauthorized"));
  }
  const FleetCluster* c = nullptr;
  try {
    c = &sim_.cluster(cluster);
  } catch (const std::out_of_range&) {
    return answer(404, status_json(404, "NotFound", "no cluster " + cluster + " in the fleet"));
  }
  if (path == "/version") {
    return answer(200, {{"major", "1"},
                        {"minor", "32"},
                        {"gitVersion", "v1.32.4-gke.1106006"},
                        {"gitCommit", "fleet"},
                        {"gitTreeState", "clean"},
                        {"buildDate", "2026-05-01T00:00:00Z"},
                        {"goVersion", "go1.23.8"},
                        {"compiler", "gc"},
                        {"platform", "linux/amd64"}});
  }
  if (path == "/api") {
    return answer(
        200, {{"kind", "APIVersions"},
              {"versions", {"v1"}},
              {"serverAddressByClientCIDRs",
               json::array({{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", "10.0.0.2:443"}}})}});
  }
  // The MultiKueue manager's cluster: its resources join discovery (the route serves them).
  const bool manager = sim_.manager() && sim_.manager()->spec().cluster == cluster;
  if (path == "/api/v1") {
    json resources = json::array({{{"name", "namespaces"},
                                   {"singularName", "namespace"},
                                   {"namespaced", false},
                                   {"kind", "Namespace"},
                                   {"verbs", {"get", "list", "watch"}},
                                   {"shortNames", {"ns"}}}});
    if (manager) {
      resources.push_back({{"name", "configmaps"},
                           {"singularName", "configmap"},
                           {"namespaced", true},
                           {"kind", "ConfigMap"},
                           {"verbs", {"get", "list"}},
                           {"shortNames", {"cm"}}});
    }
    return answer(200,
                  {{"kind", "APIResourceList"}, {"groupVersion", "v1"}, {"resources", resources}});
  }
  const bool kueue = sim_.kueue_installed(cluster);
  if (path == "/apis") {
    json groups = json::array({group(kJobSet, {"v1alpha2"})});
    if (kueue) {
      groups.push_back(manager ? group(kKueue, {"v1beta2", "v1beta1"})
                               : group(kKueue, {"v1beta1"}));
    }
    return answer(200, {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", groups}});
  }
  if (!kueue && path.rfind("/apis/kueue.x-k8s.io/", 0) == 0) {
    // No Kueue CRDs: the group is not served at all, as on a cluster xpk never set up.
    return answer(404,
                  status_json(404, "NotFound", "the server could not find the requested resource"));
  }
  if (path == "/apis/kueue.x-k8s.io/v1beta1") {
    json resources = json::array({resource("workloads", "Workload", "workload", {"wl"})});
    if (manager) resources = manager_api_resources();
    resources.push_back(cluster_queue_resource());
    return answer(200, {{"kind", "APIResourceList"},
                        {"apiVersion", "v1"},
                        {"groupVersion", std::string(kKueue) + "/v1beta1"},
                        {"resources", resources}});
  }
  if (manager && path == "/apis/kueue.x-k8s.io/v1beta2") {
    return answer(200, {{"kind", "APIResourceList"},
                        {"apiVersion", "v1"},
                        {"groupVersion", std::string(kKueue) + "/v1beta2"},
                        {"resources", manager_api_resources()}});
  }
  if (path.rfind("/apis/kueue.x-k8s.io/v1beta1/clusterqueues", 0) == 0 &&
      (path.size() == 42 || path[42] == '/')) {
    return cluster_queue_answer(sim_, cluster, path.substr(42), watch);
  }
  if (path == "/apis/jobset.x-k8s.io/v1alpha2") {
    return answer(200, {{"kind", "APIResourceList"},
                        {"apiVersion", "v1"},
                        {"groupVersion", std::string(kJobSet) + "/v1alpha2"},
                        {"resources", json::array({resource("jobsets", "JobSet", "jobset", {})})}});
  }

  // Resource paths: /apis/<group>/<version>[/namespaces/<ns>]/<resource>[/<name>]
  std::vector<std::string> parts;
  for (std::size_t i = 1; i <= path.size();) {
    const std::size_t j = path.find('/', i);
    parts.push_back(path.substr(i, j == std::string::npos ? std::string::npos : j - i));
    if (j == std::string::npos) break;
    i = j + 1;
  }
  std::string ns;
  std::size_t k = 3;
  if (parts.size() >= 5 && parts[0] == "apis" && parts[3] == "namespaces") {
    ns = parts[4];
    k = 5;
  }
  const bool workloads = parts.size() > k && parts[0] == "apis" && parts[1] == kKueue &&
                         parts[2] == "v1beta1" && parts[k] == "workloads";
  const bool jobsets = parts.size() > k && parts[0] == "apis" && parts[1] == kJobSet &&
                       parts[2] == "v1alpha2" && parts[k] == "jobsets";
  if ((!workloads && !jobsets) || parts.size() > k + 2) {
    return answer(404,
                  status_json(404, "NotFound", "the server could not find the requested resource"));
  }
  const std::string name = parts.size() == k + 2 ? parts[k + 1] : "";

  const ClusterBehaviour& b = c->behaviour;
  const int latency = b.probe_latency_ms + (b.slow ? b.slow_latency_ms : 0);
  if (latency > 0) std::this_thread::sleep_for(std::chrono::milliseconds(latency));
  const ListResult list = sim_.list(cluster);
  if (list.failure) {
    std::string message = list.failure->stderr_text;
    while (!message.empty() && message.back() == '\n') message.pop_back();
    return answer(503, status_json(503, "ServiceUnavailable", message));
  }
  json items = json::array();
  for (const WorkloadRow& row : list.rows) {
    if (!ns.empty() && row.namespace_ != ns) continue;
    json object = workloads ? workload_object(row) : jobset_object(row);
    if (!name.empty() && object["metadata"]["name"] != name) continue;
    items.push_back(std::move(object));
  }
  const std::string group_version =
      workloads ? std::string(kKueue) + "/v1beta1" : std::string(kJobSet) + "/v1alpha2";
  if (!name.empty()) {
    if (items.empty()) {
      return answer(404, status_json(404, "NotFound",
                                     fmt::format("{}.{} \"{}\" not found",
                                                 workloads ? "workloads" : "jobsets",
                                                 workloads ? kKueue : kJobSet, name)));
    }
    return answer(200, items[0]);
  }
  if (watch) {
    std::string body;
    for (json& item : items) body += json{{"type", "ADDED"}, {"object", item}}.dump() + "\n";
    return {200, body, "application/json"};
  }
  if (as_table) {
    const auto now = std::chrono::system_clock::now();
    json table = {{"kind", "Table"},
                  {"apiVersion", "meta.k8s.io/v1"},
                  {"metadata", {{"resourceVersion", "1"}}},
                  {"rows", json::array()}};
    if (workloads) {
      table["columnDefinitions"] =
          json::array({table_column("Name", "string", "name"), table_column("Queue", "string"),
                       table_column("Reserved in", "string"), table_column("Admitted", "string"),
                       table_column("Finished", "string"), table_column("Age", "date")});
    } else {
      table["columnDefinitions"] = json::array(
          {table_column("Name", "string", "name"), table_column("TerminalState", "string"),
           table_column("Restarts", "string"), table_column("Completed", "string"),
           table_column("Suspended", "string"), table_column("Age", "date")});
    }
    for (std::size_t i = 0; i < items.size(); ++i) {
      const json& o = items[i];
      const WorkloadRow* row = nullptr;
      for (const WorkloadRow& r : list.rows) {
        if ((ns.empty() || r.namespace_ == ns) &&
            (workloads ? workload_object(r) : jobset_object(r))["metadata"]["name"] ==
                o["metadata"]["name"] &&
            r.namespace_ == o["metadata"]["namespace"]) {
          row = &r;
          break;
        }
      }
      json cells;
      const std::string created = o["metadata"].value("creationTimestamp", "");
      if (workloads) {
        const bool admitted = row && row->vms_running.has_value();
        const bool done = row && (row->state == "COMPLETED" || row->state == "FAILED");
        cells =
            json::array({o["metadata"]["name"], "multislice-queue", admitted ? "cluster-queue" : "",
                         admitted ? "True" : "", done ? "True" : "", age(created, now)});
      } else {
        const std::string terminal = o["status"].value("terminalState", "");
        cells = json::array(
            {o["metadata"]["name"], terminal, "0", terminal == "Completed" ? "True" : "",
             o["spec"].value("suspend", false) ? "true" : "false", age(created, now)});
      }
      table["rows"].push_back({{"cells", cells}, {"object", partial_metadata(o)}});
    }
    return answer(200, table);
  }
  return answer(200, {{"kind", workloads ? "WorkloadList" : "JobSetList"},
                      {"apiVersion", group_version},
                      {"metadata", {{"resourceVersion", "1"}}},
                      {"items", items}});
}

void register_kube_token_route(httplib::Server& server, KubeApi& api) {
  server.Post("/fleet/v1/kube:token", [&api](const httplib::Request&, httplib::Response& res) {
    res.status = 200;
    res.set_content(api.issue_token().dump(), "application/json");
  });
}

namespace {

struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CertFree {
  void operator()(X509* c) const { X509_free(c); }
};

[[noreturn]] void tls_fail(const char* what) {
  throw std::runtime_error(std::string("fleet kube API: cannot make its TLS certificate: ") + what);
}

void add_extension(X509* cert, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) tls_fail("extension");
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

void reply_status(httplib::Response& res, int code, const std::string& reason,
                  const std::string& message) {
  res.status = code;
  res.set_content(status_json(code, reason, message).dump(), "application/json");
}

// One request to /fleet/v1/clusters/<cluster><path>: the manager's paths on the manager's
// cluster (any method), else KubeApi::handle (GET only).
void serve_cluster(KubeApi& api, const std::string& method, const httplib::Request& req,
                   httplib::Response& res) {
  const std::string cluster = req.matches[1];
  const std::string path = req.matches[2];
  const std::string authorization = req.get_header_value("Authorization");
  FleetSimulator& sim = api.simulator();
  MultiKueueManager* manager = sim.manager();
  const bool manager_path =
      manager && manager->spec().cluster == cluster && is_manager_path(path) &&
      // Without Kueue's CRDs the group is not served (KubeApi::handle).
      (path.rfind("/apis/kueue.x-k8s.io/", 0) != 0 || sim.kueue_installed(cluster));
  if (manager_path) {
    if (!api.authorized(authorization)) {
      return reply_status(res, 401, "Unauthorized", "Unauthorized");
    }
    if (const auto why = sim.unreachable_message(cluster)) {
      return reply_status(res, 503, "ServiceUnavailable", *why);
    }
    return serve_manager_request(*manager, method, path, req, res);
  }
  if (method != "GET") {
    if (!api.authorized(authorization)) {
      return reply_status(res, 401, "Unauthorized", "Unauthorized");
    }
    try {
      sim.cluster(cluster);
    } catch (const std::out_of_range&) {
      return reply_status(res, 404, "NotFound", "no cluster " + cluster + " in the fleet");
    }
    return reply_status(
        res, 405, "MethodNotAllowed",
        fmt::format("the fleet's cluster {} answers only GET of {} (POST, DELETE and PATCH are "
                    "served for the MultiKueue manager's workloads on its cluster)",
                    cluster, path));
  }
  const std::string accept = req.get_header_value("Accept");
  const bool watch = req.has_param("watch") && (req.get_param_value("watch") == "true" ||
                                                req.get_param_value("watch") == "1");
  const KubeApi::Answer a =
      api.handle(cluster, path, watch, accept.find("as=Table") != std::string::npos, authorization);
  res.status = a.status;
  res.set_content(a.body, a.content_type);
}

void register_cluster_routes(httplib::Server& server, KubeApi& api) {
  const char* pattern = R"(/fleet/v1/clusters/([a-z0-9-]+)(/.*))";
  server.Get(pattern, [&api](const httplib::Request& req, httplib::Response& res) {
    serve_cluster(api, "GET", req, res);
  });
  server.Post(pattern, [&api](const httplib::Request& req, httplib::Response& res) {
    serve_cluster(api, "POST", req, res);
  });
  server.Delete(pattern, [&api](const httplib::Request& req, httplib::Response& res) {
    serve_cluster(api, "DELETE", req, res);
  });
  server.Patch(pattern, [&api](const httplib::Request& req, httplib::Response& res) {
    serve_cluster(api, "PATCH", req, res);
  });
}

}  // namespace

struct KubeTlsServer::Impl {
  KubeApi* api = nullptr;
  std::unique_ptr<EVP_PKEY, KeyFree> key;
  std::unique_ptr<X509, CertFree> cert;
  std::unique_ptr<httplib::SSLServer> server;
  std::thread thread;
  int port = 0;
  std::string host;
};

KubeTlsServer::KubeTlsServer(KubeApi& api) : impl_(std::make_unique<Impl>()) {
  impl_->api = &api;
  impl_->key.reset(EVP_EC_gen("prime256v1"));
  if (!impl_->key) tls_fail("key");
  impl_->cert.reset(X509_new());
  X509* cert = impl_->cert.get();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert),
                   static_cast<long>(std::random_device{}() & 0x7FFFFFFF));
  X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert), 30L * 24 * 3600);
  X509_set_pubkey(cert, impl_->key.get());
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("falcon-fleet kube API"), -1,
                             -1, 0);
  X509_set_issuer_name(cert, name);
  add_extension(cert, NID_basic_constraints, "critical,CA:TRUE");
  add_extension(cert, NID_key_usage, "critical,digitalSignature,keyCertSign");
  add_extension(cert, NID_ext_key_usage, "serverAuth");
  add_extension(cert, NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost");
  if (X509_sign(cert, impl_->key.get(), EVP_sha256()) == 0) tls_fail("signature");
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(bio, cert);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  pem_.assign(data, static_cast<std::size_t>(n));
  BIO_free(bio);
  impl_->server = std::make_unique<httplib::SSLServer>(cert, impl_->key.get());
  if (!impl_->server->is_valid()) tls_fail("server context");
  // Clients keep one connection per cluster: up to 100 requests each, idle for up to 2 s (a
  // real kube-apiserver keeps idle connections 90 s; here every idle connection holds one of
  // the server's threads, so they are let go sooner and there are 64 threads).
  impl_->server->set_tcp_nodelay(true);  // else Nagle holds each answer's body for the ACK
  impl_->server->set_keep_alive_max_count(100);
  impl_->server->set_keep_alive_timeout(2);
  impl_->server->new_task_queue = [] { return new httplib::ThreadPool(64); };
  register_cluster_routes(*impl_->server, api);
}

KubeTlsServer::~KubeTlsServer() { stop(); }

void KubeTlsServer::start(const std::string& host) {
  impl_->host = host;
  impl_->port = impl_->server->bind_to_any_port(host);
  if (impl_->port <= 0) {
    throw std::runtime_error("fleet kube API: cannot bind a port on " + host);
  }
  impl_->thread = std::thread([this] { impl_->server->listen_after_bind(); });
}

void KubeTlsServer::stop() {
  // A streaming watch of the manager's Workloads holds a server thread until it ends: end them
  // all first (for good: the server does not start again), so that stop() does not wait.
  if (impl_ && impl_->api) {
    if (MultiKueueManager* manager = impl_->api->simulator().manager()) manager->close_watches();
  }
  if (impl_ && impl_->server) impl_->server->stop();
  if (impl_ && impl_->thread.joinable()) impl_->thread.join();
}

std::string KubeTlsServer::base_url() const {
  return fmt::format("https://{}:{}", impl_->host, impl_->port);
}

std::string KubeTlsServer::ca_data() const { return tools::base64_encode(pem_); }

}  // namespace falcon::fleet
