// export_logs: one query over the workload's ranks, demultiplexed into one resumable upload per
// rank, then collection_meta.json (see CloudLogRetriever::export_logs for the contract).
//
// The spec reads each rank with its own query ("按 rank 分别查询日志"); entries:list is limited to
// about 60 reads a minute per project, so here one query reads every requested rank and the
// request count is the number of pages of data (issue 5). Rank objects are finalized only after
// the last page was read; a requested rank without lines gets an empty object (so that every URI
// returned exists) and `"empty": true` in the metadata; without a rank list rank 0 is always
// reported, empty or not (the spec's layout says rank-0.log is always collected).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "falcon/clock.h"
#include "falcon/log_retriever.h"
#include "falcon/model.h"
#include "gcp/logging_client.h"
#include "gcp/storage_client.h"
#include "logs/rank_query.h"

namespace falcon::logs {

// Shares a memory budget among the chunk buffers of upload writers that open one batch at a
// time (an export learns its ranks page by page). Each chunk is a multiple of 256 KiB, at least
// 256 KiB and at most `max_chunk_bytes`. The total reserved stays within `total_bytes`, except
// that a writer never gets less than 256 KiB: once the budget is spent (more than
// total_bytes / 256 KiB writers, or writers that appear after the budget was shared out), each
// further writer adds 256 KiB.
class ChunkBudget {
 public:
  // Throws std::invalid_argument when max_chunk_bytes is not a positive multiple of 256 KiB.
  ChunkBudget(std::size_t total_bytes, std::size_t max_chunk_bytes);

  // The chunk size for each of `opening` writers opened now, when `expected` writers in all
  // (those opened before, these, and those the caller knows will follow) share the budget:
  // the smaller of total / expected and what is left / opening, rounded down to 256 KiB and
  // clamped as above. Reserves it.
  std::size_t allocate(std::size_t expected, std::size_t opening);
  std::size_t reserved() const { return reserved_; }

 private:
  std::size_t total_;
  std::size_t max_chunk_;
  std::size_t reserved_ = 0;
};

// `gs://bucket/path`, `gs://bucket/path/` and `gs://bucket` as the bucket and the object-name
// prefix ("path/" or ""). Throws LogRetrievalError (INVALID_ARGUMENT) for anything else.
std::pair<std::string, std::string> parse_export_destination(const std::string& gcs_dest);

// What went to one rank's object, for the metadata.
struct RankObjectSummary {
  std::int64_t lines = 0;
  std::int64_t bytes = 0;
  std::int64_t first_nanos = 0;  // valid when lines > 0
  std::int64_t last_nanos = 0;
};

// collection_meta.json of an export (the same fields whatever the path): workload, cluster,
// project, cluster_id, namespace, slice, ranks_requested, exported_ranks, empty_ranks, ranks
// (uri, lines, bytes, empty, first/last timestamp), lines, bytes, first/last timestamp, filter,
// exported_at, then every member of `path` (via, logging_read_calls, ...).
nlohmann::json export_metadata(const RankQuery& query, const LogFilter& filter,
                               const LogExportResult& result,
                               const std::map<int, RankObjectSummary>& ranks,
                               const nlohmann::json& path);

// The name of the metadata object under an export's prefix.
inline constexpr const char* kMetadataObject = "collection_meta.json";
// The content type of rank objects.
inline constexpr const char* kLogContentType = "text/plain; charset=utf-8";

// What an export uses, owned by the retriever.
struct ExportClients {
  const gcp::LoggingClient& logging;
  const gcp::StorageClient& storage;
  const Clock& clock;               // exported_at
  std::size_t buffer_bytes = 0;     // all ranks' chunk buffers together (ChunkBudget)
  std::size_t max_chunk_bytes = 0;  // one rank's chunk at most; a positive multiple of 256 KiB
};

// One export, in four steps: read and route every page (opening a rank's upload at its first
// line), finish the uploads, write the metadata. Not thread-safe; run() once.
class ExportSession {
 public:
  // `query` says what is exported (its ranks() null: every rank of the slice found, and rank 0
  // always); `filter` is recorded in the metadata. Throws LogRetrievalError (INVALID_ARGUMENT)
  // for a destination that is not gs://BUCKET[/PATH]. No I/O.
  ExportSession(ExportClients clients, const RankQuery& query, const LogFilter& filter,
                const std::string& gcs_dest, std::function<void(const ExportProgress&)> progress);

  // The export. Blocks. On any failure every upload still open is cancelled, no metadata is
  // written, and the LogRetrievalError names the workload and the destination.
  LogExportResult run();
  // Why the read path was taken: collection_meta.json's via.reason.
  void set_reason(std::string reason) { via_reason_ = std::move(reason); }

 private:
  // One rank of an export: where it goes and what went there.
  struct RankExport {
    std::string object;
    std::optional<gcp::ResumableUploadWriter> writer;  // opened at the rank's first line
    std::int64_t lines = 0;
    std::int64_t bytes = 0;
    std::int64_t first_nanos = 0;  // valid when lines > 0
    std::int64_t last_nanos = 0;
  };

  // Reads every page of the query, each entry into its rank's upload.
  void read_and_route();
  // Starts the uploads of ranks seen for the first time, their chunks sized by the budget.
  void open(const std::vector<int>& ranks);
  // Deletes a previous export's metadata, finishes every upload and writes the requested ranks
  // without lines as empty objects.
  void finish();
  // collection_meta.json, the last object written.
  void write_metadata();
  // Cancels the uploads still open; best effort.
  void abort() noexcept;

  std::string object_of(int rank) const;

  ExportClients clients_;
  const RankQuery& query_;
  const LogFilter& filter_;
  std::function<void(const ExportProgress&)> progress_;
  std::string bucket_;
  std::string prefix_;
  ChunkBudget budget_;
  std::map<int, RankExport> ranks_;
  std::int64_t pages_ = 0;
  std::string via_reason_ = "asked for";
  LogExportResult result_;
};

}  // namespace falcon::logs
