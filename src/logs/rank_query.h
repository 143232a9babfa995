// One query over a workload's ranks: the LQL filter sent to the server and the exact check the
// client applies to every entry that comes back. It also names what was asked (cluster,
// workload, namespace, slice, ranks, lower bound), so that an export needs nothing else.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "falcon/model.h"
#include "gcp/logging_client.h"
#include "logs/filter_builder.h"

namespace falcon::logs {

class RankQuery {
 public:
  // Throws LogRetrievalError (INVALID_ARGUMENT) as build_workload_filter.
  RankQuery(const ClusterConfig& cluster, const std::string& workload,
            const std::string& namespace_, int slice, std::optional<std::set<int>> ranks,
            std::int64_t not_before_nanos, std::optional<std::string> grep);

  // "projects/<project>".
  const std::string& resource_name() const { return resource_name_; }
  // The filter with the lower bound given at construction.
  const std::string& filter() const { return filter_; }
  // The same query with another timestamp lower bound, and for follow's polls only what is new
  // (WorkloadQuery::only_new).
  std::string filter_from(std::int64_t not_before_nanos,
                          std::optional<WorkloadQuery::NewEntries> only_new = {}) const;
  // An entries:list request for filter().
  gcp::ListLogEntriesRequest request(bool newest_first, int page_size) const;

  // The rank `entry` belongs to when it is one of the wanted ranks of the workload's slice,
  // else nullopt (see rank_of_entry).
  std::optional<int> accept(const gcp::LogEntry& entry) const;
  // The same on a rank already found (rank_of_labels): the rank when it is a wanted one.
  std::optional<int> accept_rank(std::optional<int> rank) const {
    if (!rank || (ranks_ && !ranks_->contains(*rank))) return std::nullopt;
    return rank;
  }

  const std::optional<std::set<int>>& ranks() const { return ranks_; }
  std::int64_t not_before_nanos() const { return spec_.not_before_nanos; }
  const std::string& cluster_name() const { return cluster_name_; }  // the registry's name
  const std::string& project() const { return spec_.project; }
  const std::string& cluster_id() const { return spec_.cluster_id; }
  const std::string& namespace_() const { return spec_.namespace_; }
  const std::string& workload() const { return spec_.workload; }
  int slice() const { return spec_.slice; }

 private:
  WorkloadQuery spec_;
  std::optional<std::set<int>> ranks_;
  std::string cluster_name_;
  std::string resource_name_;
  std::string filter_;
};

}  // namespace falcon::logs
