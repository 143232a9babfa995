// The JSON of the client's value types (client.h): what the CLI prints with --json and what the
// API answers, one writer each.
#include <nlohmann/json.hpp>

#include "falcon/client.h"
#include "model/json_fields.h"

namespace falcon {
namespace {

using nlohmann::json;

using json_fields::optional_from_json;
using json_fields::optional_to_json;

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
  json out = {
      {"accelerator", s.accelerator},
      {"decided_at", s.decided_at},
      {"explain", s.selection_id == 0 ? json(nullptr)
                                      : json("/v1/selections/" + std::to_string(s.selection_id))},
      {"policy", s.policy},
      {"probe_age_ms", std::move(ages)},
      {"probed_now", std::move(probed_now)},
      {"reason", s.reason},
      {"same_as", v.same_as == 0 ? json(nullptr) : json(v.same_as)},
      {"selected_cluster", s.selected_cluster},
      {"selection_id", s.selection_id},
      {"skipped", v.skipped},
      {"unreachable", std::move(unreachable)}};
  if (!s.not_recorded.empty()) out["not_recorded"] = s.not_recorded;
  return out;
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
  j = {{"handle", v.handle}, {"selection", optional_to_json(v.selection)}};
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
       {"to_cluster", optional_to_json(v.to_cluster)},
       {"replacement", optional_to_json(v.replacement)},
       {"t_violation", optional_to_json(v.t_violation)},
       {"t_detected", optional_to_json(v.t_detected)},
       {"t_decided", optional_to_json(v.t_decided)},
       {"t_submitted", optional_to_json(v.t_submitted)},
       {"t_admitted", optional_to_json(v.t_admitted)},
       {"t_recovered", optional_to_json(v.t_recovered)},
       {"svrt_s", optional_to_json(v.svrt_s)},
       {"phases",
        {{"detection_s", optional_to_json(v.detection_s)},
         {"decision_s", optional_to_json(v.decision_s)},
         {"submit_s", optional_to_json(v.submit_s)},
         {"admission_s", optional_to_json(v.admission_s)},
         {"stability_s", optional_to_json(v.stability_s)}}},
       {"attempts", v.attempts},
       {"outcome", v.outcome}};
}

void from_json(const json& j, Recovery& v) {
  v.id = j.at("id").get<std::string>();
  v.workload = j.at("workload").get<std::string>();
  v.kind = j.value("kind", std::string());
  v.cause = j.value("cause", std::string());
  v.from_cluster = j.value("from_cluster", std::string());
  v.to_cluster = optional_from_json<std::string>(j, "to_cluster");
  v.replacement = optional_from_json<std::string>(j, "replacement");
  v.t_violation = optional_from_json<std::string>(j, "t_violation");
  v.t_detected = optional_from_json<std::string>(j, "t_detected");
  v.t_decided = optional_from_json<std::string>(j, "t_decided");
  v.t_submitted = optional_from_json<std::string>(j, "t_submitted");
  v.t_admitted = optional_from_json<std::string>(j, "t_admitted");
  v.t_recovered = optional_from_json<std::string>(j, "t_recovered");
  v.svrt_s = optional_from_json<double>(j, "svrt_s");
  const json phases = j.value("phases", json::object());
  v.detection_s = optional_from_json<double>(phases, "detection_s");
  v.decision_s = optional_from_json<double>(phases, "decision_s");
  v.submit_s = optional_from_json<double>(phases, "submit_s");
  v.admission_s = optional_from_json<double>(phases, "admission_s");
  v.stability_s = optional_from_json<double>(phases, "stability_s");
  v.attempts = j.value("attempts", 0);
  v.outcome = j.value("outcome", std::string());
}

}  // namespace falcon
