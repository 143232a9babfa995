// CloudLogRetriever: per-rank pod logs from Cloud Logging, streamed or archived to Cloud Storage.
//
// Logs are never held whole in memory. stream_log returns a lazy sequence: a page of entries is
// fetched only when the caller has read the previous one, and nothing is fetched after the
// caller stops. export_logs pipes each rank into a resumable upload in bounded chunks.
//
// How entries are found (DESIGN D5; this corrects the spec, whose label spellings are not what
// GKE writes): resource.type="k8s_container", the cluster's project and cluster_id, the
// namespace, the workload by labels."k8s-pod/jobset_sigs_k8s_io/jobset-name", the rank by
// labels."k8s-pod/batch_kubernetes_io/job-completion-index" within slice
// labels."k8s-pod/jobset_sigs_k8s_io/job-index", falling back to the pod name
// `<workload>-slice-job-<slice>-<rank>-<suffix>` for entries without those labels. Every query
// has a timestamp lower bound. Every value placed in a filter is quoted and escaped.
//
//   falcon::LogLines lines = retriever.stream_log(cluster, "llama-bench", "default", 0, filter);
//   for (const std::string& line : lines) std::cout << line << '\n';   // pages fetched lazily
#pragma once

#include <chrono>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string>

#include "falcon/clock.h"
#include "falcon/config.h"
#include "falcon/http_client.h"
#include "falcon/model.h"

namespace falcon {

// Where the lines come from; implemented by the retriever.
class LogLineSource {
 public:
  virtual ~LogLineSource() = default;
  // The next line, or nullopt at the end. May block on a request. Throws LogRetrievalError.
  virtual std::optional<std::string> next() = 0;
};

// A move-only, single-pass sequence of log lines (an input range).
class LogLines {
 public:
  explicit LogLines(std::unique_ptr<LogLineSource> source);

  // The next line, or nullopt at the end. Throws LogRetrievalError.
  std::optional<std::string> next();

  class iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = std::string;
    using difference_type = std::ptrdiff_t;
    using pointer = const std::string*;
    using reference = const std::string&;

    iterator() = default;
    explicit iterator(LogLines* owner);
    reference operator*() const { return *current_; }
    pointer operator->() const { return &*current_; }
    iterator& operator++();
    void operator++(int) { ++*this; }
    friend bool operator==(const iterator& it, std::default_sentinel_t) {
      return !it.current_.has_value();
    }

   private:
    LogLines* owner_ = nullptr;
    std::optional<std::string> current_;
  };

  iterator begin() { return iterator(this); }
  std::default_sentinel_t end() { return {}; }

 private:
  std::unique_ptr<LogLineSource> source_;
};

// Extra query settings beyond the spec's LogFilter.
struct LogQueryOptions {
  int slice = 0;  // which slice's workers are "ranks"
  // Lower bound used when filter.since is absent (RFC 3339). The facade passes the handle's
  // submitted_at minus a margin; when this is empty too, the last 24 hours (as gcloud does).
  std::optional<std::string> not_before;
};

// One export progress event, for a progress line per rank.
struct ExportProgress {
  int rank = 0;
  std::int64_t lines = 0;
  std::int64_t bytes = 0;
  bool done = false;
};

// For `--follow`: how long to keep polling and when to stop.
struct FollowOptions {
  std::chrono::milliseconds poll_interval{5000};  // at least the per-project read pace
  // Checked between polls; polling ends shortly after this returns true (e.g. the workload
  // reached a terminal state, or Ctrl-C was pressed).
  std::function<bool()> should_stop;
};

class CloudLogRetriever {
 public:
  // `http` carries every request; `settings` gives endpoints, credentials and quotas.
  CloudLogRetriever(std::shared_ptr<HttpClient> http, GcpSettings settings,
                    std::shared_ptr<Clock> clock);
  ~CloudLogRetriever();

  // Lines of one rank, oldest first. With filter.tail_lines = N, the last N lines in time order
  // (one request for N <= 1000). filter.grep is a Logging query expression ANDed on the server.
  // filter.ranks is ignored (the rank is the argument). Does not block until the first next().
  // The returned sequence throws LogRetrievalError (HTTP status and the API's message) when a
  // page cannot be read.
  LogLines stream_log(const ClusterConfig& cluster, const std::string& workload_name,
                      const std::string& namespace_, int rank, const LogFilter& filter,
                      const LogQueryOptions& options = {});

  // Polls for new lines of one rank and hands each to `on_line` once (no duplicates, none
  // skipped when timestamps tie or entries arrive late), until options.should_stop returns true.
  // Blocks. Throws LogRetrievalError.
  void follow_log(const ClusterConfig& cluster, const std::string& workload_name,
                  const std::string& namespace_, int rank, const LogFilter& filter,
                  const LogQueryOptions& query, const FollowOptions& options,
                  const std::function<void(const std::string&)>& on_line);

  // Exports the ranks of filter.ranks (null: every rank found in the logs) to
  // `<gcs_dest>/rank-<N>.log`, then `<gcs_dest>/collection_meta.json`. A rank object exists
  // only once its upload finished; the metadata is written last. Blocks. Throws
  // LogRetrievalError (reads or uploads failing after retries) and leaves no object that claims
  // to be complete.
  LogExportResult export_logs(const ClusterConfig& cluster, const std::string& workload_name,
                              const std::string& namespace_, const LogFilter& filter,
                              const std::string& gcs_dest, const LogQueryOptions& options = {},
                              const std::function<void(const ExportProgress&)>& progress = {});

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace falcon
