// One LogEntry of a staged NDJSON object (what entries:copy and a Log Router sink write to Cloud
// Storage: one LogEntry JSON object per line), decoded only as far as an export needs: the
// rank it belongs to, its timestamp and insertId, and its line as entries:list's reader would
// print it (gke_entries.h log_line). Whether it belongs to the export is decided exactly as for
// the entries entries:list returns for the same query (rank_query.h), plus the checks the server
// makes for entries:list, since a sink archive holds every log of the project.
//
// Text entries (textPayload) are decoded by simdjson's on-demand parser without building a
// document; anything else (jsonPayload, protoPayload) by nlohmann::json, as the Logging client
// does, so that the line is the same bytes either way.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "logs/rank_query.h"

namespace falcon::logs {

// Views into the decoder's buffers: valid until its next decode().
struct StagedEntry {
  int rank = 0;
  std::int64_t timestamp_nanos = 0;
  std::string_view insert_id;
  std::string_view line;  // without its trailing newline
};

// Decodes lines for one query. Not thread-safe: one per thread (it keeps parser buffers).
class StagedEntryDecoder {
 public:
  explicit StagedEntryDecoder(const RankQuery& query);
  ~StagedEntryDecoder();
  StagedEntryDecoder(const StagedEntryDecoder&) = delete;
  StagedEntryDecoder& operator=(const StagedEntryDecoder&) = delete;

  // The entry when `json_line` is a LogEntry of the query (its workload, slice and wanted ranks,
  // resource type k8s_container, project, cluster, namespace, and stamped at or after the lower
  // bound), else nullopt. Blank lines are nullopt. Throws std::invalid_argument saying what is
  // wrong when the line is not a JSON object.
  std::optional<StagedEntry> decode(std::string_view json_line);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace falcon::logs
