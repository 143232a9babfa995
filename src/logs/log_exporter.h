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
#include <functional>
#include <string>

#include "falcon/log_retriever.h"
#include "falcon/model.h"
#include "logs/rank_query.h"
#include "logs/retriever_options.h"

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

// The export itself. `query` selects the ranks (its ranks() null: every rank of the slice found,
// and rank 0 always). `filter` is recorded in the metadata. Blocks; throws LogRetrievalError.
LogExportResult export_ranks(const RetrieverOptions& options, const ClusterConfig& cluster,
                             const std::string& workload, const std::string& namespace_, int slice,
                             const RankQuery& query, const LogFilter& filter,
                             const std::string& gcs_dest,
                             const std::function<void(const ExportProgress&)>& progress);

}  // namespace falcon::logs
