// Pieces of real xpk's output: the `workload list` table in both styles, xpk's status filters,
// and the way xpk prints a captured command's failure (a Python bytes repr between rows of
// stars). See reference/xpk.md §1.2-1.4.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "fleet/fleet_config.h"
#include "fleet/simulator.h"

namespace falcon::fleet {

// The table as xpk hands it to `xpk_print('Workload List Output:\n' + table)`.
//  v1.9: header `Jobset Name   Created Time   Priority   TPU/GPU VMs Needed ...`, every cell
//        padded with '{:<w}' (the last column too) and joined by three spaces, `<none>` for
//        empty cells; lines joined by '\n' with no trailing newline; only the header when
//        there are no rows.
//  v1.7: kubectl's custom-columns tabwriter (minwidth 10, padding 3, last column unpadded),
//        header `... TPU VMs Needed   TPU VMs Running/Ran   TPU VMs Done ...`; every line ends
//        in '\n'; the empty string when there are no rows (kubectl prints nothing).
std::string render_workload_table(const std::vector<WorkloadRow>& rows, TableStyle style);

// xpk's _filter_workload for --filter-by-status (v1.13.1), including its quirks: SUCCESSFUL
// needs "finished" in the message (so never matches `jobset completed successfully`), RUNNING
// needs Admitted/Evicted with a count, QUEUED takes Admitted/Evicted/QuotaReserved rows with no
// count. Unknown filters match everything.
bool matches_status_filter(const WorkloadRow& row, std::string_view filter);

// --filter-by-job: a substring test (xpk >= 1.8) or an awk-style extended regex search (older).
// An invalid regex matches nothing.
bool matches_job_filter(const WorkloadRow& row, const std::string& filter, bool substring);

// Python's repr() of `text` as bytes: b'...' (or b"..." when it holds ' and no "), with \n, \r,
// \t, \\ and non-printable bytes escaped.
std::string python_bytes_repr(std::string_view text);

// The lines xpk prints for a captured command that failed:
//   [XPK] Task <task> failed with <rc>          (run_command_for_value)
//   [XPK] ******** (80 stars)
//   [XPK] b'<output>'
//   [XPK] ********
std::string captured_failure(const std::string& task, int rc, std::string_view output);

}  // namespace falcon::fleet
