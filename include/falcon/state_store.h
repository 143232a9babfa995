// StateStore: falcon's memory (issue 13, DESIGN §5). Submissions, selection decisions, probe
// history, observed workload states, log exports, recovery incidents, circuit breakers and a
// leader lease, kept in a real database so that a restart resumes and several processes agree.
//
// Two backends, chosen by a URL (docs/state-store.md):
//   sqlite:///var/lib/falcon/falcon.db   SQLite (WAL, synchronous=FULL, busy timeout): the
//   /var/lib/falcon/falcon.db            embedded default, one machine
//   postgresql://falcon@db:5432/falcon   PostgreSQL: several `falcon serve` replicas and CLIs
//   postgres://...                       sharing one database
//
//   auto store = falcon::open_state_store(falcon::default_state_url(state_dir));
//   const auto id = store->record_selection(selection);
//   auto back = store->get_selection(id);  // back->selection == selection
//
// Opening applies the schema migrations this binary knows (in one transaction, serialised
// against other processes opening the same database) and refuses a database whose schema is
// newer. Every write is one transaction: when a call returns, its effect is committed and
// survives a crash of this process (and, on SQLite, of the machine: synchronous=FULL); when it
// throws, nothing of it is visible. Every method may be called from many threads at once: each
// call borrows a connection from the store's small pool (StateStoreOptions::max_connections).
//
// Times are std::chrono::system_clock time points, stored with millisecond precision (anything
// finer is truncated). Model types keep their ISO 8601 strings; the store parses them to index
// them and writes them back canonically (`2026-04-13T08:00:00.123Z`). Times that decide
// something (lease expiry, breaker cool-downs, retention) are given by the caller from its Clock,
// never read from the database server: tests drive them with a fake clock, and replicas sharing
// PostgreSQL must keep their clocks in sync (NTP) to well within a lease's TTL.
//
// Flexible parts (a probe's capacity signals, export progress, recovery details) are JSON text,
// so later fields need no migration. The store checks that such text is valid JSON.
//
// Errors: every database failure throws StateStoreError (backend, operation, the database's
// message; never a password). A value that cannot be stored (a timestamp that does not parse,
// text that is not JSON, an empty key, a limit out of range, a malformed cursor) throws
// std::invalid_argument before anything is written.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "falcon/clock.h"
#include "falcon/model.h"

namespace falcon {

using StoreTime = std::chrono::system_clock::time_point;

// The newest schema this binary knows; a database at a higher version is refused.
inline constexpr int kStateSchemaVersion = 7;

struct StateStoreOptions {
  // Connections kept per store object. A call waits for a free one when all are busy.
  int max_connections = 4;
  // SQLite: how long a writer waits for another process's write lock before failing with
  // "database is locked". PostgreSQL: the connect timeout (rounded up to seconds).
  std::chrono::milliseconds busy_timeout{10000};
  // Only for bookkeeping times (when a migration or an import ran). Null: the system clock.
  std::shared_ptr<Clock> clock;
};

// One workload falcon submitted: what SubmissionRecord (workload_manager.h) holds, plus an id,
// the full spec when the submitter kept it, and the latest state observed for it.
struct SubmissionRow {
  std::int64_t id = 0;    // assigned by the store
  WorkloadHandle handle;  // workload_name, cluster (registry name), namespace, submitted_at
  std::string accelerator_type;
  std::string device_class;  // tpu | gpu | cpu
  std::string cluster_id;
  std::string project;
  std::string zone;
  std::string docker_image;
  std::string priority;
  std::optional<WorkloadSpec> spec;  // what was asked (a managed workload is resubmitted from it)
  // The recorded decision that chose the cluster (StateStore::record_selection's id); 0 when
  // the cluster was given, or the submission predates schema 3.
  std::int64_t selection_id = 0;
  // Read-only, filled by reads: the latest state recorded by record_workload_event at or after
  // submitted_at, and when it was observed. Null until one is recorded.
  std::optional<std::string> state;
  std::optional<StoreTime> state_observed_at;
  bool operator==(const SubmissionRow&) const = default;
};

// Filters of list_submissions; every set filter must match. Rows come newest first
// (submitted_at, then id, descending).
struct SubmissionQuery {
  std::optional<std::string> cluster;  // registry name, exact
  std::optional<std::string> state;    // latest observed state, exact (QUEUED, ...)
  // Only submissions not seen to end: no state recorded, or one that is not terminal
  // (is_terminal_state). What a probe's listing can still tell something new about.
  bool unfinished = false;
  std::optional<std::string> name_contains;   // substring of the workload name, case-sensitive
  std::optional<StoreTime> submitted_from;    // inclusive
  std::optional<StoreTime> submitted_before;  // exclusive
  int limit = 100;                            // 1..1000 rows per page
  std::string cursor;                         // "" for the first page, else a next_cursor
  bool with_total = false;                    // also count every matching row (all pages)
};

struct SubmissionPage {
  std::vector<SubmissionRow> rows;
  std::string next_cursor;  // pass it back for the next page; "" when this page is the last
  std::int64_t total = -1;  // rows matching the filters on every page (with_total), else -1
};

struct SubmissionsImportResult {
  bool file_found = false;
  bool already_imported = false;  // an earlier import of this file committed: nothing was read
  int imported = 0;               // (cluster, workload) records inserted
  int superseded = 0;             // older records of a pair that a later line replaced
  int kept_existing = 0;          // pairs the store already had (its row is newer): not touched
  int skipped_lines = 0;          // torn or damaged lines (empty lines are not counted)
  bool made_read_only = false;    // the file's write bits were cleared
  std::string note;               // why it could not be made read-only, when it could not
};

// A selection decision as it was made, by id.
struct SelectionRecord {
  std::int64_t id = 0;
  ClusterSelection selection;  // stored whole as JSON: later fields survive without a migration
  // Non-zero for a decision made again on exactly the inputs of selection `same_as` (a reused
  // decision, serve.select_reuse_ms): its selection is that one's, with this decided_at and id.
  std::int64_t same_as = 0;
  bool operator==(const SelectionRecord&) const = default;
};

// A decision without its explanation (candidates, probes, scores): what a list of decisions
// shows. Its fields are those of the SelectionRecord with the same id.
struct SelectionSummary {
  std::int64_t id = 0;
  std::int64_t same_as = 0;  // as SelectionRecord::same_as
  std::string accelerator;
  std::string selected_cluster;
  std::string decided_at;
  std::string policy;  // "" for a record older than policies
  std::string reason;
  bool operator==(const SelectionSummary&) const = default;
};

// One probe of one cluster, with how it was obtained.
struct ProbeRecord {
  std::int64_t id = 0;        // assigned by the store
  ClusterProbeResult result;  // cluster, reachable, queue_depth, running_count, error, probed_at
  std::string backend;        // how it was probed: "xpk", "kube", ...
  std::int64_t duration_ms = 0;
  std::string extra_json = "{}";  // a JSON object: capacity signals and later fields
  bool operator==(const ProbeRecord&) const = default;
};

// A probe's extra_json: {"capacity": [...]} (AcceleratorCapacity, the ClusterQueue's free quota)
// when the probe read any, "capacity_error" when it could not, "admission_delay_s" when known,
// else "{}". Capacity lives there, not in a column of its own.
std::string probe_extra_json(const ClusterProbeResult& result);

// Probe retention, applied by downsample_probes: probes younger than `full_resolution` are
// kept; older ones are thinned to the newest probe per cluster per `bucket` (buckets aligned to
// the Unix epoch); with `drop_after`, probes older than that are deleted. The latest probe of
// each cluster is always answered by latest_probes, whatever was deleted.
struct ProbeRetention {
  std::chrono::hours full_resolution{24};
  std::chrono::minutes bucket{60};
  std::optional<std::chrono::hours> drop_after;  // null: keep the thinned history forever
};

struct DownsampleResult {
  std::int64_t thinned = 0;  // probes deleted by bucketing
  std::int64_t dropped = 0;  // probes deleted by drop_after
};

// An observed change of a workload's state.
struct WorkloadEvent {
  std::int64_t id = 0;  // assigned by the store
  std::string cluster;
  std::string workload;
  std::string state;  // QUEUED | RUNNING | COMPLETED | FAILED | UNKNOWN (not checked)
  StoreTime observed_at;
  std::string detail;  // free text, e.g. what the observer saw
  bool operator==(const WorkloadEvent&) const = default;
};

// A delete of a workload (`xpk workload delete`, issue 27): recorded before xpk runs
// (record_delete_intent) and then finished with its outcome (finish_delete). A record without
// an outcome is a delete that was asked for and whose end nobody saw (in flight, or the process
// died during it).
inline constexpr const char* kDeleteDeleted = "deleted";     // xpk deleted it
inline constexpr const char* kDeleteNotFound = "not_found";  // there was no such workload
inline constexpr const char* kDeleteFailed = "failed";       // xpk failed or timed out: detail

struct DeleteRecord {
  std::int64_t id = 0;  // assigned by the store
  std::string cluster;  // registry name
  std::string workload;
  StoreTime requested_at;
  std::optional<std::string> outcome;  // kDelete*; null until finished
  std::string detail;                  // why it failed (at most 1 KB kept)
  std::optional<StoreTime> finished_at;
  bool operator==(const DeleteRecord&) const = default;
};

// A nomination of MultiKueue worker clusters for a manager Workload (the dispatcher,
// docs/dispatch.md): recorded before the Workload's status is patched, then its outcome.
inline constexpr const char* kNominationPatched = "patched";    // the manager took it
inline constexpr const char* kNominationConflict = "conflict";  // the Workload changed first
inline constexpr const char* kNominationFailed = "failed";      // the patch failed: detail

struct NominationRecord {
  std::int64_t id = 0;       // assigned by the store
  std::string manager;       // the manager's API server
  std::string workload_uid;  // the manager Workload's metadata.uid
  std::string namespace_;
  std::string workload;
  std::string accelerator;
  std::vector<std::string> clusters;  // MultiKueueCluster names, as patched
  std::int64_t selection_id = 0;      // the decision (0: not recorded)
  StoreTime requested_at;
  std::optional<std::string> outcome;  // kNomination*; null until finished
  std::string detail;                  // at most 1 KB kept
  std::optional<StoreTime> finished_at;
  bool operator==(const NominationRecord&) const = default;
};

inline constexpr const char* kExportQueued = "queued";
inline constexpr const char* kExportRunning = "running";
inline constexpr const char* kExportDone = "done";
inline constexpr const char* kExportFailed = "failed";

// One log export (DESIGN D6) and how far it got.
struct ExportRecord {
  std::int64_t id = 0;  // assigned by start_export
  std::string workload;
  std::string cluster;
  std::string dest;                    // gs://bucket/prefix
  std::string state = kExportRunning;  // queued | running | done | failed
  std::string progress_json = "{}";    // JSON, replaced by update_export_progress
  std::string result_json = "null";    // JSON, set by finish_export (a LogExportResult, an error)
  StoreTime started_at;
  std::optional<StoreTime> finished_at;
  bool operator==(const ExportRecord&) const = default;
};

// One recovery incident of a managed workload (issue 16, docs/self-healing.md): its phases give
// the SVRT, recovered - t_violation.
struct RecoveryRecord {
  std::string incident_id;               // chosen by the supervisor, unique
  std::string workload;                  // the managed workload's original name
  std::string cluster;                   // where it failed (the failed incarnation's cluster)
  std::string to_cluster;                // where the replacement was submitted ("" until decided)
  std::string replacement;               // the replacement's name, <name>-r<k> ("" until decided)
  std::string cause;                     // what was observed, for people
  int attempts = 0;                      // submit attempts of the replacement
  std::optional<StoreTime> t_violation;  // first observation of the failure
  std::optional<StoreTime> detected;
  std::optional<StoreTime> decided;
  std::optional<StoreTime> submitted;
  std::optional<StoreTime> admitted;   // the replacement went QUEUED -> RUNNING
  std::optional<StoreTime> recovered;  // RUNNING for the stability window
  std::string classification;          // the incident's kind: infrastructure | application
  std::string outcome;                 // open | recovered | gave_up | not_recovered | ...
  std::string detail_json = "{}";      // JSON: replacement names, reasons, ...
  bool operator==(const RecoveryRecord&) const = default;
};

inline constexpr const char* kBreakerClosed = "closed";
inline constexpr const char* kBreakerOpen = "open";
inline constexpr const char* kBreakerHalfOpen = "half_open";

// The shared state of one circuit breaker (issue 15). The state machine lives in the caller;
// the store keeps the state and makes concurrent updates safe with a version number.
struct BreakerState {
  std::string key;                     // "<cluster>" or "<cluster>/<accelerator>"
  std::string state = kBreakerClosed;  // closed | open | half_open
  int consecutive_failures = 0;
  int trips = 0;
  std::optional<StoreTime> opened_until;  // when an open breaker lets a trial through
  StoreTime updated_at;
  std::int64_t version = 0;  // 0: not stored yet; each successful compare-and-set adds one
  bool operator==(const BreakerState&) const = default;
};

// A named lease: at most one holder at a time, until expires_at.
struct Lease {
  std::string name;
  std::string holder;
  // Grows by one each time the lease changes hands (or is re-acquired after expiring): a
  // fencing token. Renewal keeps it. A holder that sees its token change has lost the lease.
  std::int64_t token = 0;
  StoreTime acquired_at;
  StoreTime expires_at;
  StoreTime heartbeat_at;  // the holder's last acquire or renew
  bool operator==(const Lease&) const = default;
};

// Where a managed workload stands (docs/self-healing.md). Stored as its name (to_string).
enum class ManagedState {
  kSubmitting,  // the first submit is under way
  kStarting,    // submitted, not yet seen RUNNING
  kRunning,     // seen RUNNING
  kRecovering,  // an incident is being handled (ManagedWorkloadRecord::phase says where)
  kCompleted,
  kFailed,  // an application failure, not recovered
  kGaveUp,
  kCancelled,
};
// "submitting", "starting", "running", "recovering", "completed", "failed", "gave_up",
// "cancelled"; parse_managed_state is its inverse (nullopt for any other text).
const char* to_string(ManagedState state);
std::optional<ManagedState> parse_managed_state(std::string_view text);
// Submitting, starting, running or recovering: the supervisor still looks after it.
bool is_active(ManagedState state);
// The one table of a managed workload's moves: from an active state to any later one (a
// recovery starts the workload again: recovering -> starting), never out of an ended one (a
// cancel, a completion, a failure or a give-up is final). Moving to the same state is allowed.
bool managed_transition_allowed(ManagedState from, ManagedState to);

// Where a recovery stands (ManagedWorkloadRecord::phase; docs/self-healing.md): fencing the old
// incarnation, deciding where the replacement goes, submitting it (the intent is stored before
// the submit), confirming that a failed create made nothing. kNone outside a recovery.
enum class RecoveryPhase { kNone, kFencing, kDeciding, kSubmitting, kConfirming };
// "", "fencing", "deciding", "submitting", "confirming"; parse_recovery_phase is its inverse.
const char* to_string(RecoveryPhase phase);
std::optional<RecoveryPhase> parse_recovery_phase(std::string_view text);

// A workload handed to the supervisor (issue 16, docs/self-healing.md): what to submit again
// when it is lost, its recovery options, and where its current incarnation runs.
struct ManagedWorkloadRecord {
  std::string name;        // the original name; incarnations are <name>, <name>-r1, <name>-r2, ...
  WorkloadSpec spec;       // as first submitted (spec.name == name)
  int max_recoveries = 3;  // recoveries allowed in all
  std::chrono::milliseconds stable_after{300000};  // a replacement RUNNING this long: recovered
  bool recover_on_failure = false;                 // recover application failures too
  std::string incarnation;                         // the current incarnation's name
  std::string cluster;                             // ... and its cluster
  ManagedState state = ManagedState::kSubmitting;
  RecoveryPhase phase = RecoveryPhase::kNone;
  int attempts = 0;  // recoveries started so far
  StoreTime created_at;
  StoreTime updated_at;
  std::string detail_json = "{}";  // JSON object: the supervisor's working memory
  // The row's version, kept by the store: 1 when created, one more with every update. An update
  // applies only over the version it was read at (update_managed), so that two writers (the
  // API's cancel, the supervisor's pass, two replicas) never overwrite each other unseen.
  std::int64_t version = 0;
  bool operator==(const ManagedWorkloadRecord&) const = default;
};

// A write made on behalf of a lease's holder: it applies only while the lease of that name is
// still held with that token (Lease::token), so that a holder that lost its lease (paused,
// partitioned) cannot write over its successor's decisions.
struct LeaseFence {
  std::string lease;
  std::int64_t token = 0;
};

class StateStore {
 public:
  virtual ~StateStore() = default;

  // "sqlite" or "postgresql".
  virtual std::string backend() const = 0;
  // The URL it was opened with, any password replaced by "***".
  virtual std::string location() const = 0;
  // The schema version of the database (kStateSchemaVersion after a successful open).
  virtual int schema_version() const = 0;

  // --- Submissions: one row per (cluster, workload name); the latest submission wins.

  // Stores a submission, replacing an earlier one of the same (cluster, workload) (names are
  // reused; xpk cannot hold two workloads of one name on a cluster). Returns the new row's id.
  // Forgets states observed for the pair before row.handle.submitted_at. Ignores row.id,
  // row.state and row.state_observed_at. Throws std::invalid_argument for an empty cluster or
  // workload or a submitted_at that does not parse.
  virtual std::int64_t record_submission(const SubmissionRow& row) = 0;
  // The intent of a submission, written before xpk runs: stores `row` only when the store has
  // no submission of the same (cluster, workload); returns whether it did. An existing row (an
  // earlier workload of that name, which may still exist) is left as it is, with its states.
  // Throws as record_submission, and StateStoreError when the row cannot be written: the
  // caller then creates nothing.
  virtual bool record_submission_intent(const SubmissionRow& row) = 0;
  // Deletes the submission of (`cluster`, `workload`) submitted at `submitted_at` (ISO 8601), a
  // recorded intent whose create made nothing; returns whether a row was deleted. A row of
  // another submission of the name (another submitted_at) is left alone.
  virtual bool forget_submission(const std::string& cluster, const std::string& workload,
                                 const std::string& submitted_at) = 0;
  // The intent of a delete, written before xpk runs: returns the record's id. Throws
  // std::invalid_argument for an empty cluster or workload, StateStoreError when it cannot be
  // written: the caller then deletes nothing.
  virtual std::int64_t record_delete_intent(const std::string& cluster, const std::string& workload,
                                            StoreTime at) = 0;
  // The outcome of delete `id` (kDeleteDeleted, kDeleteNotFound or kDeleteFailed, else
  // std::invalid_argument); `detail` is cut to 1 KB. Returns false when there is no unfinished
  // delete of that id.
  virtual bool finish_delete(std::int64_t id, const std::string& outcome, const std::string& detail,
                             StoreTime at) = 0;
  // The deletes of `workload` on `cluster`, newest first, at most `limit` (1..1000).
  virtual std::vector<DeleteRecord> list_deletes(const std::string& cluster,
                                                 const std::string& workload, int limit = 100) = 0;
  // The intent of a nomination, written before the manager's Workload is patched: returns its
  // id. Throws StateStoreError when it cannot be written: the caller then patches nothing.
  virtual std::int64_t record_nomination(const NominationRecord& record) = 0;
  // The outcome of nomination `id` (kNomination*, else std::invalid_argument); false when there
  // is no unfinished nomination of that id.
  virtual bool finish_nomination(std::int64_t id, const std::string& outcome,
                                 const std::string& detail, StoreTime at) = 0;
  // Nominations of the Workload `workload_uid` (empty: of every Workload), newest first, at most
  // `limit` (1..1000).
  virtual std::vector<NominationRecord> list_nominations(const std::string& workload_uid,
                                                         int limit = 100) = 0;
  // The submission of `workload` on `cluster`, or nullopt.
  virtual std::optional<SubmissionRow> find_submission(const std::string& cluster,
                                                       const std::string& workload) = 0;
  // A page of submissions matching `query`, newest first. Keyset pagination: a page is stable
  // while rows are added (new rows appear only on a fresh first page). Throws
  // std::invalid_argument for a limit outside 1..1000 or a cursor this store did not produce.
  virtual SubmissionPage list_submissions(const SubmissionQuery& query) = 0;
  // One-time import of the old record file (format in workload_manager.h: one JSON object a
  // line, torn lines skipped, the last record of a pair wins). Pairs already in the store are
  // left alone. The import is recorded in the same transaction as its rows, so a second call
  // (from this or another process, even concurrently) imports nothing and says so. Afterwards
  // the file is left in place, read-only. A missing file is not an error (file_found false,
  // nothing recorded). Throws StateStoreError when the file exists but cannot be read.
  virtual SubmissionsImportResult import_submissions_jsonl(const std::filesystem::path& file) = 0;

  // --- Selections.

  // Stores a decision; returns its id. Ignores selection.selection_id: reads return the
  // selection with selection_id set to its id. Throws std::invalid_argument for a decided_at that
  // does not parse.
  virtual std::int64_t record_selection(const ClusterSelection& selection) = 0;
  // Stores a decision that repeats selection `same_as` (same probes, histories, breakers and
  // policy, so the same explanation): a row of its own with its decided_at, sharing the stored
  // explanation instead of writing it again. Returns its id; reads give same_as's selection with
  // this id and decided_at. Throws std::invalid_argument for a same_as that is not a stored
  // decision made afresh, or a decided_at that does not parse.
  virtual std::int64_t record_repeated_selection(std::int64_t same_as,
                                                 const std::string& decided_at) = 0;
  // Several repeated decisions ({same_as, decided_at}) recorded at once, in one transaction
  // where the backend has them: their ids in order, 0 for one whose same_as is not a stored
  // decision made afresh (the others are recorded). Throws what record_repeated_selection throws
  // for anything else; then none is recorded.
  //
  // kNoWait commits them without waiting for the disk (serve.record_repeats: written): a crash
  // of this process loses none of them, a crash of the machine (or of PostgreSQL) may lose the
  // last ones. A store without that distinction waits.
  enum class Sync { kWait, kNoWait };
  virtual std::vector<std::int64_t> record_repeated_selections(
      const std::vector<std::pair<std::int64_t, std::string>>& repeats, Sync sync = Sync::kWait) {
    (void)sync;
    std::vector<std::int64_t> ids;
    ids.reserve(repeats.size());
    for (const auto& [same_as, decided_at] : repeats) {
      try {
        ids.push_back(record_repeated_selection(same_as, decided_at));
      } catch (const std::invalid_argument&) {
        if (same_as <= 0) throw;
        ids.push_back(0);
      }
    }
    return ids;
  }
  virtual std::optional<SelectionRecord> get_selection(std::int64_t id) = 0;
  // The newest `limit` (1..1000) decisions, newest first, of one accelerator type when given.
  virtual std::vector<SelectionRecord> list_selections(
      int limit, const std::optional<std::string>& accelerator = std::nullopt) = 0;
  // The same decisions as list_selections without their explanations, which are not read
  // whole: a 100-cluster decision's is about 140 KB.
  virtual std::vector<SelectionSummary> list_selection_summaries(
      int limit, const std::optional<std::string>& accelerator = std::nullopt) = 0;
  // Deletes up to `max_rows` (> 0) of the decisions made before `before` that no submission
  // names, repeats first, then the decisions they repeat unless a kept row repeats them too; a
  // few hundred a transaction (the write lock is not held for long). Returns how many: fewer
  // than `max_rows` when none is left. Maintenance: `falcon serve` calls it with
  // serve.selection_retention_h.
  virtual std::int64_t prune_selections(StoreTime before, std::int64_t max_rows) = 0;

  // --- Probes.

  // Stores probes in one transaction; returns their ids in order. A probe older than a
  // cluster's latest stored probe is kept in the history but does not replace the latest.
  // Throws std::invalid_argument for an empty cluster, a probed_at that does not parse or an
  // extra_json that is not a JSON object (nothing is stored then).
  virtual std::vector<std::int64_t> record_probes(const std::vector<ProbeRecord>& probes) = 0;
  // The latest probe of every cluster ever probed, ordered by cluster name.
  virtual std::vector<ProbeRecord> latest_probes() = 0;
  virtual std::optional<ProbeRecord> latest_probe(const std::string& cluster) = 0;
  // `cluster`'s probes with from <= probed_at < to, oldest first, at most `limit` (1..100000;
  // the oldest ones when there are more).
  virtual std::vector<ProbeRecord> probe_history(const std::string& cluster, StoreTime from,
                                                 StoreTime to, int limit = 10000) = 0;
  // Applies `retention` as of `now` (one transaction). Maintenance: call it periodically.
  virtual DownsampleResult downsample_probes(const ProbeRetention& retention, StoreTime now) = 0;

  // --- Workload events.

  // Records that `event.workload` on `event.cluster` was seen in `event.state`, if that is a
  // change: returns the event's id, or nullopt when the latest recorded state is the same or
  // was observed later (so replicas watching the same workload record each change once).
  virtual std::optional<std::int64_t> record_workload_event(const WorkloadEvent& event) = 0;
  // The recorded changes of one workload, oldest first, at most `limit` (1..100000, the newest
  // ones when there are more).
  virtual std::vector<WorkloadEvent> list_workload_events(const std::string& cluster,
                                                          const std::string& workload,
                                                          int limit = 1000) = 0;
  // Every recorded change on `cluster` with from <= observed_at < to, oldest first (observed_at,
  // then id), at most `limit` (1..100000; the oldest ones when there are more). The selection
  // signals read the drain rate and admission waits from it (scoring.h).
  virtual std::vector<WorkloadEvent> cluster_events(const std::string& cluster, StoreTime from,
                                                    StoreTime to, int limit = 10000) = 0;

  // --- Exports.

  // Stores a new export in state queued or running (record.state; std::invalid_argument for
  // another); returns its id. Uses workload, cluster, dest, progress_json and started_at.
  virtual std::int64_t start_export(const ExportRecord& record) = 0;
  // Moves a queued export to running (a running one stays so) with `started_at`; false when `id`
  // is unknown or finished.
  virtual bool begin_export(std::int64_t id, StoreTime started_at) = 0;
  // Replaces the progress of a running export; false when `id` is unknown or finished.
  virtual bool update_export_progress(std::int64_t id, const std::string& progress_json) = 0;
  // Moves a queued or running export to done or failed (std::invalid_argument for another
  // state) with its result; false when `id` is unknown or already finished.
  virtual bool finish_export(std::int64_t id, const std::string& state,
                             const std::string& result_json, StoreTime finished_at) = 0;
  virtual std::optional<ExportRecord> get_export(std::int64_t id) = 0;
  // The newest `limit` (1..1000) exports, newest first, of one workload when given.
  virtual std::vector<ExportRecord> list_exports(
      int limit, const std::optional<std::string>& workload = std::nullopt) = 0;

  // --- Recoveries.

  // Inserts the incident or replaces the stored one with the same incident_id.
  virtual void put_recovery(const RecoveryRecord& record) = 0;
  virtual std::optional<RecoveryRecord> get_recovery(const std::string& incident_id) = 0;
  // Incidents in the order they were first stored, newest first, at most `limit` (1..1000); of
  // one workload when given.
  virtual std::vector<RecoveryRecord> list_recoveries(
      int limit, const std::optional<std::string>& workload = std::nullopt) = 0;

  // --- Managed workloads.

  // Stores a new managed workload at version 1 (record.version is ignored); false (nothing
  // changed) when one of that name exists. Throws std::invalid_argument for an empty name or
  // incarnation, or a detail_json that is not a JSON object.
  virtual bool create_managed(const ManagedWorkloadRecord& record) = 0;
  // Replaces the stored record of record.name when it is still at record.version (and, with
  // `fence`, that lease is still held with that token), then sets record.version to the new
  // version. False, with nothing written, when there is no such record, it was written since it
  // was read, or the lease has moved on: the caller reads it again and decides anew.
  //
  //   for (;;) {
  //     ManagedWorkloadRecord m = *store.get_managed(name);
  //     m.state = "cancelled";
  //     if (store.update_managed(m)) break;
  //   }
  virtual bool update_managed(ManagedWorkloadRecord& record,
                              const std::optional<LeaseFence>& fence = std::nullopt) = 0;
  virtual bool delete_managed(const std::string& name) = 0;
  virtual std::optional<ManagedWorkloadRecord> get_managed(const std::string& name) = 0;
  // At most `limit` (1..1000) records ordered by name, those after `after` (exclusive; "" from
  // the first); only those in `states` when not empty. A page shorter than `limit` is the last;
  // else the next starts after its last name (list_all_managed pages through).
  virtual std::vector<ManagedWorkloadRecord> list_managed(
      int limit, const std::vector<ManagedState>& states = {}, const std::string& after = "") = 0;

  // --- Circuit breakers.

  virtual std::optional<BreakerState> get_breaker(const std::string& key) = 0;
  // Every stored breaker, ordered by key.
  virtual std::vector<BreakerState> list_breakers() = 0;
  // Stores `next` if the stored version still equals next.version (0: no row yet), making the
  // stored version next.version + 1. Returns false, changing nothing, when another writer got
  // there first: read again, recompute, retry.
  //   for (;;) {
  //     BreakerState s = store.get_breaker(key).value_or(BreakerState{.key = key});
  //     BreakerState next = on_failure(s, clock.now());   // keeps s.version
  //     if (store.compare_and_set_breaker(next)) break;
  //   }
  virtual bool compare_and_set_breaker(const BreakerState& next) = 0;

  // --- Leases (`now` from the caller's Clock).

  // Takes lease `name` for `holder` until now + ttl when it is free, expired (expires_at <= now)
  // or already held by `holder` (then it is renewed and keeps its token). Returns the lease as
  // stored, or nullopt when another holder has it. Atomic across processes: one statement
  // (INSERT ... ON CONFLICT DO UPDATE ... WHERE holder = me OR expired), so two processes on one
  // PostgreSQL never both hold it. On SQLite the same holds for processes on one machine; a
  // SQLite store serves one `falcon serve` replica (docs/self-healing.md).
  virtual std::optional<Lease> acquire_lease(const std::string& name, const std::string& holder,
                                             std::chrono::milliseconds ttl, StoreTime now) = 0;
  // Extends the lease to now + ttl only if `holder` holds it and it has not expired; nullopt
  // otherwise (the holder has lost it and must stop acting on it).
  virtual std::optional<Lease> renew_lease(const std::string& name, const std::string& holder,
                                           std::chrono::milliseconds ttl, StoreTime now) = 0;
  // Ends `holder`'s lease now (expires_at = now) so another may take it at once; false when
  // `holder` does not hold it.
  virtual bool release_lease(const std::string& name, const std::string& holder, StoreTime now) = 0;
  // The lease as stored (possibly expired), or nullopt when never taken.
  virtual std::optional<Lease> get_lease(const std::string& name) = 0;
};

// Every managed record (in `states` when not empty), ordered by name, read a page of 1000 at a
// time: the supervisor's pass and the API read them all, however many there are.
std::vector<ManagedWorkloadRecord> list_all_managed(StateStore& store,
                                                    const std::vector<ManagedState>& states = {});

// Opens the store at `url` (forms above; a plain path is SQLite), creating an SQLite file (0600,
// parent directories 0700) when missing, and applies migrations. Throws StateStoreError for a
// URL it does not understand (naming the URL without its password), a database it cannot open
// or connect to, a failed migration, or a schema newer than kStateSchemaVersion (naming both
// versions). Blocks while another process holds the migration lock.
std::unique_ptr<StateStore> open_state_store(const std::string& url,
                                             const StateStoreOptions& options = {});

// `sqlite:///<state_dir>/falcon.db`, the embedded default.
std::string default_state_url(const std::filesystem::path& state_dir);

// `url` with the password (user:password@, password=...) replaced by "***".
std::string redact_state_url(const std::string& url);

}  // namespace falcon
