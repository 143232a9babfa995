#include "fleet/xpk_output.h"

#include <algorithm>
#include <cctype>
#include <regex>

#include <fmt/format.h>

namespace falcon::fleet {
namespace {

std::string cell(const std::optional<std::string>& v) { return v ? *v : "<none>"; }
std::string cell(const std::optional<int>& v) { return v ? std::to_string(*v) : "<none>"; }

std::vector<std::vector<std::string>> cells(const std::vector<WorkloadRow>& rows,
                                            TableStyle style) {
  std::vector<std::vector<std::string>> out;
  if (style == TableStyle::kV19) {
    out.push_back({"Jobset Name", "Created Time", "Priority", "TPU/GPU VMs Needed",
                   "TPU/GPU VMs Running/Ran", "TPU/GPU VMs Done", "Status", "Status Message",
                   "Status Time"});
  } else {
    out.push_back({"Jobset Name", "Created Time", "Priority", "TPU VMs Needed",
                   "TPU VMs Running/Ran", "TPU VMs Done", "Status", "Status Message",
                   "Status Time"});
  }
  for (const auto& r : rows) {
    out.push_back({r.name.empty() ? "<none>" : r.name, r.created,
                   r.priority.empty() ? "<none>" : r.priority, cell(r.vms_needed),
                   cell(r.vms_running), cell(r.vms_done), cell(r.status), cell(r.message),
                   cell(r.status_time)});
  }
  return out;
}

}  // namespace

std::string render_workload_table(const std::vector<WorkloadRow>& rows, TableStyle style) {
  if (style == TableStyle::kV17 && rows.empty()) return "";
  const auto table = cells(rows, style);
  const std::size_t columns = table.front().size();
  std::vector<std::size_t> widths(columns, 0);
  for (const auto& line : table) {
    for (std::size_t i = 0; i < columns; ++i) widths[i] = std::max(widths[i], line[i].size());
  }
  std::string out;
  for (std::size_t r = 0; r < table.size(); ++r) {
    const auto& line = table[r];
    std::string text;
    for (std::size_t i = 0; i < columns; ++i) {
      if (style == TableStyle::kV19) {
        if (i > 0) text += "   ";
        text += fmt::format("{:<{}}", line[i], widths[i]);
      } else if (i + 1 < columns) {
        // Go's tabwriter: cell width + padding 3, at least minwidth 10.
        text += fmt::format("{:<{}}", line[i], std::max<std::size_t>(widths[i] + 3, 10));
      } else {
        text += line[i];
      }
    }
    out += text;
    if (style == TableStyle::kV17) {
      out += '\n';
    } else if (r + 1 < table.size()) {
      out += '\n';
    }
  }
  return out;
}

bool matches_status_filter(const WorkloadRow& row, std::string_view filter) {
  const std::string status = row.status.value_or("");
  std::string message = row.message.value_or("");
  std::transform(message.begin(), message.end(), message.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const int running = row.vms_running.value_or(0);
  if (filter == "RUNNING") return (status == "Admitted" || status == "Evicted") && running > 0;
  if (filter == "QUEUED") {
    return (status == "Admitted" || status == "Evicted" || status == "QuotaReserved") &&
           running == 0;
  }
  if (filter == "FINISHED") return status == "Finished";
  if (filter == "FAILED")
    return status == "Finished" && message.find("failed") != std::string::npos;
  if (filter == "SUCCESSFUL") {
    return status == "Finished" && message.find("finished") != std::string::npos;
  }
  return true;
}

bool matches_job_filter(const WorkloadRow& row, const std::string& filter, bool substring) {
  if (substring) return row.name.find(filter) != std::string::npos;
  try {
    return std::regex_search(row.name, std::regex(filter, std::regex::extended));
  } catch (const std::regex_error&) {
    return false;
  }
}

std::string python_bytes_repr(std::string_view text) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out = "b";
  out += quote;
  for (unsigned char c : text) {
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\\':
        out += "\\\\";
        break;
      default:
        if (c == static_cast<unsigned char>(quote)) {
          out += '\\';
          out += static_cast<char>(c);
        } else if (c < 0x20 || c >= 0x7f) {
          out += fmt::format("\\x{:02x}", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += quote;
  return out;
}

std::string captured_failure(const std::string& task, int rc, std::string_view output) {
  const std::string stars(80, '*');
  return fmt::format("[XPK] Task {} failed with {}\n[XPK] {}\n[XPK] {}\n[XPK] {}\n", task, rc,
                     stars, python_bytes_repr(output), stars);
}

}  // namespace falcon::fleet
