#include "state/submissions_jsonl.h"

#include <map>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "util/time_format.h"

namespace falcon::state {
namespace {

std::optional<SubmissionRow> record_from_line(std::string_view line) {
  const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  auto text = [&](const char* key) -> std::optional<std::string> {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string()) return std::nullopt;
    return it->get<std::string>();
  };
  const auto cluster = text("cluster");
  const auto workload = text("workload");
  const auto ns = text("namespace");
  const auto submitted = text("submitted_at");
  if (!cluster || !workload || !ns || !submitted || cluster->empty() || workload->empty() ||
      !parse_rfc3339(*submitted)) {
    return std::nullopt;
  }
  SubmissionRow r;
  r.handle.cluster = *cluster;
  r.handle.workload_name = *workload;
  r.handle.namespace_ = *ns;
  r.handle.submitted_at = *submitted;
  r.accelerator_type = text("accelerator_type").value_or("");
  r.device_class = text("device_class").value_or("");
  r.cluster_id = text("cluster_id").value_or("");
  r.project = text("project").value_or("");
  r.zone = text("zone").value_or("");
  r.docker_image = text("docker_image").value_or("");
  r.priority = text("priority").value_or("");
  return r;
}

}  // namespace

ParsedSubmissions parse_submissions_jsonl(std::string_view text) {
  ParsedSubmissions out;
  std::map<std::pair<std::string, std::string>, std::size_t> index;  // pair -> rows position
  while (!text.empty()) {
    const auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    auto rec = record_from_line(line);
    if (!rec) {
      ++out.skipped_lines;
      continue;
    }
    auto key = std::make_pair(rec->handle.cluster, rec->handle.workload_name);
    if (auto it = index.find(key); it != index.end()) {
      out.rows[it->second] = std::move(*rec);
      ++out.superseded;
    } else {
      index.emplace(std::move(key), out.rows.size());
      out.rows.push_back(std::move(*rec));
    }
  }
  return out;
}

}  // namespace falcon::state
