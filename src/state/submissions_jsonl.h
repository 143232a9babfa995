// Reading the old submission record file, <state_dir>/submissions.jsonl (format in
// include/falcon/workload_manager.h), for the one-time import into the state store.
#pragma once

#include <string_view>
#include <vector>

#include "falcon/state_store.h"

namespace falcon::state {

struct ParsedSubmissions {
  std::vector<SubmissionRow> rows;  // the last record of each (cluster, workload), in file order
  int superseded = 0;               // earlier records of a pair that a later one replaced
  int skipped_lines = 0;            // lines that are not a complete record (torn, damaged)
};

// Parses the file's text. A line is a record when it is a JSON object with string fields
// cluster, workload, namespace and a submitted_at that parses as a timestamp; the other fields
// default to "". Empty lines are ignored.
ParsedSubmissions parse_submissions_jsonl(std::string_view text);

}  // namespace falcon::state
