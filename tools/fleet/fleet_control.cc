#include "fleet/fleet_control.h"

#include <httplib.h>

#include <fmt/format.h>

#include "common/names.h"
#include "common/rfc3339.h"
#include "fleet/kubeconfig.h"

namespace falcon::fleet {
namespace {

std::string str(const nlohmann::json& body, const char* key) {
  const auto it = body.find(key);
  if (it == body.end() || !it->is_string() || it->get<std::string>().empty()) {
    throw ControlError(400, fmt::format("field '{}' must be a non-empty string", key));
  }
  return it->get<std::string>();
}

bool flag(const nlohmann::json& body, const char* key) {
  const auto it = body.find(key);
  if (it == body.end() || !it->is_boolean()) {
    throw ControlError(400, fmt::format("field '{}' must be true or false", key));
  }
  return it->get<bool>();
}

template <typename T>
T opt(const nlohmann::json& body, const char* key, T fallback) {
  const auto it = body.find(key);
  if (it == body.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw ControlError(400, fmt::format("field '{}' has the wrong type", key));
  }
}

nlohmann::json failure_json(const std::optional<KubectlFailure>& f) {
  if (!f) return nullptr;
  return {{"stderr", f->stderr_text}, {"exit_code", f->exit_code}};
}

nlohmann::json row_json(const WorkloadRow& r) {
  const auto o = [](const auto& v) -> nlohmann::json {
    if (v) return *v;
    return nullptr;
  };
  return {{"name", r.name},
          {"namespace", r.namespace_},
          {"created", r.created},
          {"priority", r.priority},
          {"vms_needed", o(r.vms_needed)},
          {"vms_running", o(r.vms_running)},
          {"vms_done", o(r.vms_done)},
          {"status", o(r.status)},
          {"message", o(r.message)},
          {"status_time", o(r.status_time)},
          {"state", r.state}};
}

const char* result_name(CreateResult r) {
  switch (r) {
    case CreateResult::kCreated:
      return "created";
    case CreateResult::kReplaced:
      return "replaced";
    case CreateResult::kAlreadyExists:
      return "exists";
    case CreateResult::kNoCapacityForDevice:
      return "no_capacity";
  }
  return "created";
}

}  // namespace

FleetControl::FleetControl(FleetSimulator& simulator, std::string server_url)
    : sim_(simulator), server_url_(std::move(server_url)) {}

void FleetControl::set_server_url(std::string url) {
  std::lock_guard lock(mu_);
  server_url_ = std::move(url);
}

std::string FleetControl::server_url() const {
  std::lock_guard lock(mu_);
  return server_url_;
}

void FleetControl::set_kube_endpoint(std::string url, std::string ca_data) {
  std::lock_guard lock(mu_);
  kube_url_ = std::move(url);
  kube_ca_data_ = std::move(ca_data);
}

std::string FleetControl::kube_base_url() const {
  std::lock_guard lock(mu_);
  return kube_url_.empty() ? server_url_ : kube_url_;
}

std::string FleetControl::kube_ca_data() const {
  std::lock_guard lock(mu_);
  return kube_ca_data_;
}

nlohmann::json FleetControl::fault(const std::string& route, const nlohmann::json& body) {
  const std::string cluster = str(body, "cluster");
  try {
    if (route == "clusters:kill") {
      const std::string mode = opt<std::string>(body, "workloads", "keep");
      if (mode != "keep" && mode != "fail") {
        throw ControlError(400,
                           "field 'workloads' must be \"keep\" (only the control plane is "
                           "unreachable) or \"fail\" (the nodes went too)");
      }
      sim_.kill_cluster(cluster, mode == "fail" ? KillMode::kFail : KillMode::kKeep);
      return {{"cluster", cluster}, {"unreachable", true}, {"workloads", mode}};
    }
    if (route == "clusters:revive") {
      sim_.revive_cluster(cluster);
      return {{"cluster", cluster}, {"unreachable", false}};
    }
    if (route == "clusters:failCreates") {
      const auto it = body.find("count");
      if (it == body.end() || !it->is_number_integer()) {
        throw ControlError(400, "field 'count' must be an integer (0 clears)");
      }
      const int pending = sim_.fail_next_creates(cluster, it->get<int>());
      return {{"cluster", cluster}, {"failing_creates", pending}};
    }
    if (route == "workloads:evict") {
      EvictRequest req;
      req.cluster = cluster;
      req.workload = str(body, "workload");
      req.readmit = opt<bool>(body, "readmit", true);
      req.readmit_after_s = opt<double>(body, "readmit_after_s", 0.0);
      req.preemptor_uid = opt<std::string>(body, "preemptor_uid", "");
      const FaultResult r = sim_.evict(req);
      return {{"cluster", cluster}, {"workload", r.workload}, {"state", r.state}};
    }
    // nodes:fail
    NodeFailRequest req;
    req.cluster = cluster;
    req.workload = opt<std::string>(body, "workload", "");
    req.node = opt<std::string>(body, "node", "");
    req.slice = opt<int>(body, "slice", 0);
    req.worker = opt<int>(body, "worker", 0);
    req.exit_code = opt<int>(body, "exit_code", 137);
    const FaultResult r = sim_.fail_node(req);
    return {{"cluster", cluster}, {"workload", r.workload}, {"state", r.state}, {"pods", r.pods}};
  } catch (const FaultError& e) {
    throw ControlError(e.status(), e.what());
  }
}

nlohmann::json FleetControl::handle(const std::string& route, const nlohmann::json& body) {
  if (!body.is_object()) throw ControlError(400, "the request body must be a JSON object");
  if (route == "xpk") {
    const XpkProfile& x = sim_.config().xpk;
    return {{"version", x.version},
            {"table_style", to_string(x.table_style)},
            {"supports_namespace", x.supports_namespace},
            {"progress_lines", x.progress_lines}};
  }
  if (route == "state") return sim_.state();
  if (route == "clusters:kueue" || route == "clusters:clusterQueues") {
    const std::string name = str(body, "cluster");
    try {
      if (route == "clusters:kueue") {
        sim_.set_kueue(name, flag(body, "installed"));
        return {{"cluster", name}, {"kueue", sim_.kueue_installed(name)}};
      }
      sim_.set_cluster_queues_readable(name, flag(body, "readable"));
      return {{"cluster", name},
              {"cluster_queues_readable", sim_.behaviour(name).cluster_queues_readable}};
    } catch (const std::out_of_range& e) {
      throw ControlError(400, e.what());
    }
  }
  if (route == "clusters:kill" || route == "clusters:revive" || route == "clusters:failCreates" ||
      route == "workloads:evict" || route == "nodes:fail") {
    return fault(route, body);
  }
  if (route == "clock:advance") {
    const double seconds = opt<double>(body, "seconds", 0.0);
    if (!(seconds >= 0) || seconds > 1e9) {
      throw ControlError(400, "field 'seconds' must be a number between 0 and 1e9");
    }
    if (!sim_.clock().manual()) {
      throw ControlError(400, fmt::format("clock:advance needs a manual clock (time_scale 0); "
                                          "this fleet runs at time_scale {} on the wall clock",
                                          sim_.clock().scale()));
    }
    sim_.clock().advance(std::chrono::nanoseconds(static_cast<std::int64_t>(seconds * 1e9)));
    sim_.advance();
    const std::int64_t now = sim_.clock().now_ns();
    return {{"now", tools::format_rfc3339_nanos(now)}, {"now_ns", now}};
  }
  if (route == "logs:generate") {
    GenerateRequest req;
    if (body.contains("cluster") && !body.contains("project")) {
      req.cluster = str(body, "cluster");
      try {
        (void)sim_.cluster(req.cluster);
      } catch (const std::out_of_range& e) {
        throw ControlError(400, e.what());
      }
    } else {
      auto name = sim_.resolve(str(body, "project"), opt<std::string>(body, "zone", ""),
                               str(body, "cluster"));
      if (!name) throw ControlError(400, "no such cluster in the fleet");
      req.cluster = *name;
    }
    req.workload = str(body, "workload");
    req.namespace_ = opt<std::string>(body, "namespace", "default");
    req.ranks = opt<std::vector<int>>(body, "ranks", {0});
    req.slice = opt<int>(body, "slice", 0);
    req.lines_per_rank = opt<std::size_t>(body, "lines_per_rank", 1000);
    req.interval_ns = static_cast<std::int64_t>(opt<double>(body, "interval_ms", 1.0) * 1e6);
    req.omit_completion_index = opt<bool>(body, "omit_completion_index", false);
    if (body.contains("start_time")) {
      const auto t = tools::parse_rfc3339_nanos(str(body, "start_time"));
      if (!t) throw ControlError(400, "field 'start_time' must be an RFC 3339 timestamp");
      req.start_ns = *t;
    }
    if (req.ranks.empty()) throw ControlError(400, "field 'ranks' must not be empty");
    if (req.lines_per_rank > 100'000'000) {
      throw ControlError(400, "field 'lines_per_rank' must be at most 100000000");
    }
    const GenerateResult r = sim_.generate_logs(req);
    return {{"written", r.written}, {"pod_names", r.pod_names}};
  }

  if (route != "credentials" && route != "workloads:get" && route != "workloads:list" &&
      route != "workloads:create" && route != "workloads:delete") {
    throw ControlError(404, "no such fleet route: " + route);
  }
  // The rest name a cluster the way xpk does.
  const std::string project = str(body, "project");
  const std::string zone = opt<std::string>(body, "zone", "");
  const std::string cluster_id = str(body, "cluster");
  const std::optional<std::string> name = sim_.resolve(project, zone, cluster_id);
  const nlohmann::json unknown_cluster = {
      {"stderr", fmt::format("Unable to connect to the server: dial tcp: lookup "
                             "gke-{}-{}.{}.gke.goog: no such host\n",
                             cluster_id, project, zone)},
      {"exit_code", 1}};

  if (route == "credentials") {
    if (!name) return {{"found", false}};
    const FleetCluster& c = sim_.cluster(*name);
    const std::string kubeconfig = opt<std::string>(body, "kubeconfig", "");
    if (!kubeconfig.empty()) sim_.record_kubeconfig(*name, kubeconfig);
    const ClusterBehaviour b = sim_.behaviour(*name);  // as it is now (clusters:kill)
    const int slow = b.slow ? b.slow_latency_ms : 0;
    std::string error;
    if (b.unreachable) {
      // What `kubectl get pods` prints; asking does not count as a kubectl call.
      const ExistsOutcome probe = sim_.exists(*name, "-", "default");
      if (probe.failure) error = probe.failure->stderr_text;
    }
    return {{"found", true},
            {"error", error},
            {"name", c.name},
            {"location", c.location},
            {"context", GkeContext{c.project, c.location, c.cluster_id}.name()},
            {"server", fmt::format("{}/fleet/v1/clusters/{}", kube_base_url(), c.name)},
            {"certificate_authority_data", kube_ca_data()},
            {"unreachable", b.unreachable},
            {"latency_ms",
             {{"list", b.probe_latency_ms + slow},
              {"create", b.command_latency_ms + slow},
              {"delete", b.command_latency_ms + slow}}}};
  }
  if (route == "workloads:get") {
    if (!name) return {{"failure", unknown_cluster}};
    const std::string device = opt<std::string>(body, "device_type", "");
    const ExistsOutcome r =
        sim_.exists(*name, str(body, "workload"), opt<std::string>(body, "namespace", "default"));
    return {{"failure", failure_json(r.failure)},
            {"exists", r.exists},
            {"has_capacity", device.empty() || sim_.offers(*name, device)}};
  }
  if (route == "workloads:list") {
    if (!name) return {{"failure", unknown_cluster}};
    const ListResult r = sim_.list(*name);
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& row : r.rows) rows.push_back(row_json(row));
    return {{"failure", failure_json(r.failure)}, {"rows", std::move(rows)}};
  }
  if (route == "workloads:create") {
    if (!name) return {{"failure", unknown_cluster}};
    CreateRequest req;
    req.workload = str(body, "workload");
    req.device_type = str(body, "device_type");
    req.tpu_type_flag = opt<bool>(body, "tpu_type_flag", false);
    req.num_slices = opt<int>(body, "num_slices", 1);
    req.num_nodes = opt<int>(body, "num_nodes", 1);
    req.priority = opt<std::string>(body, "priority", "medium");
    req.command = opt<std::string>(body, "command", "");
    req.docker_image = opt<std::string>(body, "docker_image", "");
    req.docker_name = opt<std::string>(body, "docker_name", "jax-tpu");
    req.namespace_ = opt<std::string>(body, "namespace", "default");
    req.env = opt<std::map<std::string, std::string>>(body, "env", {});
    req.ttl_seconds_after_finished = opt<std::int64_t>(body, "ttl_seconds_after_finished", 43200);
    if (!tools::is_xpk_name(req.workload)) throw ControlError(400, "invalid workload name");
    const CreateOutcome r = sim_.create(*name, req, opt<bool>(body, "overwrite", false));
    return {{"failure", failure_json(r.failure)}, {"result", result_name(r.result)}};
  }
  if (route == "workloads:delete") {
    if (!name) return {{"failure", unknown_cluster}};
    const DeleteOutcome r = sim_.remove(*name, str(body, "workload"));
    return {{"failure", failure_json(r.failure)}, {"deleted", r.deleted}};
  }
  throw ControlError(404, "no such fleet route: " + route);
}

void register_fleet_routes(httplib::Server& server, FleetControl& control) {
  const auto handler = [&control](const httplib::Request& req, httplib::Response& res) {
    const std::string route = req.matches[1];
    nlohmann::json answer;
    try {
      nlohmann::json body = nlohmann::json::object();
      if (req.method == "POST" && !req.body.empty()) body = nlohmann::json::parse(req.body);
      answer = control.handle(route, body);
      res.status = 200;
    } catch (const ControlError& e) {
      res.status = e.status();
      answer = {{"error", {{"code", e.status()}, {"message", e.what()}}}};
    } catch (const nlohmann::json::exception& e) {
      res.status = 400;
      answer = {{"error", {{"code", 400}, {"message", std::string("bad JSON: ") + e.what()}}}};
    } catch (const std::exception& e) {
      res.status = 500;
      answer = {{"error", {{"code", 500}, {"message", e.what()}}}};
    }
    res.set_content(answer.dump(), "application/json");
  };
  server.Get(R"(/fleet/v1/([A-Za-z:]+))", handler);
  server.Post(R"(/fleet/v1/([A-Za-z:]+))", handler);
}

}  // namespace falcon::fleet
