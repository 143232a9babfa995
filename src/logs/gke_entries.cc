#include "logs/gke_entries.h"

#include <charconv>

#include <fmt/format.h>

namespace falcon::logs {
namespace {

// A non-negative decimal index without sign or leading '+'; nullopt otherwise or on overflow.
std::optional<int> parse_index(std::string_view text) {
  if (text.empty() || text.size() > 9) return std::nullopt;
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

const std::string* find_label(const gcp::LogEntry& entry, const char* key) {
  const auto it = entry.labels.find(key);
  return it == entry.labels.end() ? nullptr : &it->second;
}

}  // namespace

std::string pod_name_prefix(std::string_view workload, int slice, int worker) {
  return fmt::format("{}-slice-job-{}-{}-", workload, slice, worker);
}

std::string slice_pod_name_prefix(std::string_view workload, int slice) {
  return fmt::format("{}-slice-job-{}-", workload, slice);
}

std::string workload_pod_name_prefix(std::string_view workload) {
  return fmt::format("{}-slice-job-", workload);
}

std::optional<PodIndex> parse_pod_name(std::string_view pod_name, std::string_view workload) {
  constexpr std::string_view kJob = "-slice-job-";
  if (!pod_name.starts_with(workload)) return std::nullopt;
  std::string_view rest = pod_name.substr(workload.size());
  if (!rest.starts_with(kJob)) return std::nullopt;
  rest.remove_prefix(kJob.size());
  // <slice>-<worker>-<suffix>
  const auto first = rest.find('-');
  if (first == std::string_view::npos) return std::nullopt;
  const auto second = rest.find('-', first + 1);
  if (second == std::string_view::npos) return std::nullopt;
  const auto slice = parse_index(rest.substr(0, first));
  const auto worker = parse_index(rest.substr(first + 1, second - first - 1));
  const std::string_view suffix = rest.substr(second + 1);
  if (!slice || !worker || suffix.empty()) return std::nullopt;
  for (const char c : suffix) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return std::nullopt;
  }
  return PodIndex{*slice, *worker};
}

std::optional<int> rank_of_labels(const std::string_view* name, const std::string_view* job_index,
                                  const std::string_view* completion,
                                  const std::string_view* pod_name, std::string_view workload,
                                  int slice) {
  if (name && job_index && completion) {
    if (*name != workload) return std::nullopt;
    const auto s = parse_index(*job_index);
    const auto w = parse_index(*completion);
    if (!s || !w || *s != slice) return std::nullopt;
    return *w;
  }
  // Partly labelled: whatever label is there must still agree.
  if (name && *name != workload) return std::nullopt;
  if (!pod_name) return std::nullopt;
  const auto index = parse_pod_name(*pod_name, workload);
  if (!index || index->slice != slice) return std::nullopt;
  return index->worker;
}

std::optional<int> rank_of_entry(const gcp::LogEntry& entry, std::string_view workload, int slice) {
  const auto view = [](const std::string* s) -> std::optional<std::string_view> {
    if (!s) return std::nullopt;
    return std::string_view(*s);
  };
  const auto name = view(find_label(entry, kJobsetNameLabel));
  const auto job_index = view(find_label(entry, kJobIndexLabel));
  const auto completion = view(find_label(entry, kCompletionIndexLabel));
  std::optional<std::string_view> pod;
  if (const auto it = entry.resource_labels.find("pod_name"); it != entry.resource_labels.end()) {
    pod = it->second;
  }
  const auto ptr = [](const std::optional<std::string_view>& v) { return v ? &*v : nullptr; };
  return rank_of_labels(ptr(name), ptr(job_index), ptr(completion), ptr(pod), workload, slice);
}

bool belongs_to_workload(const gcp::LogEntry& entry, std::string_view workload) {
  if (const std::string* name = find_label(entry, kJobsetNameLabel)) return *name == workload;
  const auto pod = entry.resource_labels.find("pod_name");
  return pod != entry.resource_labels.end() && parse_pod_name(pod->second, workload).has_value();
}

std::string log_line(const gcp::LogEntry& entry) {
  std::string_view text = entry.message;
  if (text.ends_with('\n')) {
    text.remove_suffix(1);
    if (text.ends_with('\r')) text.remove_suffix(1);
  }
  return std::string(text);
}

}  // namespace falcon::logs
