#include "logs/export_paths.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <random>

#include <fmt/format.h>

#include "falcon/errors.h"
#include "gcp/url.h"
#include "logs/filter_builder.h"
#include "logs/log_exporter.h"
#include "util/time_format.h"

namespace falcon::logs {
namespace {

using nlohmann::json;

constexpr std::int64_t kNanosPerHour = 3'600'000'000'000LL;
constexpr std::size_t kDownloadRangeBytes = 4 << 20;
const std::vector<std::string> kContainerLogIds = {"stdout", "stderr"};

LogRetrievalError precondition(const std::string& message) {
  return LogRetrievalError(message, 0, "FAILED_PRECONDITION");
}

std::int64_t now_nanos(const Clock& clock) {
  return clock.now().time_since_epoch() / std::chrono::nanoseconds(1);
}

// gs://BUCKET[/PREFIX] of a setting, as bucket and a prefix ending in '/' (or "").
std::pair<std::string, std::string> setting_location(const std::string& value, const char* key) {
  try {
    return parse_export_destination(value);
  } catch (const LogRetrievalError& e) {
    throw LogRetrievalError(fmt::format("gcp.{} {:?} is not gs://BUCKET[/PREFIX]", key, value), 0,
                            "INVALID_ARGUMENT");
  }
}

void tell(const ExportOptions& how, ExportStatus status) {
  if (how.on_status) how.on_status(status);
}

bool cancelled(const ExportOptions& how) { return how.cancelled && how.cancelled(); }

LogRetrievalError cancelled_error(const std::string& what) {
  return LogRetrievalError(fmt::format("the export was cancelled{}", what), 0, "CANCELLED");
}

// A rank object written line by line through a resumable upload; aborted when dropped
// unfinished.
class UploadLineWriter final : public RankLineWriter {
 public:
  UploadLineWriter(gcp::ResumableUploadWriter writer, int rank,
                   std::function<void(const ExportProgress&)> progress)
      : writer_(std::move(writer)), rank_(rank), progress_(std::move(progress)) {}
  ~UploadLineWriter() override {
    if (finished_) return;
    try {
      writer_.abort();
    } catch (const std::exception&) {
      // The session expires on its own; its object never exists.
    }
  }

  void write(std::string_view line) override {
    writer_.write(line);
    ++lines_;
    bytes_ += static_cast<std::int64_t>(line.size());
    if (progress_ && lines_ % 100'000 == 0) {
      progress_({.rank = rank_, .lines = lines_, .bytes = bytes_, .done = false});
    }
  }
  void finish() override {
    writer_.finish();
    finished_ = true;
    if (progress_) progress_({.rank = rank_, .lines = lines_, .bytes = bytes_, .done = true});
  }

 private:
  gcp::ResumableUploadWriter writer_;
  int rank_;
  std::function<void(const ExportProgress&)> progress_;
  std::int64_t lines_ = 0;
  std::int64_t bytes_ = 0;
  bool finished_ = false;
};

bool member_may_create(const std::vector<gcp::IamBinding>& bindings, const std::string& member) {
  for (const auto& b : bindings) {
    if (!gcp::role_creates_objects(b.role)) continue;
    if (std::find(b.members.begin(), b.members.end(), member) != b.members.end()) return true;
  }
  return false;
}

// Deletes the staged objects under `prefix`; best effort (a failure is told, not thrown).
void delete_staging(const StagedExportClients& clients, const ExportOptions& how,
                    const std::string& bucket, const std::string& prefix) {
  tell(how, {.phase = ExportStatus::Phase::kCleaning,
             .via = ExportVia::kCopy,
             .message = fmt::format("deleting the staged objects {}",
                                    gcp::format_gcs_uri(bucket, prefix))});
  try {
    for (const auto& object : clients.storage.list_objects(bucket, prefix)) {
      clients.storage.delete_object(bucket, object.name);
    }
  } catch (const LogRetrievalError& e) {
    tell(how, {.phase = ExportStatus::Phase::kCleaning,
               .via = ExportVia::kCopy,
               .message = fmt::format("could not delete every staged object under {} ({}); "
                                      "delete them with: gcloud storage rm -r {}",
                                      gcp::format_gcs_uri(bucket, prefix), e.what(),
                                      gcp::format_gcs_uri(bucket, prefix))});
  }
}

std::string hour_text(std::int64_t nanos) {
  const std::string t = format_rfc3339_nanos(nanos - nanos % kNanosPerHour);
  return t.substr(0, 13) + ":00Z";
}

}  // namespace

std::string grant_command(const std::string& bucket, const std::string& member) {
  return fmt::format(
      "gcloud storage buckets add-iam-policy-binding gs://{} --member={} "
      "--role=roles/storage.objectCreator",
      bucket, member);
}

std::vector<std::string> sink_hour_prefixes(const std::string& prefix,
                                            const std::vector<std::string>& log_ids,
                                            std::int64_t from_nanos, std::int64_t to_nanos) {
  std::vector<std::string> out;
  from_nanos -= ((from_nanos % kNanosPerHour) + kNanosPerHour) % kNanosPerHour;
  for (const std::string& id : log_ids) {
    for (std::int64_t h = from_nanos; h <= to_nanos; h += kNanosPerHour) {
      const std::string t = format_rfc3339_nanos(h);  // YYYY-MM-DDTHH:...
      out.push_back(fmt::format("{}{}/{}/{}/{}/{}:", prefix, id, t.substr(0, 4), t.substr(5, 2),
                                t.substr(8, 2), t.substr(11, 2)));
    }
  }
  return out;
}

PathChoice choose_export_path(const StagedExportClients& clients, const RankQuery& query,
                              const LogFilter& filter, const ExportOptions& how) {
  switch (how.via) {
    case ExportVia::kRead:
      return {ExportVia::kRead, "asked for (--via read)"};
    case ExportVia::kCopy:
      return {ExportVia::kCopy, "asked for (--via copy)"};
    case ExportVia::kSink:
      return {ExportVia::kSink, "asked for (--via sink)"};
    case ExportVia::kAuto:
      break;
  }
  const GcpSettings& s = clients.settings;
  std::string no_sink;
  if (s.log_archive.empty()) {
    no_sink = "gcp.log_archive is not set";
  } else if (filter.grep) {
    no_sink = "--grep is a Cloud Logging query, which the archive cannot run";
  } else if (how.window_end.empty()) {
    no_sink = "the workload has not ended, so its logs may still be written";
  } else if (const auto end = parse_rfc3339_nanos(how.window_end); !end) {
    no_sink = fmt::format("the window's end {:?} is not an RFC 3339 time", how.window_end);
  } else {
    const std::int64_t lag = std::int64_t{s.log_archive_lag_s} * 1'000'000'000;
    const std::int64_t complete_to = now_nanos(clients.clock) - lag;
    const std::int64_t hour_end = *end - *end % kNanosPerHour + kNanosPerHour;
    if (hour_end > complete_to) {
      no_sink = fmt::format(
          "the window ends at {}, and the archive's hourly files are complete only up to {} "
          "(gcp.log_archive_lag_s: {} s)",
          how.window_end,
          format_iso8601(std::chrono::system_clock::time_point(
              std::chrono::duration_cast<std::chrono::system_clock::duration>(
                  std::chrono::nanoseconds(complete_to)))),
          s.log_archive_lag_s);
    } else {
      const auto [bucket, prefix] = setting_location(s.log_archive, "log_archive");
      bool found = false;
      try {
        for (const std::string& p : sink_hour_prefixes(prefix, kContainerLogIds, *end, *end)) {
          if (!clients.storage.list_objects(bucket, p, 1).empty()) found = true;
        }
      } catch (const LogRetrievalError& e) {
        if (e.http_status() != 403 && e.http_status() != 404) throw;
        no_sink = fmt::format("the archive {} cannot be listed ({})", s.log_archive, e.what());
      }
      if (found) {
        return {ExportVia::kSink,
                fmt::format("gcp.log_archive {} covers the window (it ends at {}; the archive is "
                            "complete to {} hours ago)",
                            s.log_archive, how.window_end, s.log_archive_lag_s / 3600.0)};
      }
      if (no_sink.empty()) {
        no_sink = fmt::format(
            "the archive {} has no stdout or stderr file for the hour of {}: is its sink "
            "exporting project {}'s logs?",
            s.log_archive, hour_text(*end), query.project());
      }
    }
  }
  if (s.log_copy && !s.log_copy_staging.empty()) {
    return {ExportVia::kCopy,
            fmt::format("sink not used: {}; gcp.log_copy allows entries:copy", no_sink)};
  }
  return {ExportVia::kRead,
          fmt::format("sink not used: {}; copy not used: {}", no_sink,
                      !s.log_copy ? "gcp.log_copy is false" : "gcp.log_copy_staging is not set")};
}

LogExportResult export_staged(const StagedExportClients& clients, const RankQuery& query,
                              const LogFilter& filter, const std::string& gcs_dest,
                              const std::string& bucket,
                              const std::vector<gcp::ObjectMetadata>& objects, json path,
                              const ExportOptions& how,
                              const std::function<void(const ExportProgress&)>& progress) {
  const auto [out_bucket, out_prefix] = parse_export_destination(gcs_dest);
  const ExportVia via =
      path["via"].value("path", "copy") == "sink" ? ExportVia::kSink : ExportVia::kCopy;
  std::mutex progress_mutex;  // progress and status are told from several threads
  const auto safe_progress = [&](const ExportProgress& p) {
    if (!progress) return;
    std::lock_guard lock(progress_mutex);
    progress(p);
  };
  RankSplitter splitter(query, clients.splitter);
  tell(how, {.phase = ExportStatus::Phase::kSplitting,
             .via = via,
             .message = fmt::format("reading {} staged objects of gs://{}", objects.size(), bucket),
             .objects_total = static_cast<std::int64_t>(objects.size())});
  std::atomic<bool> stop{false};
  splitter.add_objects(
      objects.size(),
      [&](std::size_t i, const RankSplitter::ChunkSink& sink) {
        if (stop.load() || cancelled(how)) {
          stop = true;
          throw cancelled_error("");
        }
        // Asked again for every range, so that a cancel does not wait for a large object.
        clients.storage.download_object(
            bucket, objects[i].name,
            [&](std::string_view piece) {
              if (stop.load() || cancelled(how)) {
                stop = true;
                throw cancelled_error("");
              }
              sink(piece);
            },
            kDownloadRangeBytes);
      },
      [&](std::size_t i) { return gcp::format_gcs_uri(bucket, objects[i].name); },
      [&](std::size_t done, std::int64_t lines) {
        std::lock_guard lock(progress_mutex);
        tell(how, {.phase = ExportStatus::Phase::kSplitting,
                   .via = via,
                   .objects = static_cast<std::int64_t>(done),
                   .objects_total = static_cast<std::int64_t>(objects.size()),
                   .lines = lines});
      });
  if (cancelled(how)) throw cancelled_error("");

  // Every staged object is read: the previous export's metadata goes before the first rank
  // object is finished (as on the read path; 403: the caller can create but not delete).
  try {
    clients.storage.delete_object(out_bucket, out_prefix + kMetadataObject);
  } catch (const LogRetrievalError& e) {
    if (e.http_status() != 403) throw;
  }
  std::set<int> ranks = query.ranks() ? *query.ranks() : splitter.ranks();
  if (!query.ranks()) ranks.insert(0);
  tell(how, {.phase = ExportStatus::Phase::kWriting,
             .via = via,
             .message = fmt::format("writing {} rank objects to {}", ranks.size(),
                                    gcp::format_gcs_uri(out_bucket, out_prefix))});
  const std::size_t chunk = std::max(clients.max_chunk_bytes, gcp::kUploadQuantum);
  const std::map<int, RankSplit> splits = splitter.write_ranks(ranks, [&](int rank) {
    const std::string object = fmt::format("{}rank-{}.log", out_prefix, rank);
    return std::make_unique<UploadLineWriter>(
        clients.storage.start_resumable_upload(out_bucket, object, kLogContentType, chunk), rank,
        safe_progress);
  });

  LogExportResult result;
  result.workload_name = query.workload();
  result.cluster = query.cluster_name();
  std::map<int, RankObjectSummary> summary;
  for (const auto& [rank, split] : splits) {
    result.exported_ranks.push_back(rank);
    result.gcs_uris[rank] =
        gcp::format_gcs_uri(out_bucket, fmt::format("{}rank-{}.log", out_prefix, rank));
    summary[rank] = {split.lines, split.bytes, split.first_nanos, split.last_nanos};
  }
  result.exported_at = format_iso8601(clients.clock.now());
  path["staged_objects"] = objects.size();
  path["entries_decoded"] = splitter.entries_decoded();
  path["duplicates_dropped"] = splitter.duplicates();
  const json metadata = export_metadata(query, filter, result, summary, path);
  clients.storage.upload_object(out_bucket, out_prefix + kMetadataObject, metadata.dump(2) + "\n",
                                "application/json");
  return result;
}

namespace {

// The preconditions of a copy, each checked before anything is copied: the source log bucket
// is not encrypted with a customer-managed key, and the project's Logging service account may
// create objects in the staging bucket. What cannot be checked (403) is said through `note` and
// let through: the operation says so if it fails.
void check_copy_preconditions(const StagedExportClients& clients, const RankQuery& query,
                              const std::string& source, const std::string& staging_bucket,
                              const std::function<void(const std::string&)>& note) {
  try {
    const gcp::LogBucketInfo info = clients.admin.get_log_bucket(source);
    if (!info.kms_key_name.empty()) {
      throw precondition(fmt::format(
          "the log bucket {} is encrypted with the customer-managed key {}, and entries:copy "
          "cannot copy a CMEK log bucket: export with --via read, or --via sink from a sink "
          "archive (gcp.log_archive)",
          source, info.kms_key_name));
    }
  } catch (const LogRetrievalError& e) {
    if (e.status() == "FAILED_PRECONDITION") throw;
    if (e.http_status() == 404) {
      throw precondition(fmt::format(
          "the log bucket {} does not exist: set gcp.log_copy_source to LOCATION/BUCKET_ID of the "
          "log bucket that holds the cluster's logs ({})",
          source, e.what()));
    }
    if (e.http_status() != 403) throw;
    note(fmt::format("cannot read the log bucket {} to check for CMEK (HTTP 403); going on",
                     source));
  }
  try {
    const std::string account = clients.admin.logging_service_account(query.project());
    const std::vector<gcp::IamBinding> bindings =
        clients.storage.get_bucket_iam_bindings(staging_bucket);
    const std::string member = "serviceAccount:" + account;
    if (!account.empty() && !member_may_create(bindings, member)) {
      throw precondition(fmt::format(
          "entries:copy writes as project {}'s Logging service account {}, which may not create "
          "objects in the staging bucket gs://{}; grant it with\n  {}\nand export again",
          query.project(), account, staging_bucket, grant_command(staging_bucket, member)));
    }
  } catch (const LogRetrievalError& e) {
    if (e.status() == "FAILED_PRECONDITION") throw;
    if (e.http_status() == 404 && std::string_view(e.what()).find("IAM") != std::string::npos) {
      throw precondition(
          fmt::format("the staging bucket gs://{} (gcp.log_copy_staging) does "
                      "not exist: create it, or set another",
                      staging_bucket));
    }
    if (e.http_status() != 403 && e.http_status() != 404) throw;
    note(
        fmt::format("cannot check that entries:copy may write to gs://{} ({}); the operation "
                    "will say so if it may not",
                    staging_bucket, e.what()));
  }
}

// `<staging_prefix>falcon-copy/<workload>-<UTC stamp>Z-<random>/`: a prefix no other export
// writes to.
std::string staging_run_prefix(const StagedExportClients& clients,
                               const std::string& staging_prefix, const std::string& workload) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(now_nanos(clients.clock)) ^
                      std::random_device{}());
  const std::string stamp = format_rfc3339_nanos(now_nanos(clients.clock));
  std::string compact;
  for (const char c : stamp.substr(0, 19)) {
    if (c != '-' && c != ':') compact += c;
  }
  return fmt::format("{}falcon-copy/{}-{}Z-{:04x}/", staging_prefix, workload, compact,
                     rng() & 0xffff);
}

// The log bucket entries:copy reads (projects/P/locations/L/buckets/B from
// gcp.log_copy_source), after the filter's length is checked against what entries:copy takes.
std::string copy_source(const GcpSettings& settings, const RankQuery& query) {
  if (query.filter().size() > kMaxFilterLength) {
    throw precondition(fmt::format(
        "the export's filter is {} characters, more than the 20,000 entries:copy accepts: "
        "shorten --grep",
        query.filter().size()));
  }
  const auto slash = settings.log_copy_source.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == settings.log_copy_source.size()) {
    throw precondition(
        fmt::format("gcp.log_copy_source {:?} is not LOCATION/BUCKET_ID (e.g. global/_Default)",
                    settings.log_copy_source));
  }
  return fmt::format("projects/{}/locations/{}/buckets/{}", query.project(),
                     settings.log_copy_source.substr(0, slash),
                     settings.log_copy_source.substr(slash + 1));
}

// Why a copy operation that ended did not succeed, with the fix when there is one.
LogRetrievalError copy_failed(const gcp::CopyOperation& op, const std::string& source,
                              const std::string& staging_bucket) {
  std::string fix;
  if (op.state == gcp::CopyState::kCancelled && op.error_code == 7) {
    fix = fmt::format("; grant the writer identity access with\n  {}",
                      grant_command(staging_bucket, op.writer_identity));
  }
  return LogRetrievalError(
      fmt::format("copy operation {} of {} ended {}: {}{}", op.name, source,
                  gcp::to_string(op.state),
                  op.error_message.empty() ? "no error given" : op.error_message, fix),
      0, op.state == gcp::CopyState::kCancelled ? "CANCELLED" : "INTERNAL");
}

// What collection_meta.json says of a copy: the path and why, no Logging reads, the operation.
json copy_meta(const gcp::CopyOperation& op, const std::string& reason, const std::string& source,
               const std::string& destination, double copy_seconds, const std::string& staging,
               bool staging_kept) {
  return {{"via", {{"path", "copy"}, {"reason", reason}}},
          {"logging_read_calls", 0},
          {"entries_copied", op.entries_copied},
          {"operation",
           {{"name", op.name},
            {"state", gcp::to_string(op.state)},
            {"source", source},
            {"destination", destination},
            {"writer_identity", op.writer_identity},
            {"start_time", op.start_time},
            {"end_time", op.end_time},
            {"entries_copied", op.entries_copied},
            {"waited_s", copy_seconds}}},
          {"staging", staging},
          {"staging_kept", staging_kept}};
}

// Cancels a copy operation and waits up to a minute for it to end, so that it does not go on
// writing where nobody reads; a failure is said through `note`.
void cancel_copy(const StagedExportClients& clients, gcp::CopyOperation& op,
                 const std::function<void(const std::string&)>& note) {
  try {
    clients.admin.cancel_operation(op.name);
    for (int i = 0; i < 120 && !op.done; ++i) {
      clients.clock.sleep_for(std::chrono::milliseconds(500));
      op = clients.admin.get_operation(op.name);
    }
  } catch (const LogRetrievalError& e) {
    note(fmt::format("cancelling copy operation {} failed: {}", op.name, e.what()));
  }
}

}  // namespace

LogExportResult export_by_copy(const StagedExportClients& clients, const RankQuery& query,
                               const LogFilter& filter, const std::string& gcs_dest,
                               const ExportOptions& how, const std::string& reason,
                               const std::function<void(const ExportProgress&)>& progress) {
  const GcpSettings& s = clients.settings;
  (void)parse_export_destination(gcs_dest);  // a bad destination fails before anything starts
  if (s.log_copy_staging.empty()) {
    throw precondition(
        "--via copy needs a Cloud Storage bucket for entries:copy to write to: set "
        "gcp.log_copy_staging: gs://BUCKET/PREFIX in repos.yaml (docs/log-export.md), or export "
        "with --via read");
  }
  const auto [staging_bucket, staging_prefix] =
      setting_location(s.log_copy_staging, "log_copy_staging");
  const std::string source = copy_source(s, query);
  const auto note = [&](const std::string& message) {
    tell(how, {.phase = ExportStatus::Phase::kChosen, .via = ExportVia::kCopy, .message = message});
  };
  check_copy_preconditions(clients, query, source, staging_bucket, note);
  if (cancelled(how)) throw cancelled_error("");

  // A staging prefix of this export's own.
  const std::string run_prefix = staging_run_prefix(clients, staging_prefix, query.workload());
  const std::string destination = fmt::format("storage.googleapis.com/{}/{}", staging_bucket,
                                              run_prefix.substr(0, run_prefix.size() - 1));
  gcp::CopyOperation op = clients.admin.copy_log_entries(
      {.name = source, .filter = query.filter(), .destination = destination});
  const auto report = [&] {
    tell(how, {.phase = ExportStatus::Phase::kCopying,
               .via = ExportVia::kCopy,
               .message = fmt::format("copy operation {}: {} {}%", op.name,
                                      gcp::to_string(op.state), op.progress),
               .operation = op.name,
               .state = gcp::to_string(op.state),
               .percent = op.progress});
  };
  report();
  const auto cleanup = [&] {
    if (!how.keep_staging) delete_staging(clients, how, staging_bucket, run_prefix);
  };
  const auto cancel_and_wait = [&] { cancel_copy(clients, op, note); };
  const auto poll = std::chrono::milliseconds(std::int64_t{std::max(1, s.log_copy_poll_s)} * 1000);
  const auto started = clients.clock.steady_now();
  std::optional<std::chrono::steady_clock::time_point> waiting_since;
  try {
    while (!op.done) {
      if (op.state == gcp::CopyState::kWaitingForPermissions) {
        if (!waiting_since) {
          waiting_since = clients.clock.steady_now();
          tell(how, {.phase = ExportStatus::Phase::kWaiting,
                     .via = ExportVia::kCopy,
                     .message = fmt::format(
                         "copy operation {} waits for its writer identity {} to be granted access "
                         "to gs://{}: {}",
                         op.name, op.writer_identity, staging_bucket,
                         grant_command(staging_bucket, op.writer_identity)),
                     .operation = op.name,
                     .state = gcp::to_string(op.state)});
        } else if (clients.clock.steady_now() - *waiting_since >=
                   std::chrono::seconds(s.log_copy_permission_wait_s)) {
          cancel_and_wait();
          cleanup();
          throw precondition(fmt::format(
              "copy operation {} waited {} s for its writer identity {} to be granted access to "
              "gs://{} and was cancelled; grant it with\n  {}\nand export again",
              op.name, s.log_copy_permission_wait_s, op.writer_identity, staging_bucket,
              grant_command(staging_bucket, op.writer_identity)));
        }
      }
      // Wait for the next poll, asking for cancellation every 200 ms.
      const auto next = clients.clock.steady_now() + poll;
      while (clients.clock.steady_now() < next) {
        if (cancelled(how)) {
          cancel_and_wait();
          cleanup();
          throw cancelled_error(fmt::format("; copy operation {} was cancelled ({})", op.name,
                                            gcp::to_string(op.state)));
        }
        clients.clock.sleep_for(std::min<std::chrono::nanoseconds>(
            std::chrono::milliseconds(200), next - clients.clock.steady_now()));
      }
      op = clients.admin.get_operation(op.name);
      report();
    }
  } catch (const LogRetrievalError& e) {
    // A poll that failed for good: the operation must not go on writing where nobody reads.
    if (e.status() == "FAILED_PRECONDITION" || e.status() == "CANCELLED") throw;
    if (!op.done) cancel_and_wait();
    cleanup();
    throw;
  }
  if (op.state != gcp::CopyState::kSucceeded || op.error_code != 0) {
    cleanup();
    throw copy_failed(op, source, staging_bucket);
  }
  const double copy_seconds =
      std::chrono::duration<double>(clients.clock.steady_now() - started).count();

  const json path = copy_meta(op, reason, source, destination, copy_seconds,
                              gcp::format_gcs_uri(staging_bucket, run_prefix), how.keep_staging);
  LogExportResult result;
  try {
    std::vector<gcp::ObjectMetadata> objects =
        clients.storage.list_objects(staging_bucket, run_prefix);
    std::erase_if(objects, [](const gcp::ObjectMetadata& o) { return o.size == 0; });
    result = export_staged(clients, query, filter, gcs_dest, staging_bucket, objects, path, how,
                           progress);
  } catch (...) {
    cleanup();
    throw;
  }
  cleanup();
  return result;
}

LogExportResult export_by_sink(const StagedExportClients& clients, const RankQuery& query,
                               const LogFilter& filter, const std::string& gcs_dest,
                               const ExportOptions& how, const std::string& reason,
                               const std::function<void(const ExportProgress&)>& progress) {
  const GcpSettings& s = clients.settings;
  (void)parse_export_destination(gcs_dest);
  if (s.log_archive.empty()) {
    throw precondition(
        "--via sink needs the Cloud Storage archive of a Log Router sink: set gcp.log_archive: "
        "gs://BUCKET in repos.yaml (docs/log-export.md), or export with --via read or copy");
  }
  if (filter.grep) {
    throw LogRetrievalError(
        "--grep is a Cloud Logging query, which only Cloud Logging runs; the sink archive "
        "cannot apply it: export with --via copy or --via read",
        0, "INVALID_ARGUMENT");
  }
  const auto [bucket, prefix] = setting_location(s.log_archive, "log_archive");
  std::int64_t to = now_nanos(clients.clock);
  if (!how.window_end.empty()) {
    const auto end = parse_rfc3339_nanos(how.window_end);
    if (!end) {
      throw LogRetrievalError(
          fmt::format("the window's end {:?} is not an RFC 3339 time", how.window_end), 0,
          "INVALID_ARGUMENT");
    }
    to = *end;
  }
  std::vector<gcp::ObjectMetadata> objects;
  const std::vector<std::string> hours =
      sink_hour_prefixes(prefix, kContainerLogIds, query.not_before_nanos(), to);
  for (const std::string& hour : hours) {
    if (cancelled(how)) throw cancelled_error("");
    try {
      for (auto& o : clients.storage.list_objects(bucket, hour)) {
        if (o.size != 0) objects.push_back(std::move(o));  // an empty shard has no entries
      }
    } catch (const LogRetrievalError& e) {
      if (e.http_status() == 404) {
        throw precondition(
            fmt::format("the sink archive gs://{} (gcp.log_archive) does not "
                        "exist: {}",
                        bucket, e.what()));
      }
      throw;
    }
  }
  const json path = {{"via", {{"path", "sink"}, {"reason", reason}}},
                     {"logging_read_calls", 0},
                     {"archive", s.log_archive},
                     {"archive_hours", hours.size() / kContainerLogIds.size()}};
  return export_staged(clients, query, filter, gcs_dest, bucket, objects, path, how, progress);
}

}  // namespace falcon::logs
