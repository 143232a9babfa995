// What GKE and xpk write into Cloud Logging for a workload's pods (DESIGN D5, reference xpk.md
// section 4), and how an entry is attributed to a rank and turned into a line.
//
// Pod labels appear in the entry's top-level `labels` map as `k8s-pod/<key>` with the dots of
// the key turned into underscores. A rank is the worker index within one slice:
//   labels."k8s-pod/jobset_sigs_k8s_io/jobset-name"              the workload (JobSet name)
//   labels."k8s-pod/jobset_sigs_k8s_io/job-index"                the slice
//   labels."k8s-pod/batch_kubernetes_io/job-completion-index"    the worker in the slice
// Entries without those labels (another agent, another sanitising rule, labels dropped) are
// recognised by the pod name `<workload>-slice-job-<slice>-<worker>-<suffix>`.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "gcp/logging_client.h"

namespace falcon::logs {

inline constexpr const char* kJobsetNameLabel = "k8s-pod/jobset_sigs_k8s_io/jobset-name";
inline constexpr const char* kJobIndexLabel = "k8s-pod/jobset_sigs_k8s_io/job-index";
inline constexpr const char* kCompletionIndexLabel =
    "k8s-pod/batch_kubernetes_io/job-completion-index";

// `<workload>-slice-job-<slice>-<worker>-`: every pod of that worker starts with it (the suffix
// is the pod's random part).
std::string pod_name_prefix(std::string_view workload, int slice, int worker);
// `<workload>-slice-job-<slice>-`: every pod of that slice starts with it.
std::string slice_pod_name_prefix(std::string_view workload, int slice);
// `<workload>-slice-job-`: every pod of the workload starts with it.
std::string workload_pod_name_prefix(std::string_view workload);

struct PodIndex {
  int slice = 0;
  int worker = 0;
};

// The slice and worker of a pod named `<workload>-slice-job-<slice>-<worker>-<suffix>` (decimal
// indexes without sign, a non-empty suffix of lowercase letters and digits). nullopt when the
// name is not a pod of `workload` (compared exactly, case-sensitively).
std::optional<PodIndex> parse_pod_name(std::string_view pod_name, std::string_view workload);

// The rank (worker index within `slice`) `entry` belongs to, or nullopt when it is not a log of
// that workload's slice. When the entry carries all three pod labels they decide (the jobset
// name must equal `workload` exactly); otherwise resource.labels.pod_name is parsed. Exact
// comparisons here back up the server's filter, whose string comparisons are case-insensitive
// and whose pod-name test is a substring match.
std::optional<int> rank_of_entry(const gcp::LogEntry& entry, std::string_view workload, int slice);

// rank_of_entry on the four values it reads (each null when the entry lacks it): the pod
// labels jobset-name, job-index and job-completion-index, and resource.labels.pod_name.
std::optional<int> rank_of_labels(const std::string_view* jobset_name,
                                  const std::string_view* job_index,
                                  const std::string_view* completion_index,
                                  const std::string_view* pod_name, std::string_view workload,
                                  int slice);

// True when `entry` is a log of one of `workload`'s pods, whatever the slice and worker: its
// jobset-name label equals `workload` exactly, or, without that label, its pod name parses as
// one of the workload's (parse_pod_name).
bool belongs_to_workload(const gcp::LogEntry& entry, std::string_view workload);

// The line a person reads: LogEntry::message (textPayload, else jsonPayload.message, else the
// compact jsonPayload) without one trailing "\n" (or "\r\n").
std::string log_line(const gcp::LogEntry& entry);

}  // namespace falcon::logs
