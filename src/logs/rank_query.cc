#include "logs/rank_query.h"

#include <vector>

#include "logs/gke_entries.h"

namespace falcon::logs {

RankQuery::RankQuery(const ClusterConfig& cluster, const std::string& workload,
                     const std::string& namespace_, int slice, std::optional<std::set<int>> ranks,
                     std::int64_t not_before_nanos, std::optional<std::string> grep)
    : ranks_(std::move(ranks)),
      cluster_name_(cluster.name),
      resource_name_("projects/" + cluster.project) {
  spec_.project = cluster.project;
  spec_.cluster_id = cluster.cluster_id;
  spec_.namespace_ = namespace_;
  spec_.workload = workload;
  spec_.slice = slice;
  if (ranks_) spec_.ranks = std::vector<int>(ranks_->begin(), ranks_->end());
  spec_.not_before_nanos = not_before_nanos;
  spec_.grep = std::move(grep);
  filter_ = build_workload_filter(spec_);
}

std::string RankQuery::filter_from(std::int64_t not_before_nanos,
                                   std::optional<WorkloadQuery::NewEntries> only_new) const {
  WorkloadQuery spec = spec_;
  spec.not_before_nanos = not_before_nanos;
  spec.only_new = only_new;
  return build_workload_filter(spec);
}

gcp::ListLogEntriesRequest RankQuery::request(bool newest_first, int page_size) const {
  gcp::ListLogEntriesRequest request;
  request.resource_names = {resource_name_};
  request.filter = filter_;
  request.newest_first = newest_first;
  request.page_size = page_size;
  return request;
}

std::optional<int> RankQuery::accept(const gcp::LogEntry& entry) const {
  const std::optional<int> rank = rank_of_entry(entry, spec_.workload, spec_.slice);
  if (!rank || (ranks_ && !ranks_->contains(*rank))) return std::nullopt;
  return rank;
}

}  // namespace falcon::logs
