// The JSON of the client's value types (client.h): what the CLI prints with --json and what the
// API answers, one writer each.
#include <nlohmann/json.hpp>

#include "falcon/client.h"

namespace falcon {
namespace {

using nlohmann::json;

template <typename T>
json or_null(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

template <typename T>
std::optional<T> optional_at(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return it->get<T>();
}

// The brief answer's fields (docs/serve.md, POST /v1/select).
json brief_json(const Decision& v) {
  const ClusterSelection& s = v.selection;
  json ages = json::object();
  json probed_now = json::array();
  json unreachable = json::array();
  for (const MonitoredProbe& p : v.candidate_probes) {
    ages[p.result.cluster] = p.age_ms;
    if (!p.from_cache) probed_now.push_back(p.result.cluster);
    if (!p.result.reachable) unreachable.push_back(p.result.cluster);
  }
  return {{"accelerator", s.accelerator},
          {"decided_at", s.decided_at},
          {"explain", "/v1/selections/" + std::to_string(s.selection_id)},
          {"policy", s.policy},
          {"probe_age_ms", std::move(ages)},
          {"probed_now", std::move(probed_now)},
          {"reason", s.reason},
          {"same_as", v.same_as == 0 ? json(nullptr) : json(v.same_as)},
          {"selected_cluster", s.selected_cluster},
          {"selection_id", s.selection_id},
          {"unreachable", std::move(unreachable)}};
}

}  // namespace

void to_json(json& j, const Decision& v) {
  if (v.brief) {
    j = brief_json(v);
    return;
  }
  j = v.selection;
  if (!v.candidate_probes.empty()) j["candidate_probes"] = v.candidate_probes;
}

void to_json(json& j, const Submission& v) {
  j = {{"handle", v.handle}, {"selection", or_null(v.selection)}};
}

void to_json(json& j, const Cancellation& v) {
  j = {{"workload_name", v.handle.workload_name},
       {"cluster", v.handle.cluster},
       {"cancelled", v.cancelled}};
}

void to_json(json& j, const Recovery& v) {
  j = {{"id", v.id},
       {"workload", v.workload},
       {"kind", v.kind},
       {"cause", v.cause},
       {"from_cluster", v.from_cluster},
       {"to_cluster", or_null(v.to_cluster)},
       {"replacement", or_null(v.replacement)},
       {"t_violation", or_null(v.t_violation)},
       {"t_detected", or_null(v.t_detected)},
       {"t_decided", or_null(v.t_decided)},
       {"t_submitted", or_null(v.t_submitted)},
       {"t_admitted", or_null(v.t_admitted)},
       {"t_recovered", or_null(v.t_recovered)},
       {"svrt_s", or_null(v.svrt_s)},
       {"phases",
        {{"detection_s", or_null(v.detection_s)},
         {"decision_s", or_null(v.decision_s)},
         {"submit_s", or_null(v.submit_s)},
         {"admission_s", or_null(v.admission_s)},
         {"stability_s", or_null(v.stability_s)}}},
       {"attempts", v.attempts},
       {"outcome", v.outcome}};
}

void from_json(const json& j, Recovery& v) {
  v.id = j.at("id").get<std::string>();
  v.workload = j.at("workload").get<std::string>();
  v.kind = j.value("kind", std::string());
  v.cause = j.value("cause", std::string());
  v.from_cluster = j.value("from_cluster", std::string());
  v.to_cluster = optional_at<std::string>(j, "to_cluster");
  v.replacement = optional_at<std::string>(j, "replacement");
  v.t_violation = optional_at<std::string>(j, "t_violation");
  v.t_detected = optional_at<std::string>(j, "t_detected");
  v.t_decided = optional_at<std::string>(j, "t_decided");
  v.t_submitted = optional_at<std::string>(j, "t_submitted");
  v.t_admitted = optional_at<std::string>(j, "t_admitted");
  v.t_recovered = optional_at<std::string>(j, "t_recovered");
  v.svrt_s = optional_at<double>(j, "svrt_s");
  const json phases = j.value("phases", json::object());
  v.detection_s = optional_at<double>(phases, "detection_s");
  v.decision_s = optional_at<double>(phases, "decision_s");
  v.submit_s = optional_at<double>(phases, "submit_s");
  v.admission_s = optional_at<double>(phases, "admission_s");
  v.stability_s = optional_at<double>(phases, "stability_s");
  v.attempts = j.value("attempts", 0);
  v.outcome = j.value("outcome", std::string());
}

}  // namespace falcon
