// Builds the Cloud Logging query (LQL) that selects a workload's pod logs (DESIGN D5). Pure
// functions: no I/O, no clock.
//
// Every value is a double-quoted LQL string with `\` and `"` escaped, so a workload name or a
// namespace cannot change the structure of the query; control characters are refused. Every
// group is parenthesised, because in LQL `OR` binds tighter than `AND`. For workload `w`, slice
// `s` and ranks `r1, r2` the filter is (one line per clause):
//
//   resource.type="k8s_container"
//   AND resource.labels.project_id="<project>"
//   AND resource.labels.cluster_name="<cluster_id>"
//   AND resource.labels.namespace_name="<namespace>"
//   AND timestamp>="<lower bound, RFC 3339 with 9 fractional digits>"
//   [AND (timestamp>="<newest seen>" OR receiveTimestamp>="<received from>")]   (follow's polls)
//   AND ((labels."k8s-pod/jobset_sigs_k8s_io/jobset-name"="w"
//         AND labels."k8s-pod/jobset_sigs_k8s_io/job-index"="s"
//         AND (labels."k8s-pod/batch_kubernetes_io/job-completion-index"="r1" OR ...="r2"))
//        OR ((resource.labels.pod_name:"w-slice-job-s-r1-" OR
//        resource.labels.pod_name:"w-slice-job-s-r2-")
//            AND (NOT labels."k8s-pod/jobset_sigs_k8s_io/jobset-name":*
//                 OR NOT labels."k8s-pod/jobset_sigs_k8s_io/job-index":*
//                 OR NOT labels."k8s-pod/batch_kubernetes_io/job-completion-index":*)))
//   AND (
//   <grep>
//   )
//
// This departs from the spec (DESIGN D5 wins): the spec's `labels."k8s-pod/xpk-workload"`,
// `labels."k8s-pod/batch.kubernetes.io/job-completion-index"` and pod names
// `{workload}-{index}-{hash}` are not what GKE and xpk produce (reference xpk.md section 4).
//
// The first branch finds labelled entries; the second finds, by pod name, the entries that lack
// any of the three labels (GKE agents that keep the dots in label keys, or drop pod labels).
// Without a rank list the completion-index and the worker part of the pod name are left out
// (every rank of the slice); with every_slice the job-index and the slice part go too (every
// pod of the workload). The pod-name test is a substring match on the server, so the client
// re-checks every entry exactly (gke_entries.h rank_of_entry, belongs_to_workload).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "falcon/log_retriever.h"
#include "falcon/model.h"

namespace falcon::logs {

// Cloud Logging rejects longer filters.
inline constexpr std::size_t kMaxFilterLength = 20'000;

// `value` as an LQL string literal: `"` + value with `\` -> `\\` and `"` -> `\"` + `"`.
// Throws LogRetrievalError (status INVALID_ARGUMENT) naming `what` when `value` holds a control
// character (below 0x20, or 0x7f).
std::string quote_lql(std::string_view value, std::string_view what);

// Checks that `grep`, a user's LQL expression, is self-contained: no control characters, string
// literals closed, parentheses balanced (outside strings) and no `--` comment, so that wrapped as
// `AND (\n<grep>\n)` it can only narrow the query. Throws LogRetrievalError (INVALID_ARGUMENT)
// otherwise.
void check_grep(std::string_view grep);

struct WorkloadQuery {
  std::string project;     // GCP project id
  std::string cluster_id;  // GKE cluster name
  std::string namespace_;
  std::string workload;
  int slice = 0;
  std::optional<std::vector<int>> ranks;  // null: every worker of the slice
  std::int64_t not_before_nanos = 0;      // timestamp lower bound, ns since the epoch
  std::optional<std::string> grep;        // LQL expression ANDed at the end
  bool every_slice = false;               // every pod of the workload: slice and ranks ignored
  // Follow's polls: only entries stamped at or after `timestamp_nanos` or received by Cloud
  // Logging at or after `received_nanos` (late ones), so that a poll does not read again what an
  // earlier poll already read.
  struct NewEntries {
    std::int64_t timestamp_nanos = 0;
    std::int64_t received_nanos = 0;
  };
  std::optional<NewEntries> only_new;
};

// The filter above. When a rank list would push the filter past kMaxFilterLength the ranks are
// left out of it (the caller selects them on its side anyway). Throws LogRetrievalError
// (INVALID_ARGUMENT) for an empty project, cluster id, namespace or workload, a negative slice or
// rank, a value with control characters or a grep that check_grep refuses.
std::string build_workload_filter(const WorkloadQuery& query);

// The timestamp lower bound of a query (DESIGN D5), in ns since the epoch: filter.since, else
// options.not_before, else `now` minus 24 hours (as gcloud does). Throws LogRetrievalError
// (INVALID_ARGUMENT) when since or not_before is not an RFC 3339 timestamp.
std::int64_t query_lower_bound(const LogFilter& filter, const LogQueryOptions& options,
                               std::chrono::system_clock::time_point now);

}  // namespace falcon::logs
