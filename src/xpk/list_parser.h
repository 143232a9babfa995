// Reading `xpk workload list` (DESIGN D4, reference/xpk.md §1.2-1.5).
//
// xpk prints its log lines to stdout with an `[XPK] ` prefix; the table follows the line
// `[XPK] Workload List Output:` without any prefix, and ends at the next `[XPK] ` line. Three
// renderings exist:
//   <= v1.7   kubectl custom-columns (tabwriter): `TPU VMs ...` headers, >= 3 spaces between
//             columns, last column not padded; with no workloads, *nothing* (not even a header).
//   v1.8      xpk's own renderer, `TPU VMs ...` headers.
//   >= v1.9   xpk's own renderer, `TPU/GPU VMs ...` headers; every cell padded (lines may end in
//             spaces), columns joined by exactly 3 spaces, `<none>` for empty cells, and only the
//             header when there are no workloads.
// The table is sliced at the header's column offsets, because `Status Message` holds spaces.
// Lines are split on both `\n` and `\r` (xpk's progress lines end in `\r`).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace falcon::xpk {

// The text xpk prints for an empty cell.
inline constexpr std::string_view kNone = "<none>";

// One table row, cells as printed (trimmed), `<none>` kept verbatim.
struct ListRow {
  std::string jobset_name;
  std::string created_time;
  std::string priority;
  std::string vms_needed;
  std::string vms_running;  // "TPU VMs Running/Ran": a number once quota is assigned
  std::string vms_done;
  std::string status;  // Admitted | Evicted | QuotaReserved | Finished | Unknown | <none> | ...
  std::string status_message;
  std::string status_time;
  bool operator==(const ListRow&) const = default;
};

struct WorkloadList {
  std::vector<ListRow> rows;
  bool saw_header = false;                 // false: the <= v1.7 "no workloads" output
  std::optional<std::string> xpk_version;  // from `[XPK] Starting xpk v1.13.1`, without the v
};

// Parses the stdout of a successful `xpk workload list`. Returns nullopt when the output holds
// neither the `Workload List Output:` marker nor a table header: that is not a list (an
// unexpected xpk version, or a wrapper that printed something else), and callers must not read
// it as "no workloads". Never throws.
std::optional<WorkloadList> parse_workload_list(std::string_view stdout_text);

// The state of a row (reference §1.5, first match wins):
//   Finished and "failed" in the lower-cased message    -> FAILED
//   Finished                                            -> COMPLETED
//   Running/Ran is a number (quota assigned; CPU shows 0) -> RUNNING
//   Status in {QuotaReserved, Admitted, Evicted, Unknown, Requeued, Preempted, <none>}
//     with Running/Ran `<none>`                          -> QUEUED
//   anything else                                        -> UNKNOWN
std::string map_row_state(const ListRow& row);

// Splits on `\n` and `\r`, dropping empty lines.
std::vector<std::string_view> split_output_lines(std::string_view text);

}  // namespace falcon::xpk
