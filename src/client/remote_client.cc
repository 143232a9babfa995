// FabricClient through `falcon serve`'s HTTP API (docs/serve.md): each call one request (an
// export: a start and a poll of its progress), its answer read into the model's types, and a
// server's error of a type the CLI acts on thrown as that type.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "falcon/client.h"
#include "falcon/errors.h"
#include "falcon/values.h"

namespace falcon {
namespace {

using nlohmann::json;

// The server's error as the layer's own type where a caller acts on its details (the probes of
// a failed selection, a log read's HTTP status, xpk's exit code); any other as it came.
[[noreturn]] void rethrow_typed(const ApiError& e) {
  const json& d = e.error();
  const std::string message = d.value("message", std::string(e.what()));
  const auto text = [&d](const char* key) {
    const auto it = d.find(key);
    return it != d.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  const auto exit_code = [&d]() -> std::optional<int> {
    const auto it = d.find("exit_code");
    if (it == d.end() || !it->is_number_integer()) return std::nullopt;
    return it->get<int>();
  };
  try {
    if (e.type() == "NoAvailableClusterError") {
      NoAvailableClusterError typed(
          message, text("accelerator"),
          d.value("probe_results", json::array()).get<std::vector<ClusterProbeResult>>());
      if (const auto it = d.find("scores"); it != d.end() && it->is_array()) {
        typed.set_scores(text("policy"), it->get<std::vector<CandidateScore>>());
      }
      throw typed;
    }
    if (e.type() == "LogRetrievalError") {
      throw LogRetrievalError(message, d.value("http_status", 0), text("status"));
    }
    if (e.type() == "WorkloadSubmitError") {
      throw WorkloadSubmitError(message, text("cluster"), text("workload"), exit_code(),
                                text("stderr"));
    }
    if (e.type() == "XpkCommandError") {
      throw XpkCommandError(message, text("cluster"), exit_code(), text("stderr"));
    }
  } catch (const json::exception&) {
    // Details not in the shape this version knows: the server's error as it came.
  }
  throw e;
}

std::string workload_path(const std::string& cluster, const std::string& workload) {
  return "/v1/workloads/" + ApiClient::segment(cluster) + "/" + ApiClient::segment(workload);
}

std::optional<std::string> positive(int v) {
  return v > 0 ? std::optional(std::to_string(v)) : std::nullopt;
}

// A brief POST /v1/select answer (docs/serve.md).
Decision brief_decision(const json& answer) {
  Decision out;
  out.brief = true;
  ClusterSelection& s = out.selection;
  s.accelerator = answer.value("accelerator", std::string());
  s.decided_at = answer.value("decided_at", std::string());
  s.policy = answer.value("policy", std::string());
  s.reason = answer.value("reason", std::string());
  s.selected_cluster = answer.value("selected_cluster", std::string());
  s.selection_id = answer.value("selection_id", std::int64_t{0});
  s.not_recorded = answer.value("not_recorded", std::string());
  if (const auto it = answer.find("skipped"); it != answer.end() && it->is_object()) {
    for (const auto& [cluster, why] : it->items()) {
      if (why.is_string()) out.skipped[cluster] = why.get<std::string>();
    }
  }
  if (const auto it = answer.find("same_as"); it != answer.end() && it->is_number_integer()) {
    out.same_as = it->get<std::int64_t>();
  }
  const auto names = [&answer](const char* key) {
    return answer.value(key, json::array()).get<std::vector<std::string>>();
  };
  const auto probed_now = names("probed_now");
  const auto unreachable = names("unreachable");
  const auto listed = [](const std::vector<std::string>& list, const std::string& name) {
    return std::find(list.begin(), list.end(), name) != list.end();
  };
  const json ages = answer.value("probe_age_ms", json::object());
  for (const auto& [cluster, age] : ages.items()) {
    MonitoredProbe p;
    p.result.cluster = cluster;
    p.result.reachable = !listed(unreachable, cluster);
    p.age_ms = age.get<std::int64_t>();
    p.from_cache = !listed(probed_now, cluster);
    out.candidate_probes.push_back(std::move(p));
  }
  return out;
}

class RemoteClient final : public FabricClient {
 public:
  explicit RemoteClient(ApiClientOptions options) : api_(std::move(options)) {}

  std::vector<ClusterEntry> list_clusters() override {
    const json answer = get("/v1/clusters");
    std::vector<ClusterEntry> out;
    for (const auto& c : answer.at("clusters")) {
      out.push_back({c.at("config").get<ClusterConfig>(),
                     c.value("breakers", json::array()).get<std::vector<BreakerReport>>()});
    }
    return out;
  }

  ClusterHealth cluster_health(const std::string& cluster) override {
    // The server's probe, no older than a second (probed now if need be).
    const json answer = get("/v1/clusters/" + ApiClient::segment(cluster) +
                            ApiClient::query({{"fresh", "true"}, {"since", "1s"}, {"limit", "1"}}));
    ClusterHealth out;
    out.probe = answer.at("probe").at("result").get<ClusterProbeResult>();
    out.breakers = answer.value("breakers", json::array()).get<std::vector<BreakerReport>>();
    return out;
  }

  Decision select(const SelectRequest& request) override {
    if (request.policy) {
      throw InvalidValueError(
          "--policy",
          "through a server it applies to --replay and --replay-selection; POST "
          "/v1/select decides under the server's selection.policy");
    }
    json body = {{"accelerator_type", request.accelerator_type}};
    if (request.explain) body["explain"] = true;
    const json answer = post("/v1/select", body);
    if (!request.explain) return brief_decision(answer);
    Decision out;
    out.selection = answer.get<ClusterSelection>();
    out.candidate_probes =
        answer.value("candidate_probes", json::array()).get<std::vector<MonitoredProbe>>();
    return out;
  }

  ClusterSelection recorded_selection(std::int64_t id) override {
    return get("/v1/selections/" + std::to_string(id)).get<ClusterSelection>();
  }

  Submission submit(const SubmitRequest& request) override {
    json body = {{"spec", request.spec}};
    if (!request.cluster.empty()) body["cluster"] = request.cluster;
    if (request.selection_id != 0) body["selection_id"] = request.selection_id;
    if (request.managed) {
      json m = json::object();
      if (request.managed->max_recoveries) m["max_recoveries"] = *request.managed->max_recoveries;
      if (request.managed->stable_after_s) m["stable_after_s"] = *request.managed->stable_after_s;
      if (request.managed->recover_on_failure) m["recover_on_failure"] = true;
      body["managed"] = std::move(m);
    }
    const json answer = post("/v1/workloads", body);
    Submission out;
    out.handle = answer.at("handle").get<WorkloadHandle>();
    if (const auto it = answer.find("selection"); it != answer.end() && !it->is_null()) {
      out.selection = it->get<ClusterSelection>();
    }
    return out;
  }

  WorkloadHandle handle_for(const std::string& cluster, const std::string& workload) override {
    return get(workload_path(cluster, workload) + "/handle").at("handle").get<WorkloadHandle>();
  }

  WorkloadStatus status(const std::string& cluster, const std::string& workload) override {
    return get(workload_path(cluster, workload)).at("status").get<WorkloadStatus>();
  }

  Cancellation cancel(const std::string& cluster, const std::string& workload) override {
    const json answer = call([&] { return api_.del(workload_path(cluster, workload)); });
    return {answer.at("handle").get<WorkloadHandle>(), answer.at("cancelled").get<bool>()};
  }

  std::vector<WorkloadInfo> list_workloads(const std::string& cluster,
                                           const std::optional<std::string>& state) override {
    // What the cluster's xpk lists now (live), or its error.
    const json answer =
        get("/v1/workloads" +
            ApiClient::query({{"live", "true"}, {"cluster", cluster}, {"state", state}}));
    for (const auto& entry : answer.at("clusters")) {
      if (entry.value("cluster", std::string()) != cluster) continue;
      if (const auto it = entry.find("error"); it != entry.end() && !it->is_null()) {
        rethrow_typed(ApiError(502, *it));  // as the error would be locally
      }
      return entry.at("workloads").get<std::vector<WorkloadInfo>>();
    }
    throw ApiError(
        502, {{"type", "InternalError"},
              {"message", fmt::format("{} did not answer for cluster {}", api_.url(), cluster)}});
  }

  std::vector<Recovery> recoveries(const std::optional<std::string>& workload) override {
    return get("/v1/recoveries" + ApiClient::query({{"workload", workload}, {"limit", "1000"}}))
        .at("recoveries")
        .get<std::vector<Recovery>>();
  }

  void read_logs(const LogRequest& request, const std::function<void(const std::string&)>& on_line,
                 const std::function<bool()>& stop) override {
    const std::string path =
        workload_path(request.cluster, request.workload) + "/logs" +
        ApiClient::query(
            {{"rank", std::to_string(request.rank)},
             {"slice", positive(request.slice)},
             {"tail", positive(request.tail)},
             {"since", request.since},
             {"grep", request.grep},
             {"follow", request.follow ? std::optional<std::string>("true") : std::nullopt}});
    call([&] {
      api_.stream_lines(path, on_line, stop);
      return json();
    });
  }

  LogExportResult export_logs(const ExportRequest& request,
                              const ExportObserver& observer) override {
    json body = {{"cluster", request.cluster},
                 {"workload", request.workload},
                 {"dest", request.dest},
                 {"slice", request.slice}};
    if (request.ranks) body["ranks"] = *request.ranks;
    if (request.since) body["since"] = *request.since;
    if (request.grep) body["grep"] = *request.grep;
    if (request.via) body["via"] = to_string(*request.via);
    if (request.keep_staging) body["keep_staging"] = true;
    const std::int64_t id = post("/v1/exports", body).at("id").get<std::int64_t>();
    return wait_for_export(id, observer);
  }

 private:
  template <typename F>
  json call(F&& f) {
    try {
      return f();
    } catch (const ApiError& e) {
      rethrow_typed(e);
    }
  }
  json get(const std::string& path) {
    return call([&] { return api_.get(path); });
  }
  json post(const std::string& path, const json& body) {
    return call([&] { return api_.post(path, body); });
  }

  // Polls GET /v1/exports/{id} until the export ends, telling `observer` each new step and each
  // rank's progress as it changes.
  LogExportResult wait_for_export(std::int64_t id, const ExportObserver& observer) {
    const std::string path = "/v1/exports/" + std::to_string(id);
    std::map<std::string, json> shown;  // progress per rank, as last told
    json told;                          // the step, as last told
    for (;;) {
      const json e = get(path);
      json step;
      if (e.value("state", "") == "queued" && e.contains("queue_position")) {
        step = {{"phase", "chosen"},
                {"message", fmt::format("export {}: queued behind the server's running exports "
                                        "(place {})",
                                        id, e["queue_position"].dump())}};
      } else if (e.contains("status") && e["status"].is_object()) {
        step = e["status"];
      }
      if (!step.is_null() && step != told) {
        if (observer.on_status) observer.on_status(step.get<ExportStatus>());
        told = step;
      }
      if (const auto it = e.find("progress"); it != e.end() && it->is_object()) {
        for (const auto& [rank, p] : it->items()) {
          if (rank == "status" || !p.is_object() || shown[rank] == p) continue;
          shown[rank] = p;
          if (observer.on_progress) {
            observer.on_progress({.rank = std::stoi(rank),
                                  .lines = p.value("lines", std::int64_t{0}),
                                  .bytes = p.value("bytes", std::int64_t{0}),
                                  .done = p.value("done", false)});
          }
        }
      }
      const std::string state = e.at("state").get<std::string>();
      if (state == "done") return e.at("result").get<LogExportResult>();
      if (state != "running" && state != "queued") {
        json error = e.at("result").value("error", json::object());
        if (!error.contains("message")) {
          error = {{"type", "InternalError"},
                   {"message", fmt::format("export {} ended {}", id, state)}};
        }
        // "Stopped": the server stopped before the export finished (503: unreachable).
        rethrow_typed(ApiError(error.value("type", std::string()) == "Stopped" ? 503 : 0, error));
      }
      if (observer.cancelled && observer.cancelled()) {
        throw LogRetrievalError(
            fmt::format("export {} goes on in the server; its progress: GET {}{}", id, api_.url(),
                        path),
            0, "CANCELLED");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  }

  ApiClient api_;
};

}  // namespace

std::unique_ptr<FabricClient> make_remote_client(ApiClientOptions options) {
  return std::make_unique<RemoteClient>(std::move(options));
}

}  // namespace falcon
