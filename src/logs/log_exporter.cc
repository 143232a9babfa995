#include "logs/log_exporter.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "falcon/errors.h"
#include "gcp/storage_client.h"
#include "gcp/url.h"
#include "logs/gke_entries.h"
#include "util/time_format.h"

namespace falcon::logs {
namespace {

using nlohmann::json;

constexpr int kPageSize = 1000;
constexpr const char* kLogContentType = "text/plain; charset=utf-8";
constexpr const char* kMetadataObject = "collection_meta.json";

// One rank of an export: where it goes and what went there.
struct RankExport {
  std::string object;
  std::optional<gcp::ResumableUploadWriter> writer;  // opened at the rank's first line
  std::int64_t lines = 0;
  std::int64_t bytes = 0;
  std::int64_t first_nanos = 0;  // valid when lines > 0
  std::int64_t last_nanos = 0;
};

json timestamp_or_null(bool present, std::int64_t nanos) {
  return present ? json(format_rfc3339_nanos(nanos)) : json(nullptr);
}

// Cancels every upload that is still open; best effort, as the export is failing already.
void abort_open_uploads(std::map<int, RankExport>& ranks) {
  for (auto& [rank, state] : ranks) {
    if (!state.writer) continue;
    try {
      state.writer->abort();
    } catch (const std::exception&) {
      // The session expires on its own; its object never exists, because it was not finalized.
    }
    state.writer.reset();
  }
}

}  // namespace

ChunkBudget::ChunkBudget(std::size_t total_bytes, std::size_t max_chunk_bytes)
    : total_(total_bytes), max_chunk_(max_chunk_bytes) {
  if (max_chunk_ == 0 || max_chunk_ % gcp::kUploadQuantum != 0) {
    throw std::invalid_argument(
        fmt::format("chunk size {} is not a positive multiple of 256 KiB", max_chunk_bytes));
  }
}

std::size_t ChunkBudget::allocate(std::size_t expected, std::size_t opening) {
  if (opening == 0) return 0;
  expected = std::max(expected, opening);
  const std::size_t left = total_ > reserved_ ? total_ - reserved_ : 0;
  const std::size_t share = std::min(total_ / expected, left / opening);
  const std::size_t chunk = std::clamp(share / gcp::kUploadQuantum * gcp::kUploadQuantum,
                                       gcp::kUploadQuantum, max_chunk_);
  reserved_ += chunk * opening;
  return chunk;
}

std::pair<std::string, std::string> parse_export_destination(const std::string& gcs_dest) {
  gcp::GcsUri uri;
  try {
    uri = gcp::parse_gcs_uri(gcs_dest);
  } catch (const std::invalid_argument& e) {
    throw LogRetrievalError(
        fmt::format("export destination {:?} is not gs://BUCKET/PATH: {}", gcs_dest, e.what()), 0,
        "INVALID_ARGUMENT");
  }
  std::string prefix = std::move(uri.object);
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (!prefix.empty()) prefix += '/';
  return {std::move(uri.bucket), std::move(prefix)};
}

LogExportResult export_ranks(const RetrieverOptions& options, const ClusterConfig& cluster,
                             const std::string& workload, const std::string& namespace_, int slice,
                             const RankQuery& query, const LogFilter& filter,
                             const std::string& gcs_dest,
                             const std::function<void(const ExportProgress&)>& progress) {
  const auto [bucket, prefix] = parse_export_destination(gcs_dest);
  const gcp::LoggingClient logging(options.logging);
  ChunkBudget budget(options.export_buffer_bytes, options.storage.upload_chunk_bytes);
  // One client per chunk size: a writer takes its chunk size from its client.
  std::map<std::size_t, gcp::StorageClient> storage_by_chunk;
  const auto storage_for = [&](std::size_t chunk) -> const gcp::StorageClient& {
    auto it = storage_by_chunk.find(chunk);
    if (it == storage_by_chunk.end()) {
      gcp::StorageClientOptions storage_options = options.storage;
      storage_options.upload_chunk_bytes = chunk;
      it = storage_by_chunk.emplace(chunk, gcp::StorageClient(std::move(storage_options))).first;
    }
    return it->second;
  };
  const auto object_of = [&prefix = prefix](int rank) {
    return fmt::format("{}rank-{}.log", prefix, rank);
  };

  // Ranks that are reported even without lines: the requested ones, else rank 0.
  const std::set<int> always = query.ranks() ? *query.ranks() : std::set<int>{0};
  std::map<int, RankExport> ranks;
  std::int64_t pages = 0;
  LogExportResult result;
  result.workload_name = workload;
  result.cluster = cluster.name;
  try {
    gcp::ListLogEntriesRequest request = query.request(false, kPageSize);
    do {
      gcp::LogEntriesPage page = logging.list_entries_page(request);
      ++pages;
      request.page_token = std::move(page.next_page_token);

      // Which rank each entry is for; ranks seen for the first time get their uploads, sized
      // by how many ranks are known now.
      std::vector<std::pair<int, const gcp::LogEntry*>> routed;
      routed.reserve(page.entries.size());
      std::vector<int> opening;
      for (const gcp::LogEntry& entry : page.entries) {
        const std::optional<int> rank = query.accept(entry);
        if (!rank) continue;
        routed.emplace_back(*rank, &entry);
        if (!ranks.contains(*rank) &&
            std::find(opening.begin(), opening.end(), *rank) == opening.end()) {
          opening.push_back(*rank);
        }
      }
      if (!opening.empty()) {
        const std::size_t expected =
            std::max(ranks.size() + opening.size(), query.ranks() ? query.ranks()->size() : 0);
        const std::size_t chunk = budget.allocate(expected, opening.size());
        for (const int rank : opening) {
          RankExport& state = ranks[rank];
          state.object = object_of(rank);
          state.writer.emplace(
              storage_for(chunk).start_resumable_upload(bucket, state.object, kLogContentType));
        }
      }

      std::set<int> touched;
      std::string line;
      for (const auto& [rank, entry] : routed) {
        RankExport& state = ranks[rank];
        line = log_line(*entry);
        line += '\n';
        state.writer->write(line);
        if (state.lines == 0) state.first_nanos = state.last_nanos = entry->timestamp_nanos;
        state.first_nanos = std::min(state.first_nanos, entry->timestamp_nanos);
        state.last_nanos = std::max(state.last_nanos, entry->timestamp_nanos);
        ++state.lines;
        state.bytes += static_cast<std::int64_t>(line.size());
        touched.insert(rank);
      }
      if (progress) {
        for (const int rank : touched) {
          const RankExport& state = ranks[rank];
          progress({.rank = rank, .lines = state.lines, .bytes = state.bytes, .done = false});
        }
      }
    } while (!request.page_token.empty());

    // Every page is read: now, and only now, the objects come into existence. A previous
    // export's metadata at this destination goes first, so that if a rank fails to finish, no
    // metadata describes a mix of old and new rank objects (a failed read, before this point,
    // leaves the previous export whole). 403: the caller may create but not delete objects
    // (roles/storage.objectCreator); it cannot overwrite either, so nothing can be mixed.
    try {
      storage_for(options.storage.upload_chunk_bytes)
          .delete_object(bucket, prefix + kMetadataObject);
    } catch (const LogRetrievalError& e) {
      if (e.http_status() != 403) throw;
    }
    for (const int rank : always) {
      if (!ranks.contains(rank)) ranks[rank].object = object_of(rank);
    }
    for (auto& [rank, state] : ranks) {
      if (state.writer) {
        state.writer->finish();
        state.writer.reset();
      } else {
        storage_for(options.storage.upload_chunk_bytes)
            .upload_object(bucket, state.object, "", kLogContentType);
      }
      result.exported_ranks.push_back(rank);
      result.gcs_uris[rank] = gcp::format_gcs_uri(bucket, state.object);
      if (progress) {
        progress({.rank = rank, .lines = state.lines, .bytes = state.bytes, .done = true});
      }
    }
    result.exported_at = format_iso8601(options.clock->now());

    json per_rank = json::object();
    std::int64_t total_lines = 0;
    std::int64_t total_bytes = 0;
    std::optional<std::int64_t> first;
    std::optional<std::int64_t> last;
    for (const auto& [rank, state] : ranks) {
      const bool any = state.lines > 0;
      per_rank[std::to_string(rank)] = {
          {"uri", result.gcs_uris[rank]},
          {"lines", state.lines},
          {"bytes", state.bytes},
          {"empty", !any},
          {"first_timestamp", timestamp_or_null(any, state.first_nanos)},
          {"last_timestamp", timestamp_or_null(any, state.last_nanos)}};
      total_lines += state.lines;
      total_bytes += state.bytes;
      if (any) {
        first = std::min(first.value_or(state.first_nanos), state.first_nanos);
        last = std::max(last.value_or(state.last_nanos), state.last_nanos);
      }
    }
    const json metadata = {
        {"workload", workload},
        {"cluster", cluster.name},
        {"project", cluster.project},
        {"cluster_id", cluster.cluster_id},
        {"namespace", namespace_},
        {"slice", slice},
        {"ranks_requested",
         query.ranks() ? json(std::vector<int>(query.ranks()->begin(), query.ranks()->end()))
                       : json("all")},
        {"exported_ranks", result.exported_ranks},
        {"empty_ranks",
         [&] {
           std::vector<int> empty;
           for (const auto& [rank, state] : ranks) {
             if (state.lines == 0) empty.push_back(rank);
           }
           return empty;
         }()},
        {"ranks", per_rank},
        {"lines", total_lines},
        {"bytes", total_bytes},
        {"first_timestamp", timestamp_or_null(first.has_value(), first.value_or(0))},
        {"last_timestamp", timestamp_or_null(last.has_value(), last.value_or(0))},
        {"filter",
         {{"lql", query.filter()},
          {"log_filter", filter},
          {"not_before", format_rfc3339_nanos(query.not_before_nanos())}}},
        {"list_requests", pages},
        {"exported_at", result.exported_at}};
    storage_for(options.storage.upload_chunk_bytes)
        .upload_object(bucket, prefix + kMetadataObject, metadata.dump(2) + "\n",
                       "application/json");
  } catch (const LogRetrievalError& e) {
    abort_open_uploads(ranks);
    throw LogRetrievalError(fmt::format("export of the logs of {} to {} failed: {}", workload,
                                        gcp::format_gcs_uri(bucket, prefix), e.what()),
                            e.http_status(), e.status());
  } catch (...) {
    abort_open_uploads(ranks);
    throw;
  }
  return result;
}

}  // namespace falcon::logs
