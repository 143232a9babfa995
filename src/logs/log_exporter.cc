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
#include "gcp/api_error.h"
#include "gcp/storage_client.h"
#include "gcp/url.h"
#include "logs/gke_entries.h"
#include "util/page_tokens.h"
#include "util/time_format.h"

namespace falcon::logs {
namespace {

using nlohmann::json;

constexpr int kPageSize = 1000;

json timestamp_or_null(bool present, std::int64_t nanos) {
  return present ? json(format_rfc3339_nanos(nanos)) : json(nullptr);
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

ExportSession::ExportSession(ExportClients clients, const RankQuery& query, const LogFilter& filter,
                             const std::string& gcs_dest,
                             std::function<void(const ExportProgress&)> progress)
    : clients_(clients),
      query_(query),
      filter_(filter),
      progress_(std::move(progress)),
      budget_(clients.buffer_bytes, clients.max_chunk_bytes) {
  std::tie(bucket_, prefix_) = parse_export_destination(gcs_dest);
  result_.workload_name = query.workload();
  result_.cluster = query.cluster_name();
}

std::string ExportSession::object_of(int rank) const {
  return fmt::format("{}rank-{}.log", prefix_, rank);
}

LogExportResult ExportSession::run() {
  try {
    read_and_route();
    finish();
    write_metadata();
  } catch (const LogRetrievalError& e) {
    abort();
    throw LogRetrievalError(
        fmt::format("export of the logs of {} to {} failed: {}", query_.workload(),
                    gcp::format_gcs_uri(bucket_, prefix_), e.what()),
        e.http_status(), e.status());
  } catch (...) {
    abort();
    throw;
  }
  return result_;
}

void ExportSession::read_and_route() {
  gcp::ListLogEntriesRequest request = query_.request(false, kPageSize);
  std::string line;
  PageTokens tokens;
  do {
    gcp::LogEntriesPage page = clients_.logging.list_entries_page(request);
    ++pages_;
    gcp::expect_new_page_token(tokens, page.next_page_token, gcp::entries_list_call(request));
    request.page_token = std::move(page.next_page_token);

    // Which rank each entry is for; ranks seen for the first time get their uploads.
    std::vector<std::pair<int, const gcp::LogEntry*>> routed;
    routed.reserve(page.entries.size());
    std::vector<int> opening;
    for (const gcp::LogEntry& entry : page.entries) {
      const std::optional<int> rank = query_.accept(entry);
      if (!rank) continue;
      routed.emplace_back(*rank, &entry);
      if (!ranks_.contains(*rank) &&
          std::find(opening.begin(), opening.end(), *rank) == opening.end()) {
        opening.push_back(*rank);
      }
    }
    open(opening);

    std::set<int> touched;
    for (const auto& [rank, entry] : routed) {
      RankExport& state = ranks_[rank];
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
    if (progress_) {
      for (const int rank : touched) {
        const RankExport& state = ranks_[rank];
        progress_({.rank = rank, .lines = state.lines, .bytes = state.bytes, .done = false});
      }
    }
  } while (!request.page_token.empty());
}

void ExportSession::open(const std::vector<int>& ranks) {
  if (ranks.empty()) return;
  // Chunks are sized by how many ranks are known now (and how many were asked for).
  const std::size_t expected =
      std::max(ranks_.size() + ranks.size(), query_.ranks() ? query_.ranks()->size() : 0);
  const std::size_t chunk = budget_.allocate(expected, ranks.size());
  for (const int rank : ranks) {
    RankExport& state = ranks_[rank];
    state.object = object_of(rank);
    state.writer.emplace(
        clients_.storage.start_resumable_upload(bucket_, state.object, kLogContentType, chunk));
  }
}

void ExportSession::finish() {
  // Every page is read: now, and only now, the objects come into existence. A previous export's
  // metadata at this destination goes first, so that if a rank fails to finish, no metadata
  // describes a mix of old and new rank objects (a failed read, before this point, leaves the
  // previous export whole). 403: the caller may create but not delete objects
  // (roles/storage.objectCreator); it cannot overwrite either, so nothing can be mixed.
  try {
    clients_.storage.delete_object(bucket_, prefix_ + kMetadataObject);
  } catch (const LogRetrievalError& e) {
    if (e.http_status() != 403) throw;
  }
  // Ranks reported even without lines: the requested ones, else rank 0.
  for (const int rank : query_.ranks() ? *query_.ranks() : std::set<int>{0}) {
    if (!ranks_.contains(rank)) ranks_[rank].object = object_of(rank);
  }
  for (auto& [rank, state] : ranks_) {
    if (state.writer) {
      state.writer->finish();
      state.writer.reset();
    } else {
      clients_.storage.upload_object(bucket_, state.object, "", kLogContentType);
    }
    result_.exported_ranks.push_back(rank);
    result_.gcs_uris[rank] = gcp::format_gcs_uri(bucket_, state.object);
    if (progress_) {
      progress_({.rank = rank, .lines = state.lines, .bytes = state.bytes, .done = true});
    }
  }
  result_.exported_at = format_iso8601(clients_.clock.now());
}

json export_metadata(const RankQuery& query, const LogFilter& filter, const LogExportResult& result,
                     const std::map<int, RankObjectSummary>& ranks, const json& path) {
  json per_rank = json::object();
  std::vector<int> empty;
  std::int64_t total_lines = 0;
  std::int64_t total_bytes = 0;
  std::optional<std::int64_t> first;
  std::optional<std::int64_t> last;
  for (const auto& [rank, state] : ranks) {
    const bool any = state.lines > 0;
    const auto uri = result.gcs_uris.find(rank);
    per_rank[std::to_string(rank)] = {
        {"uri", uri == result.gcs_uris.end() ? std::string() : uri->second},
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
    } else {
      empty.push_back(rank);
    }
  }
  json metadata = {{"workload", query.workload()},
                   {"cluster", query.cluster_name()},
                   {"project", query.project()},
                   {"cluster_id", query.cluster_id()},
                   {"namespace", query.namespace_()},
                   {"slice", query.slice()},
                   {"ranks_requested", query.ranks() ? json(std::vector<int>(query.ranks()->begin(),
                                                                             query.ranks()->end()))
                                                     : json("all")},
                   {"exported_ranks", result.exported_ranks},
                   {"empty_ranks", empty},
                   {"ranks", per_rank},
                   {"lines", total_lines},
                   {"bytes", total_bytes},
                   {"first_timestamp", timestamp_or_null(first.has_value(), first.value_or(0))},
                   {"last_timestamp", timestamp_or_null(last.has_value(), last.value_or(0))},
                   {"filter",
                    {{"lql", query.filter()},
                     {"log_filter", filter},
                     {"not_before", format_rfc3339_nanos(query.not_before_nanos())}}},
                   {"exported_at", result.exported_at}};
  for (const auto& [key, value] : path.items()) metadata[key] = value;
  return metadata;
}

void ExportSession::write_metadata() {
  std::map<int, RankObjectSummary> ranks;
  for (const auto& [rank, state] : ranks_) {
    ranks[rank] = {state.lines, state.bytes, state.first_nanos, state.last_nanos};
  }
  json path = {{"via", {{"path", "read"}, {"reason", via_reason_}}},
               {"list_requests", pages_},
               {"logging_read_calls", pages_}};
  const json metadata = export_metadata(query_, filter_, result_, ranks, path);
  clients_.storage.upload_object(bucket_, prefix_ + kMetadataObject, metadata.dump(2) + "\n",
                                 "application/json");
}

void ExportSession::abort() noexcept {
  for (auto& [rank, state] : ranks_) {
    if (!state.writer) continue;
    try {
      state.writer->abort();
    } catch (const std::exception&) {
      // The session expires on its own; its object never exists, because it was not finalized.
    }
    state.writer.reset();
  }
}

}  // namespace falcon::logs
