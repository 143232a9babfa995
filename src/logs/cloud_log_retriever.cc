#include <algorithm>
#include <chrono>
#include <stdexcept>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "falcon/errors.h"
#include "falcon/log_retriever.h"
#include "gcp/epoch_fence.h"
#include "gcp/rate_limiter.h"
#include "logs/exit_code.h"
#include "logs/export_paths.h"
#include "logs/filter_builder.h"
#include "logs/log_exporter.h"
#include "logs/log_sources.h"
#include "logs/rank_query.h"
#include "logs/retriever_options.h"

namespace falcon {

struct CloudLogRetriever::Impl {
  logs::RetrieverOptions options;
  gcp::LoggingClient logging;
  // Single reads made on behalf of a status call: two attempts within 20 s, no quota waits.
  gcp::LoggingClient quick_logging;
  gcp::StorageClient storage;
  // The storage fence's epoch object, read or written on behalf of a submit, a recovery or a
  // job's check before a checkpoint: three attempts within 20 s, not an export's 15 minutes, so
  // that a Cloud Storage outage fails those calls (the supervisor tries again next pass) instead
  // of holding them.
  gcp::StorageClient fence_storage;
  gcp::LoggingAdminClient admin;

  explicit Impl(logs::RetrieverOptions o)
      : options(wired(std::move(o))),
        logging(options.logging),
        quick_logging(quick(options.logging)),
        storage(options.storage),
        fence_storage(quick(options.storage)),
        admin(options.admin) {}

  // The clients share the wait handler, and both Logging clients one read limiter.
  static logs::RetrieverOptions wired(logs::RetrieverOptions o) {
    if (!o.clock) throw std::invalid_argument("CloudLogRetriever needs a Clock");
    if (!o.storage.http || !o.logging.http) {
      throw std::invalid_argument("CloudLogRetriever needs an HttpClient");
    }
    if (!o.logging.rate_limiters) {
      o.logging.rate_limiters = std::make_shared<gcp::ProjectRateLimiters>(o.logging.clock);
    }
    if (o.on_wait) {
      const auto tell = [handler = o.on_wait](const gcp::RetryWait& wait) {
        handler(logs::describe_wait(wait));
      };
      if (!o.logging.on_wait) o.logging.on_wait = tell;
      if (!o.storage.on_wait) o.storage.on_wait = tell;
      if (!o.admin.on_wait) o.admin.on_wait = tell;
    }
    // The admin client goes where the Logging reads go, unless told otherwise.
    if (!o.admin.http) {
      o.admin.http = o.logging.http;
      o.admin.endpoint = o.logging.endpoint;
      o.admin.credentials = o.logging.credentials;
      o.admin.seed = o.logging.seed;
    }
    if (!o.admin.clock) o.admin.clock = o.clock;
    return o;
  }

  static gcp::StorageClientOptions quick(gcp::StorageClientOptions o) {
    o.retry.max_attempts = std::min(o.retry.max_attempts, 3);
    o.retry.deadline = std::min(o.retry.deadline, std::chrono::milliseconds(20'000));
    o.request_timeout = std::min(o.request_timeout, std::chrono::milliseconds(10'000));
    return o;
  }

  static gcp::LoggingClientOptions quick(gcp::LoggingClientOptions o) {
    o.retry.max_attempts = std::min(o.retry.max_attempts, 2);
    o.retry.deadline = std::min(o.retry.deadline, std::chrono::milliseconds(20'000));
    o.retry.quota_backoff = std::chrono::milliseconds(0);
    o.request_timeout = std::min(o.request_timeout, std::chrono::milliseconds(15'000));
    return o;
  }

  std::int64_t lower_bound(const LogFilter& filter, const LogQueryOptions& query) const {
    return logs::query_lower_bound(filter, query, options.clock->now());
  }
};

namespace {

void check_rank(int rank) {
  if (rank < 0) {
    throw LogRetrievalError(fmt::format("rank {} is negative", rank), 0, "INVALID_ARGUMENT");
  }
}

void check_tail(const std::optional<int>& tail_lines) {
  if (!tail_lines) return;
  if (*tail_lines < 0) {
    throw LogRetrievalError(fmt::format("tail_lines {} is negative", *tail_lines), 0,
                            "INVALID_ARGUMENT");
  }
  if (*tail_lines > kMaxTailLines) {
    throw LogRetrievalError(fmt::format("a tail of {} lines is more than the {} lines one read may "
                                        "ask for; use a narrower --since instead",
                                        *tail_lines, kMaxTailLines),
                            0, "INVALID_ARGUMENT");
  }
}

}  // namespace

namespace logs {

CloudLogRetriever make_retriever(RetrieverOptions options) {
  return CloudLogRetriever(std::make_unique<CloudLogRetriever::Impl>(std::move(options)));
}

}  // namespace logs

CloudLogRetriever::CloudLogRetriever(LogRetrieverOptions options) {
  if (!options.http) throw std::invalid_argument("CloudLogRetriever needs an HttpClient");
  if (!options.clock) throw std::invalid_argument("CloudLogRetriever needs a Clock");
  impl_ = std::make_unique<Impl>(logs::make_retriever_options(options, gcp::current_environment()));
}

CloudLogRetriever::CloudLogRetriever(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  if (!impl_) throw std::invalid_argument("CloudLogRetriever needs its insides");
}

CloudLogRetriever::CloudLogRetriever(CloudLogRetriever&&) noexcept = default;
CloudLogRetriever& CloudLogRetriever::operator=(CloudLogRetriever&&) noexcept = default;
CloudLogRetriever::~CloudLogRetriever() = default;

LogLines CloudLogRetriever::stream_log(const ClusterConfig& cluster,
                                       const std::string& workload_name,
                                       const std::string& namespace_, int rank,
                                       const LogFilter& filter, const LogQueryOptions& options) {
  check_rank(rank);
  check_tail(filter.tail_lines);
  logs::RankQuery query(cluster, workload_name, namespace_, options.slice, std::set<int>{rank},
                        impl_->lower_bound(filter, options), filter.grep);
  if (filter.tail_lines) {
    return LogLines(logs::make_tail_source(impl_->logging, std::move(query), *filter.tail_lines));
  }
  return LogLines(logs::make_forward_source(impl_->logging, std::move(query)));
}

void CloudLogRetriever::follow_log(const ClusterConfig& cluster, const std::string& workload_name,
                                   const std::string& namespace_, int rank, const LogFilter& filter,
                                   const LogQueryOptions& query, const FollowOptions& options,
                                   const std::function<void(const std::string&)>& on_line) {
  check_rank(rank);
  check_tail(filter.tail_lines);
  const logs::RankQuery rank_query(cluster, workload_name, namespace_, query.slice,
                                   std::set<int>{rank}, impl_->lower_bound(filter, query),
                                   filter.grep);
  logs::follow_entries(impl_->logging, rank_query, filter.tail_lines, options,
                       impl_->options.logging.reads_per_minute, *impl_->options.clock, on_line);
}

std::optional<int> CloudLogRetriever::failure_exit_code(const ClusterConfig& cluster,
                                                        const std::string& workload_name,
                                                        const std::string& namespace_,
                                                        const LogQueryOptions& options) {
  logs::WorkloadQuery query;
  query.project = cluster.project;
  query.cluster_id = cluster.cluster_id;
  query.namespace_ = namespace_;
  query.workload = workload_name;
  query.every_slice = true;
  query.not_before_nanos = impl_->lower_bound({}, options);
  query.grep = logs::kNonZeroExitCodeGrep;
  gcp::ListLogEntriesRequest request;
  request.resource_names = {"projects/" + cluster.project};
  request.filter = logs::build_workload_filter(query);
  request.page_size = 100;  // enough to see past the 143s of the workers that were stopped
  const gcp::LogEntriesPage page = impl_->quick_logging.list_entries_page(request);
  return logs::failure_exit_code(page.entries, workload_name);
}

LogExportResult CloudLogRetriever::export_logs(
    const ClusterConfig& cluster, const std::string& workload_name, const std::string& namespace_,
    const LogFilter& filter, const std::string& gcs_dest, const LogQueryOptions& options,
    const std::function<void(const ExportProgress&)>& progress) {
  ExportOptions how;
  how.via = ExportVia::kRead;
  return export_logs(cluster, workload_name, namespace_, filter, gcs_dest, options, how, progress);
}

LogExportResult CloudLogRetriever::export_logs(
    const ClusterConfig& cluster, const std::string& workload_name, const std::string& namespace_,
    const LogFilter& filter, const std::string& gcs_dest, const LogQueryOptions& options,
    const ExportOptions& how, const std::function<void(const ExportProgress&)>& progress) {
  std::optional<std::set<int>> ranks;
  if (filter.ranks) {
    ranks.emplace(filter.ranks->begin(), filter.ranks->end());
    if (ranks->empty()) {
      throw LogRetrievalError("the rank list to export is empty", 0, "INVALID_ARGUMENT");
    }
    check_rank(*ranks->begin());
  }
  const logs::RankQuery query(cluster, workload_name, namespace_, options.slice, std::move(ranks),
                              impl_->lower_bound(filter, options), filter.grep);
  logs::ExportSession session({.logging = impl_->logging,
                               .storage = impl_->storage,
                               .clock = *impl_->options.clock,
                               .buffer_bytes = impl_->options.export_buffer_bytes,
                               .max_chunk_bytes = impl_->options.storage.upload_chunk_bytes},
                              query, filter, gcs_dest, progress);
  // Copy and sink: the staged objects split per rank.
  const logs::StagedExportClients staged{
      .admin = impl_->admin,
      .storage = impl_->storage,
      .clock = *impl_->options.clock,
      .settings = impl_->options.export_settings,
      .max_chunk_bytes = impl_->options.storage.upload_chunk_bytes,
      .splitter = impl_->options.splitter};
  const logs::PathChoice choice = logs::choose_export_path(staged, query, filter, how);
  if (how.on_status) {
    how.on_status(
        {.phase = ExportStatus::Phase::kChosen,
         .via = choice.via,
         .message = fmt::format("exporting via {}: {}", to_string(choice.via), choice.reason)});
  }
  switch (choice.via) {
    case ExportVia::kCopy:
      return logs::export_by_copy(staged, query, filter, gcs_dest, how, choice.reason, progress);
    case ExportVia::kSink:
      return logs::export_by_sink(staged, query, filter, gcs_dest, how, choice.reason, progress);
    default:
      break;
  }
  if (how.cancelled && how.cancelled()) {
    throw LogRetrievalError("the export was cancelled", 0, "CANCELLED");
  }
  session.set_reason(choice.reason);
  return session.run();
}

const char* to_string(ExportVia via) {
  switch (via) {
    case ExportVia::kAuto:
      return "auto";
    case ExportVia::kRead:
      return "read";
    case ExportVia::kCopy:
      return "copy";
    case ExportVia::kSink:
      return "sink";
  }
  return "read";
}

std::optional<ExportVia> parse_export_via(std::string_view text) {
  for (const ExportVia via :
       {ExportVia::kAuto, ExportVia::kRead, ExportVia::kCopy, ExportVia::kSink}) {
    if (text == to_string(via)) return via;
  }
  return std::nullopt;
}

namespace {
constexpr const char* kExportPhases[] = {"chosen",    "copying", "waiting",
                                         "splitting", "writing", "cleaning"};
}  // namespace

void to_json(nlohmann::json& j, const ExportStatus& v) {
  j = {{"phase", kExportPhases[static_cast<int>(v.phase)]},
       {"via", to_string(v.via)},
       {"message", v.message}};
  if (!v.operation.empty()) j["operation"] = v.operation;
  if (!v.state.empty()) j["state"] = v.state;
  if (v.phase == ExportStatus::Phase::kCopying) j["percent"] = v.percent;
  if (v.objects_total > 0) j["objects"] = {{"read", v.objects}, {"total", v.objects_total}};
  if (v.lines > 0) j["lines"] = v.lines;
}

void from_json(const nlohmann::json& j, ExportStatus& v) {
  v = ExportStatus{};
  const std::string phase = j.value("phase", std::string("chosen"));
  for (int i = 0; i < static_cast<int>(std::size(kExportPhases)); ++i) {
    if (phase == kExportPhases[i]) v.phase = static_cast<ExportStatus::Phase>(i);
  }
  v.via = parse_export_via(j.value("via", std::string("read"))).value_or(ExportVia::kRead);
  v.message = j.value("message", std::string());
  v.operation = j.value("operation", std::string());
  v.state = j.value("state", std::string());
  v.percent = j.value("percent", 0);
  if (const auto it = j.find("objects"); it != j.end() && it->is_object()) {
    v.objects = it->value("read", std::int64_t{0});
    v.objects_total = it->value("total", std::int64_t{0});
  }
  v.lines = j.value("lines", std::int64_t{0});
}

std::int64_t CloudLogRetriever::read_fence_epoch(const std::string& uri) const {
  return gcp::read_epoch(impl_->fence_storage, uri);
}

std::int64_t CloudLogRetriever::advance_fence_epoch(const std::string& uri) const {
  return gcp::advance_epoch(impl_->fence_storage, uri);
}

}  // namespace falcon
