#include "serve/select_answer.h"

#include "model/json_text.h"

namespace falcon::serve {

void append_json(std::string& out, const MonitoredProbe& v) {
  out += "{\"age_ms\":";
  append_json_int(out, v.age_ms);
  out += ",\"backend\":";
  append_json_string(out, v.backend);
  out += ",\"consecutive_failures\":";
  append_json_int(out, v.consecutive_failures);
  out += ",\"duration_ms\":";
  append_json_int(out, v.duration_ms);
  out += ",\"from_cache\":";
  out += v.from_cache ? "true" : "false";
  out += ",\"next_probe_at\":";
  if (v.next_probe_at.empty()) {
    out += "null";
  } else {
    append_json_string(out, v.next_probe_at);
  }
  out += ",\"result\":";
  falcon::append_json(out, v.result);
  out += '}';
}

std::string select_answer_json(const Decision& outcome) {
  const ClusterSelection& s = outcome.selection;
  std::string out;
  out.reserve(256 + s.probe_results.size() * 160 + s.scores.size() * 900 +
              outcome.candidate_probes.size() * 320);
  out += "{\"accelerator\":";
  append_json_string(out, s.accelerator);
  out += ",\"candidate_probes\":[";
  for (std::size_t i = 0; i < outcome.candidate_probes.size(); ++i) {
    if (i > 0) out += ',';
    append_json(out, outcome.candidate_probes[i]);
  }
  out += "],\"candidates\":[";
  for (std::size_t i = 0; i < s.candidates.size(); ++i) {
    if (i > 0) out += ',';
    append_json_string(out, s.candidates[i]);
  }
  out += "],\"decided_at\":";
  append_json_string(out, s.decided_at);
  if (!s.not_recorded.empty()) {
    out += ",\"not_recorded\":";
    append_json_string(out, s.not_recorded);
  }
  out += ",\"policy\":";
  append_json_string(out, s.policy);
  out += ",\"probe_results\":[";
  for (std::size_t i = 0; i < s.probe_results.size(); ++i) {
    if (i > 0) out += ',';
    falcon::append_json(out, s.probe_results[i]);
  }
  out += "],\"reason\":";
  append_json_string(out, s.reason);
  out += ",\"scores\":";
  append_json_scores(out, s.scores);
  out += ",\"selected_cluster\":";
  append_json_string(out, s.selected_cluster);
  out += ",\"selection_id\":";
  append_json_int(out, s.selection_id);
  out += "}\n";
  return out;
}

std::string brief_select_answer_json(const Decision& outcome) {
  const ClusterSelection& s = outcome.selection;
  const auto& candidates = outcome.candidate_probes;
  std::string out;
  out.reserve(320 + s.reason.size() + candidates.size() * 16);
  out += "{\"accelerator\":";
  append_json_string(out, s.accelerator);
  out += ",\"decided_at\":";
  append_json_string(out, s.decided_at);
  out += ",\"explain\":";
  if (s.selection_id == 0) {
    out += "null";
  } else {
    out += "\"/v1/selections/";
    append_json_int(out, s.selection_id);
    out += '"';
  }
  if (!s.not_recorded.empty()) {
    out += ",\"not_recorded\":";
    append_json_string(out, s.not_recorded);
  }
  out += ",\"policy\":";
  append_json_string(out, s.policy);
  out += ",\"probe_age_ms\":{";
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (i > 0) out += ',';
    append_json_string(out, candidates[i].result.cluster);
    out += ':';
    append_json_int(out, candidates[i].age_ms);
  }
  // The candidates `keep` picks, as a list of names.
  const auto names = [&](const char* key, auto keep) {
    out += key;
    bool first = true;
    for (const MonitoredProbe& p : candidates) {
      if (!keep(p)) continue;
      if (!first) out += ',';
      first = false;
      append_json_string(out, p.result.cluster);
    }
    out += ']';
  };
  names("},\"probed_now\":[", [](const MonitoredProbe& p) { return !p.from_cache; });
  out += ",\"reason\":";
  append_json_string(out, s.reason);
  out += ",\"same_as\":";
  if (outcome.same_as == 0) {
    out += "null";
  } else {
    append_json_int(out, outcome.same_as);
  }
  out += ",\"selected_cluster\":";
  append_json_string(out, s.selected_cluster);
  out += ",\"selection_id\":";
  append_json_int(out, s.selection_id);
  out += ",\"skipped\":{";
  bool first = true;
  for (const auto& [cluster, why] : outcome.skipped) {
    if (!first) out += ',';
    first = false;
    append_json_string(out, cluster);
    out += ':';
    append_json_string(out, why);
  }
  out += '}';
  names(",\"unreachable\":[", [](const MonitoredProbe& p) { return !p.result.reachable; });
  out += "}\n";
  return out;
}

}  // namespace falcon::serve
