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
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "falcon/clock.h"
#include "falcon/config.h"
#include "falcon/http_client.h"
#include "falcon/model.h"

namespace falcon {

// The longest tail one read may ask for (LogFilter::tail_lines, `falcon job logs --tail`): a
// thousand entries:list pages, over 16 minutes of the default read quota. A longer tail is an
// INVALID_ARGUMENT LogRetrievalError. Whatever N, a tail holds at most one page of entries and
// about a MiB of lines in memory; the rest of the lines wait in an unlinked temporary file (in
// $TMPDIR, else /tmp) until they are read.
inline constexpr int kMaxTailLines = 1'000'000;

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

// How an export gets the entries (docs/log-export.md):
//   kRead  entries:list, paced by the project's read quota (60 reads of 1000 entries a minute)
//   kCopy  an entries:copy operation into GcpSettings::log_copy_staging, then the staged objects
//          are split per rank: no Logging read quota, Cloud Storage instead
//   kSink  the hourly files of a Log Router sink (GcpSettings::log_archive): no Logging call
//   kAuto  kSink when the archive covers the window, else kCopy when GcpSettings::log_copy
//          allows it, else kRead; ExportStatus (phase kChosen) says which and why
// Every path writes the same rank objects, byte for byte, for the same entries.
enum class ExportVia { kAuto, kRead, kCopy, kSink };
const char* to_string(ExportVia via);  // "auto" | "read" | "copy" | "sink"
std::optional<ExportVia> parse_export_via(std::string_view text);

// What an export is doing now, for a person watching it (CLI stderr, the API's progress).
struct ExportStatus {
  enum class Phase {
    kChosen,     // the path is decided: `via`, and `message` says why
    kCopying,    // the copy operation's state and progress (each poll)
    kWaiting,    // the copy waits for its writer identity's access: `message` has the fix
    kSplitting,  // staged objects read (`objects` of `objects_total`) and `lines` found so far
    kWriting,    // rank objects being written
    kCleaning,   // staged objects being deleted
  };
  Phase phase = Phase::kChosen;
  ExportVia via = ExportVia::kRead;
  std::string message;    // one line for a person
  std::string operation;  // copy: the operation's name
  std::string state;      // copy: "SCHEDULED", "WAITING_FOR_PERMISSIONS", "RUNNING", ...
  int percent = 0;        // copy: the operation's progress
  std::int64_t objects = 0;
  std::int64_t objects_total = 0;
  std::int64_t lines = 0;
};

// An export's step as the API shows it (the `status` of GET /v1/exports/{id}): {"phase"
// ("chosen", "copying", "waiting", "splitting", "writing", "cleaning"), "via", "message",
// "operation"?, "state"?, "percent" (copying), "objects": {"read", "total"}?, "lines"?}.
void to_json(nlohmann::json& j, const ExportStatus& v);
void from_json(const nlohmann::json& j, ExportStatus& v);

// How export_logs runs, beyond what is exported. Every member has a default; the API route that
// starts exports (POST /v1/exports) passes `via` and `keep_staging` from its request, and
// `cancelled` and `on_status` from its job.
struct ExportOptions {
  ExportVia via = ExportVia::kAuto;
  // copy: leave the staged objects in place (their prefix is in collection_meta.json).
  bool keep_staging = false;
  // The end of the export's window (RFC 3339): the workload's end. `auto` takes the sink only
  // when the archive is complete up to it; `sink` reads the archive's hours up to it. Empty:
  // unknown (the workload may still be writing), so `auto` does not take the sink and `sink`
  // reads up to now.
  std::string window_end;
  // Asked between steps (every ~200 ms while a copy runs, before each staged object is read);
  // true stops the export: a copy operation is cancelled, staged objects are deleted, and
  // export_logs throws LogRetrievalError with status CANCELLED. Called on the exporting thread
  // and on the splitting threads, so it must be thread-safe (an atomic flag). Optional.
  std::function<bool()> cancelled;
  // Told of each step (ExportStatus). Called on the exporting thread (kSplitting also from the
  // splitting threads, never two at once). Optional.
  std::function<void(const ExportStatus&)> on_status;
};

// Why a log read or an export is waiting, so that the caller can tell its user: the library
// prints nothing. Given to LogRetrieverOptions::on_wait.
struct LogWaitNotice {
  enum class Reason {
    // Cloud Logging refused a read with 429 RESOURCE_EXHAUSTED: the project's read quota, which
    // every reader of the project shares, is spent. Not a failure: the read waits (at least the
    // server's RetryInfo, longer after each 429) and tries again until its deadline (5 minutes).
    kQuotaExceeded,
    // falcon's own read limiter holds the read back: the project's gcp.logging_reads_per_minute,
    // shared by this machine's falcon processes, is spent for now. Told only for waits of 5 s or
    // more (shorter ones are the ordinary pace of a long read).
    kReadRateShared,
    // The read limiter cannot share its state with other processes (e.g. the state directory is
    // not writable): this process keeps to the rate on its own. Told once; `wait` is the wait
    // of the read at hand.
    kReadRateNotShared,
    // A transient failure (HTTP 408, 5xx, a timeout or a lost connection) of a read or an upload;
    // tried again after `wait`.
    kRetrying,
  };
  Reason reason = Reason::kQuotaExceeded;
  std::string project;                     // the project of a Logging read; empty for Storage
  std::chrono::milliseconds wait{0};       // how long it waits now
  std::chrono::milliseconds waited{0};     // already waited for this request, before this wait
  std::chrono::milliseconds time_left{0};  // kQuotaExceeded, kRetrying: until it gives up
  // One line for a person, e.g. "Cloud Logging read quota of project p is spent (HTTP 429
  // RESOURCE_EXHAUSTED); waiting 20 s before reading again (waited 40 s so far; gives up in
  // 4 min)".
  std::string message;
};
using LogWaitHandler = std::function<void(const LogWaitNotice&)>;

// What a CloudLogRetriever is built from.
struct LogRetrieverOptions {
  std::shared_ptr<HttpClient> http;  // required: carries every request
  std::shared_ptr<Clock> clock;      // required: "now", every wait and every deadline
  // Endpoints, credentials (Application Default Credentials, resolved on the first request),
  // logging_reads_per_minute, http_timeout_s, upload_chunk_bytes.
  GcpSettings settings;
  // The directory of the read limiter's state: one small file per project, shared under a lock
  // by every falcon process that uses the same directory, so that together they keep to
  // settings.logging_reads_per_minute (the facade uses <state_dir>/quota). Empty: the limit
  // holds for this retriever's reads only.
  std::string quota_dir;
  // Optional. Called on the reading thread before every wait worth telling (LogWaitNotice); must
  // be thread-safe when the retriever is used from several threads.
  LogWaitHandler on_wait;
};

// For `--follow`: how long to keep polling and when to stop.
struct FollowOptions {
  // Time between polls. Raised to the pace the per-project read limiter sustains (about 60 s /
  // logging_reads_per_minute) when shorter, so that following never reads faster than the quota
  // allows and never blocks inside the limiter.
  std::chrono::milliseconds poll_interval{5000};
  // How late an entry may be stamped and still be printed: each poll reads entries stamped from
  // the newest timestamp seen minus this, but of those only the ones stamped at or after the
  // newest, or received by Cloud Logging since shortly before the previous poll (see
  // visibility_delay). What was already printed is recognised by insertId and timestamp.
  std::chrono::milliseconds lookback{5000};
  // How long after Cloud Logging received an entry it may take to be listed (entries:tail buffers
  // 2 s by default for the same reason). Each poll re-reads what the server received from this
  // long before the previous poll (by the server's clock, its HTTP Date); so a poll of a log that
  // has been quiet for that long costs one read.
  std::chrono::milliseconds visibility_delay{2000};
  // Required. Called after every poll and every ~200 ms while waiting for the next one; polling
  // ends as soon as it returns true (the workload reached a terminal state, Ctrl-C). No poll is
  // made after it returned true, so a caller that wants the last lines of a finished workload
  // keeps returning false for one more poll interval.
  std::function<bool()> should_stop;
};

// `falcon job logs --follow`'s stop rule, as a FollowOptions::should_stop: true at once when
// `interrupted()` is; otherwise `is_finished()` (e.g. "the workload reached a terminal state",
// an xpk call) is asked at most every `check_every` by `clock`, and once it said yes polling goes
// on for `linger` more (at least one more poll, so that the last lines still arrive). Every
// "now" is the clock's, so a test drives it in simulated time.
std::function<bool()> follow_until_finished(
    std::shared_ptr<Clock> clock, std::function<bool()> is_finished,
    std::function<bool()> interrupted, std::chrono::milliseconds linger,
    std::chrono::milliseconds check_every = std::chrono::seconds(15));

// The linger that follow_until_finished needs with `options`: one more poll, after the entries
// written as the workload ended have become visible (a poll interval and the visibility delay).
std::chrono::milliseconds follow_linger(const FollowOptions& options);

// Thread-safe: calls may run concurrently (they share the HTTP client, the credentials and the
// per-project read limiter); each LogLines it returns belongs to one reader.
class CloudLogRetriever {
 public:
  // Does no I/O (credentials are looked for on the first request, the quota directory is made
  // on the first read). Throws std::invalid_argument when options.http or options.clock is
  // missing.
  explicit CloudLogRetriever(LogRetrieverOptions options);
  // The insides, built by src/logs (tests and benchmarks use logs::make_retriever there, to
  // give explicit clients, credentials and retry policies). Opaque here.
  struct Impl;
  explicit CloudLogRetriever(std::unique_ptr<Impl> impl);
  CloudLogRetriever(CloudLogRetriever&&) noexcept;
  CloudLogRetriever& operator=(CloudLogRetriever&&) noexcept;
  ~CloudLogRetriever();

  // Lines of one rank (worker `rank` of slice options.slice), oldest first, from filter.since
  // (else options.not_before, else the last 24 hours). filter.grep is a Logging query expression
  // ANDed on the server. With filter.tail_lines = N, the last N lines in time order, read
  // newest-first: one request for N <= 1000 whatever the log's size (0: no lines), ceil(N / 1000)
  // otherwise, N at most kMaxTailLines, memory bounded as said there. filter.ranks is ignored
  // (the rank is the argument). A line is textPayload, else jsonPayload.message, else
  // the compact jsonPayload, without its trailing newline.
  // Throws LogRetrievalError (INVALID_ARGUMENT) at once for arguments that cannot make a query
  // (empty names, control characters, a malformed since or grep, a negative rank, a tail_lines
  // below 0 or above kMaxTailLines). Otherwise does
  // no I/O until the first next(); the returned sequence reads a page of 1000 entries each time
  // the previous one is used up, and throws LogRetrievalError (HTTP status and the API's message)
  // when a page cannot be read after retries.
  LogLines stream_log(const ClusterConfig& cluster, const std::string& workload_name,
                      const std::string& namespace_, int rank, const LogFilter& filter,
                      const LogQueryOptions& options = {});

  // Polls for new lines of one rank and hands each to `on_line` once (no duplicates, none
  // skipped when timestamps tie or entries arrive up to options.lookback late), until
  // options.should_stop returns true. Starts with the lines stream_log would return (with
  // filter.tail_lines: only the last N), then polls entries:list in time order for what is new
  // (FollowOptions::lookback, visibility_delay): a poll that finds nothing new is one request,
  // and new lines cost about one request per 1000 of them. Blocks; the waits between polls end
  // within ~200 ms of should_stop turning true (a request in flight, or a quota wait inside it,
  // is not cut short). Throws LogRetrievalError as stream_log, and std::invalid_argument without
  // should_stop.
  void follow_log(const ClusterConfig& cluster, const std::string& workload_name,
                  const std::string& namespace_, int rank, const LogFilter& filter,
                  const LogQueryOptions& query, const FollowOptions& options,
                  const std::function<void(const std::string&)>& on_line);

  // The exit code a failed workload reported: xpk's container script ends each worker's log
  // with `EXIT_CODE=<n>`; this is the first non-zero one (any slice, any worker) from
  // options.not_before (else the last 24 hours), preferring one that is not 143 or 137 (the
  // workers JobSet stopped because another failed). nullopt when there is none: a worker killed
  // before it could print, a workload that did not fail, or a line Cloud Logging has not made
  // visible yet. One entries:list request with at most 2 attempts, so that a caller asking for a
  // status is not held by the long retries that reads of logs get. Throws LogRetrievalError.
  std::optional<int> failure_exit_code(const ClusterConfig& cluster,
                                       const std::string& workload_name,
                                       const std::string& namespace_,
                                       const LogQueryOptions& options = {});

  // Exports the ranks of filter.ranks (null: every rank of slice options.slice found in the
  // logs; [0]: rank 0 only) to `<gcs_dest>/rank-<N>.log` (gcs_dest is gs://BUCKET[/PATH], with or
  // without a trailing slash), then `<gcs_dest>/collection_meta.json`. Each object holds the
  // rank's lines, oldest first, each ending in '\n'. filter.since / options.not_before and
  // filter.grep apply as in stream_log; filter.tail_lines is ignored (an export is the whole
  // window). A requested rank without lines gets an empty object and `"empty": true` in the
  // metadata (without a rank list, rank 0 counts as requested: rank-0.log always exists).
  // One query reads every requested rank (the request count is the number of pages of log data,
  // not ranks x pages); each rank streams into its own resumable upload, and the chunk buffers
  // of all ranks together stay within 64 MiB,
  // each at most the storage chunk (GcpSettings::upload_chunk_bytes, 256 KiB by default), except
  // that a rank never gets less than the protocol's 256 KiB (more ranks than the budget holds,
  // or ranks first seen after it was shared out, add 256 KiB each). Memory does not grow with
  // the size of the logs beyond one chunk per rank. A rank object exists only once its upload
  // finished, and all of them are finished only after every page was read; the metadata (workload,
  // cluster, namespace, per-rank lines, bytes and first/last timestamps, the exact query and the
  // LogFilter, exported_at) is written last. `progress` is called after every page for the ranks it
  // touched, and once per rank with done = true. Blocks. Throws LogRetrievalError (INVALID_ARGUMENT
  // for bad arguments; else the HTTP status and message of the read or upload that failed after
  // retries); then every open upload session is cancelled and no metadata is written. Exporting
  // again to the same destination: once every page was read, and before the first rank object is
  // finished, the previous collection_meta.json is deleted, so metadata never describes a mix
  // of old and new rank objects; a failure before that point leaves the previous export whole.
  LogExportResult export_logs(const ClusterConfig& cluster, const std::string& workload_name,
                              const std::string& namespace_, const LogFilter& filter,
                              const std::string& gcs_dest, const LogQueryOptions& options = {},
                              const std::function<void(const ExportProgress&)>& progress = {});

  // The same export by the path `how.via` says (ExportVia; the overload above is kRead), with the
  // same rank objects. collection_meta.json also records `via` (the path taken and why), the
  // copy operation, the entries copied, the staged objects read, the repeats dropped and
  // `logging_read_calls` (entries:list calls: 0 for copy and sink).
  //
  // copy: checks first, each failure a LogRetrievalError (FAILED_PRECONDITION) that says the
  // fix: log_copy_staging is set; the filter is at most 20,000 characters; the source log bucket
  // has no CMEK key; the project's Logging service account may create objects in the staging
  // bucket (when its IAM policy can be read; the error gives the gcloud command that grants it).
  // Then starts entries:copy with the export's exact filter into a staging prefix of its own,
  // polls it every log_copy_poll_s (ExportStatus kCopying), cancels it and fails when it waits
  // for permissions longer than log_copy_permission_wait_s, or when `how.cancelled`; reads the
  // staged objects (RankSplitter: parallel, memory bounded whatever their size), writes the
  // ranks, and deletes the staged objects unless keep_staging (also after a failure).
  // sink: needs log_archive and no filter.grep (a Logging query runs on the server only:
  // INVALID_ARGUMENT); reads the hourly files of logs stdout and stderr from the hour of the
  // lower bound to the hour of `how.window_end` (else now).
  // Blocks. Throws as the other overload.
  LogExportResult export_logs(const ClusterConfig& cluster, const std::string& workload_name,
                              const std::string& namespace_, const LogFilter& filter,
                              const std::string& gcs_dest, const LogQueryOptions& options,
                              const ExportOptions& how,
                              const std::function<void(const ExportProgress&)>& progress = {});

  // Storage fencing (fence.h) through this retriever's Cloud Storage client: the epoch the
  // fence object `uri` (gs://BUCKET/OBJECT) holds, 0 when none; and the next epoch written with
  // a generation precondition (gcp/epoch_fence.h). Throw LogRetrievalError when the object
  // cannot be read or written, std::invalid_argument for a uri that names no object. Bounded:
  // three attempts within 20 s (10 s each), not an export's 15 minutes, so that a Cloud Storage
  // outage fails a submit, a recovery's turn or a job's check instead of holding it.
  std::int64_t read_fence_epoch(const std::string& uri) const;
  std::int64_t advance_fence_epoch(const std::string& uri) const;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace falcon
