// The export paths past the read quota (issue 28, docs/log-export.md): entries:copy into a
// staging prefix, and a Log Router sink's archive; and how `auto` chooses among them and read.
// Both end in export_staged: the staged NDJSON objects split per rank (rank_splitter.h) into the
// same rank objects and collection_meta.json as the read path (log_exporter.h).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "falcon/clock.h"
#include "falcon/config.h"
#include "falcon/log_retriever.h"
#include "gcp/logging_admin_client.h"
#include "gcp/storage_client.h"
#include "logs/rank_query.h"
#include "logs/rank_splitter.h"

namespace falcon::logs {

// What the staged paths use, owned by the retriever.
struct StagedExportClients {
  const gcp::LoggingAdminClient& admin;
  const gcp::StorageClient& storage;
  const Clock& clock;
  const GcpSettings& settings;      // log_archive*, log_copy*
  std::size_t max_chunk_bytes = 0;  // each rank object's upload chunk
  SplitterOptions splitter;
};

struct PathChoice {
  ExportVia via = ExportVia::kRead;
  std::string reason;  // one sentence: why this path (and, for auto, why not the others)
};

// The path of `how.via`: kAuto resolved (sink when the archive covers the window, else copy
// when settings.log_copy and log_copy_staging allow it, else read), the others as asked, each
// with its reason. For auto, checks the archive with one object listing per log id. Throws
// LogRetrievalError only for a listing that fails other than 403/404.
PathChoice choose_export_path(const StagedExportClients& clients, const RankQuery& query,
                              const LogFilter& filter, const ExportOptions& how);

// `--via copy` (see CloudLogRetriever::export_logs). `reason` goes to the metadata.
LogExportResult export_by_copy(const StagedExportClients& clients, const RankQuery& query,
                               const LogFilter& filter, const std::string& gcs_dest,
                               const ExportOptions& how, const std::string& reason,
                               const std::function<void(const ExportProgress&)>& progress);

// `--via sink`.
LogExportResult export_by_sink(const StagedExportClients& clients, const RankQuery& query,
                               const LogFilter& filter, const std::string& gcs_dest,
                               const ExportOptions& how, const std::string& reason,
                               const std::function<void(const ExportProgress&)>& progress);

// Splits `objects` of `bucket` into the export's rank objects and writes collection_meta.json
// with `path` merged in (plus staged_objects, duplicates_dropped, entries_decoded). Deletes the
// previous metadata first (as the read path does once it has read everything).
LogExportResult export_staged(const StagedExportClients& clients, const RankQuery& query,
                              const LogFilter& filter, const std::string& gcs_dest,
                              const std::string& bucket,
                              const std::vector<gcp::ObjectMetadata>& objects, nlohmann::json path,
                              const ExportOptions& how,
                              const std::function<void(const ExportProgress&)>& progress);

// The hourly sink files that may hold entries stamped in [from_nanos, to_nanos]: the object-name
// prefixes `<prefix><log id>/YYYY/MM/DD/HH:` of every hour in that span, for each log id.
std::vector<std::string> sink_hour_prefixes(const std::string& prefix,
                                            const std::vector<std::string>& log_ids,
                                            std::int64_t from_nanos, std::int64_t to_nanos);

// `gcloud storage buckets add-iam-policy-binding gs://BUCKET --member=MEMBER
// --role=roles/storage.objectCreator`: the fix for a writer identity without access.
std::string grant_command(const std::string& bucket, const std::string& member);

}  // namespace falcon::logs
