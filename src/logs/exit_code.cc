#include "logs/exit_code.h"

#include <charconv>

#include "logs/gke_entries.h"

namespace falcon::logs {

std::optional<int> parse_exit_code_line(std::string_view line) {
  constexpr std::string_view kPrefix = "EXIT_CODE=";
  if (!line.starts_with(kPrefix)) return std::nullopt;
  line.remove_prefix(kPrefix.size());
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r' || line.back() == ' ' ||
                           line.back() == '\t')) {
    line.remove_suffix(1);
  }
  if (line.empty() || line.size() > 3) return std::nullopt;
  int code = 0;
  const auto [end, error] = std::from_chars(line.data(), line.data() + line.size(), code);
  if (error != std::errc() || end != line.data() + line.size() || code < 0 || code > 255) {
    return std::nullopt;
  }
  return code;
}

std::optional<int> failure_exit_code(const std::vector<gcp::LogEntry>& entries,
                                     std::string_view workload) {
  std::optional<int> first;
  for (const gcp::LogEntry& entry : entries) {
    if (!belongs_to_workload(entry, workload)) continue;
    const std::optional<int> code = parse_exit_code_line(entry.message);
    if (!code || *code == 0) continue;
    if (*code != 143 && *code != 137) return code;
    if (!first) first = code;
  }
  return first;
}

}  // namespace falcon::logs
