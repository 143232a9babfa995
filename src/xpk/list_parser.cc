#include "xpk/list_parser.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "falcon/model.h"

namespace falcon::xpk {
namespace {

constexpr std::string_view kXpkPrefix = "[XPK] ";
constexpr std::string_view kListMarker = "Workload List Output:";
constexpr std::string_view kVersionMarker = "[XPK] Starting xpk v";
constexpr std::string_view kFirstHeader = "Jobset Name";

enum class Column {
  kJobsetName,
  kCreatedTime,
  kPriority,
  kVmsNeeded,
  kVmsRunning,
  kVmsDone,
  kStatus,
  kStatusMessage,
  kStatusTime,
  kOther,  // a column this parser does not know (a later xpk); its offset still bounds others
};

// Both spellings: `TPU VMs ...` (<= v1.8) and `TPU/GPU VMs ...` (>= v1.9).
Column column_of(std::string_view header) {
  static constexpr std::array<std::pair<std::string_view, Column>, 12> kNames = {{
      {"Jobset Name", Column::kJobsetName},
      {"Created Time", Column::kCreatedTime},
      {"Priority", Column::kPriority},
      {"TPU VMs Needed", Column::kVmsNeeded},
      {"TPU/GPU VMs Needed", Column::kVmsNeeded},
      {"TPU VMs Running/Ran", Column::kVmsRunning},
      {"TPU/GPU VMs Running/Ran", Column::kVmsRunning},
      {"TPU VMs Done", Column::kVmsDone},
      {"TPU/GPU VMs Done", Column::kVmsDone},
      {"Status", Column::kStatus},
      {"Status Message", Column::kStatusMessage},
      {"Status Time", Column::kStatusTime},
  }};
  for (const auto& [name, column] : kNames) {
    if (name == header) return column;
  }
  return Column::kOther;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// A cell of the header or of a row, in code points (both renderers pad by code points:
// Python's '{:<w}' and Go's tabwriter alike).
struct Cell {
  std::size_t start;  // code point index
  std::string_view text;
};

// Byte offset of every code point of `line`, plus line.size() at the end.
std::vector<std::size_t> code_point_offsets(std::string_view line) {
  std::vector<std::size_t> offsets;
  offsets.reserve(line.size() + 1);
  for (std::size_t i = 0; i < line.size(); ++i) {
    if ((static_cast<unsigned char>(line[i]) & 0xC0) != 0x80) offsets.push_back(i);
  }
  offsets.push_back(line.size());
  return offsets;
}

// Cells separated by runs of at least `min_gap` spaces.
std::vector<Cell> split_cells(std::string_view line, std::size_t min_gap) {
  const auto offsets = code_point_offsets(line);
  std::vector<Cell> cells;
  std::size_t cp = 0;
  const std::size_t n = offsets.size() - 1;
  while (cp < n) {
    while (cp < n && line[offsets[cp]] == ' ') ++cp;
    if (cp >= n) break;
    const std::size_t start = cp;
    std::size_t end = cp;  // one past the last non-space code point of the cell
    while (cp < n) {
      if (line[offsets[cp]] != ' ') {
        end = ++cp;
        continue;
      }
      std::size_t gap = cp;
      while (gap < n && line[offsets[gap]] == ' ') ++gap;
      if (gap - cp >= min_gap || gap >= n) {
        cp = gap;
        break;
      }
      cp = gap;
    }
    cells.push_back({start, line.substr(offsets[start], offsets[end] - offsets[start])});
  }
  return cells;
}

struct Layout {
  std::vector<std::size_t> starts;  // code point offset of each column
  std::vector<Column> columns;
};

// Slices `line` at the header's offsets. When the row does not line up with the header (a
// cell boundary falling inside a word), it falls back to splitting on runs of 3+ spaces, the
// minimum gap of both renderers, if that yields exactly one cell per column.
std::vector<std::string_view> slice_row(std::string_view line, const Layout& layout) {
  const auto offsets = code_point_offsets(line);
  const std::size_t n = offsets.size() - 1;
  std::vector<std::string_view> cells;
  bool aligned = true;
  for (std::size_t k = 0; k < layout.starts.size(); ++k) {
    const std::size_t begin = std::min(layout.starts[k], n);
    const std::size_t end = k + 1 < layout.starts.size() ? std::min(layout.starts[k + 1], n) : n;
    if (k > 0 && begin < n && begin > 0 && line[offsets[begin - 1]] != ' ') aligned = false;
    cells.push_back(trim(line.substr(offsets[begin], offsets[end] - offsets[begin])));
  }
  if (!aligned) {
    auto split = split_cells(line, 3);
    if (split.size() == layout.starts.size()) {
      for (std::size_t k = 0; k < split.size(); ++k) cells[k] = split[k].text;
    }
  }
  return cells;
}

ListRow make_row(const std::vector<std::string_view>& cells, const Layout& layout) {
  ListRow row;
  for (std::size_t k = 0; k < cells.size(); ++k) {
    std::string value(cells[k].empty() ? kNone : cells[k]);
    switch (layout.columns[k]) {
      case Column::kJobsetName:
        row.jobset_name = std::move(value);
        break;
      case Column::kCreatedTime:
        row.created_time = std::move(value);
        break;
      case Column::kPriority:
        row.priority = std::move(value);
        break;
      case Column::kVmsNeeded:
        row.vms_needed = std::move(value);
        break;
      case Column::kVmsRunning:
        row.vms_running = std::move(value);
        break;
      case Column::kVmsDone:
        row.vms_done = std::move(value);
        break;
      case Column::kStatus:
        row.status = std::move(value);
        break;
      case Column::kStatusMessage:
        row.status_message = std::move(value);
        break;
      case Column::kStatusTime:
        row.status_time = std::move(value);
        break;
      case Column::kOther:
        break;
    }
  }
  // A column missing from the header reads as an empty cell.
  for (std::string* cell : {&row.created_time, &row.priority, &row.vms_needed, &row.vms_running,
                            &row.vms_done, &row.status, &row.status_message, &row.status_time}) {
    if (cell->empty()) *cell = std::string(kNone);
  }
  return row;
}

bool is_number(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

std::vector<std::string_view> split_output_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t begin = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == '\n' || text[i] == '\r') {
      if (i > begin) lines.push_back(text.substr(begin, i - begin));
      begin = i + 1;
    }
  }
  return lines;
}

std::optional<WorkloadList> parse_workload_list(std::string_view stdout_text) {
  WorkloadList list;
  bool saw_marker = false;
  std::optional<Layout> layout;
  for (std::string_view line : split_output_lines(stdout_text)) {
    if (starts_with(line, kXpkPrefix)) {
      if (starts_with(line, kVersionMarker)) {
        list.xpk_version = std::string(trim(line.substr(kVersionMarker.size())));
      }
      if (trim(line.substr(kXpkPrefix.size())) == kListMarker) saw_marker = true;
      if (layout) break;  // the table ends at the next [XPK] line
      continue;
    }
    if (layout) {
      if (trim(line).empty()) continue;
      const auto cells = slice_row(line, *layout);
      list.rows.push_back(make_row(cells, *layout));
      continue;
    }
    if (!starts_with(line, kFirstHeader)) continue;  // bytes reprs, banners, other noise
    Layout l;
    for (const Cell& cell : split_cells(line, 2)) {
      l.starts.push_back(cell.start);
      l.columns.push_back(column_of(cell.text));
    }
    layout = std::move(l);
    list.saw_header = true;
  }
  if (!saw_marker && !list.saw_header) return std::nullopt;
  return list;
}

std::string map_row_state(const ListRow& row) {
  if (row.status == "Finished") {
    return lower(row.status_message).find("failed") != std::string::npos ? kStateFailed
                                                                         : kStateCompleted;
  }
  if (is_number(row.vms_running)) return kStateRunning;
  static constexpr std::array<std::string_view, 7> kWaiting = {
      "QuotaReserved", "Admitted", "Evicted", "Unknown", "Requeued", "Preempted", kNone};
  if (row.vms_running == kNone &&
      std::find(kWaiting.begin(), kWaiting.end(), row.status) != kWaiting.end()) {
    return kStateQueued;
  }
  return kStateUnknown;
}

}  // namespace falcon::xpk
