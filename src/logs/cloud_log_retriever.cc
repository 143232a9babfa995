#include <stdexcept>

#include <fmt/format.h>

#include "falcon/errors.h"
#include "falcon/log_retriever.h"
#include "logs/filter_builder.h"
#include "logs/log_exporter.h"
#include "logs/log_sources.h"
#include "logs/rank_query.h"
#include "logs/retriever_options.h"

namespace falcon {

struct CloudLogRetriever::Impl {
  logs::RetrieverOptions options;
  gcp::LoggingClient logging;

  explicit Impl(logs::RetrieverOptions o) : options(std::move(o)), logging(options.logging) {}

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

}  // namespace

CloudLogRetriever::CloudLogRetriever(std::shared_ptr<HttpClient> http, GcpSettings settings,
                                     std::shared_ptr<Clock> clock)
    : CloudLogRetriever(logs::make_retriever_options(std::move(http), settings, std::move(clock),
                                                     gcp::current_environment())) {}

CloudLogRetriever::CloudLogRetriever(logs::RetrieverOptions options) {
  if (!options.clock) throw std::invalid_argument("CloudLogRetriever needs a Clock");
  if (!options.storage.http || !options.logging.http) {
    throw std::invalid_argument("CloudLogRetriever needs an HttpClient");
  }
  impl_ = std::make_unique<Impl>(std::move(options));
}

CloudLogRetriever::~CloudLogRetriever() = default;

LogLines CloudLogRetriever::stream_log(const ClusterConfig& cluster,
                                       const std::string& workload_name,
                                       const std::string& namespace_, int rank,
                                       const LogFilter& filter, const LogQueryOptions& options) {
  check_rank(rank);
  logs::RankQuery query(cluster, workload_name, namespace_, options.slice, std::set<int>{rank},
                        impl_->lower_bound(filter, options), filter.grep);
  if (filter.tail_lines) {
    if (*filter.tail_lines < 0) {
      throw LogRetrievalError(fmt::format("tail_lines {} is negative", *filter.tail_lines), 0,
                              "INVALID_ARGUMENT");
    }
    return LogLines(logs::make_tail_source(impl_->logging, std::move(query), *filter.tail_lines));
  }
  return LogLines(logs::make_forward_source(impl_->logging, std::move(query)));
}

void CloudLogRetriever::follow_log(const ClusterConfig& cluster, const std::string& workload_name,
                                   const std::string& namespace_, int rank, const LogFilter& filter,
                                   const LogQueryOptions& query, const FollowOptions& options,
                                   const std::function<void(const std::string&)>& on_line) {
  check_rank(rank);
  const logs::RankQuery rank_query(cluster, workload_name, namespace_, query.slice,
                                   std::set<int>{rank}, impl_->lower_bound(filter, query),
                                   filter.grep);
  logs::follow_entries(impl_->logging, rank_query, filter.tail_lines, options,
                       impl_->options.logging.reads_per_minute, *impl_->options.clock, on_line);
}

LogExportResult CloudLogRetriever::export_logs(
    const ClusterConfig& cluster, const std::string& workload_name, const std::string& namespace_,
    const LogFilter& filter, const std::string& gcs_dest, const LogQueryOptions& options,
    const std::function<void(const ExportProgress&)>& progress) {
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
  return logs::export_ranks(impl_->options, cluster, workload_name, namespace_, options.slice,
                            query, filter, gcs_dest, progress);
}

}  // namespace falcon
