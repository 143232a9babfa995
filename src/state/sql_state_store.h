// StateStore over SqlConnection: the store's logic, written once in SQL that SQLite and
// PostgreSQL both accept; the dialect supplies the few differences.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "falcon/state_store.h"
#include "state/connection_pool.h"
#include "state/sql_connection.h"

namespace falcon::state {

class SqlStateStore final : public StateStore {
 public:
  // Opens the first connection and applies the migrations. Throws StateStoreError (operation
  // "open") when it cannot connect, a migration fails or the schema is newer than this binary.
  SqlStateStore(const SqlDialect& dialect, std::string location, ConnectionPool::Opener open,
                const StateStoreOptions& options);

  std::string backend() const override { return dialect_.backend; }
  std::string location() const override { return location_; }
  int schema_version() const override { return schema_version_; }

  std::int64_t record_submission(const SubmissionRow& row) override;
  bool record_submission_intent(const SubmissionRow& row) override;
  bool forget_submission(const std::string& cluster, const std::string& workload,
                         const std::string& submitted_at) override;
  std::int64_t record_delete_intent(const std::string& cluster, const std::string& workload,
                                    StoreTime at) override;
  bool finish_delete(std::int64_t id, const std::string& outcome, const std::string& detail,
                     StoreTime at) override;
  std::vector<DeleteRecord> list_deletes(const std::string& cluster, const std::string& workload,
                                         int limit) override;
  std::int64_t record_nomination(const NominationRecord& record) override;
  bool finish_nomination(std::int64_t id, const std::string& outcome, const std::string& detail,
                         StoreTime at) override;
  std::vector<NominationRecord> list_nominations(const std::string& workload_uid,
                                                 int limit) override;
  std::optional<SubmissionRow> find_submission(const std::string& cluster,
                                               const std::string& workload) override;
  SubmissionPage list_submissions(const SubmissionQuery& query) override;
  SubmissionsImportResult import_submissions_jsonl(const std::filesystem::path& file) override;

  std::int64_t record_selection(const ClusterSelection& selection) override;
  std::int64_t record_repeated_selection(std::int64_t same_as,
                                         const std::string& decided_at) override;
  std::vector<std::int64_t> record_repeated_selections(
      const std::vector<std::pair<std::int64_t, std::string>>& repeats, Sync sync) override;
  std::optional<SelectionRecord> get_selection(std::int64_t id) override;
  std::vector<SelectionSummary> list_selection_summaries(
      int limit, const std::optional<std::string>& accelerator) override;
  std::int64_t prune_selections(StoreTime before, std::int64_t max_rows) override;
  std::vector<SelectionRecord> list_selections(
      int limit, const std::optional<std::string>& accelerator) override;

  std::vector<std::int64_t> record_probes(const std::vector<ProbeRecord>& probes) override;
  std::vector<ProbeRecord> latest_probes() override;
  std::optional<ProbeRecord> latest_probe(const std::string& cluster) override;
  std::vector<ProbeRecord> probe_history(const std::string& cluster, StoreTime from, StoreTime to,
                                         int limit) override;
  DownsampleResult downsample_probes(const ProbeRetention& retention, StoreTime now) override;

  std::optional<std::int64_t> record_workload_event(const WorkloadEvent& event) override;
  std::vector<WorkloadEvent> list_workload_events(const std::string& cluster,
                                                  const std::string& workload, int limit) override;
  std::vector<WorkloadEvent> cluster_events(const std::string& cluster, StoreTime from,
                                            StoreTime to, int limit) override;

  std::int64_t start_export(const ExportRecord& record) override;
  bool begin_export(std::int64_t id, StoreTime started_at) override;
  bool update_export_progress(std::int64_t id, const std::string& progress_json) override;
  bool finish_export(std::int64_t id, const std::string& state, const std::string& result_json,
                     StoreTime finished_at) override;
  std::optional<ExportRecord> get_export(std::int64_t id) override;
  std::vector<ExportRecord> list_exports(int limit,
                                         const std::optional<std::string>& workload) override;

  void put_recovery(const RecoveryRecord& record) override;
  std::optional<RecoveryRecord> get_recovery(const std::string& incident_id) override;
  std::vector<RecoveryRecord> list_recoveries(int limit,
                                              const std::optional<std::string>& workload) override;

  bool create_managed(const ManagedWorkloadRecord& record) override;
  bool update_managed(ManagedWorkloadRecord& record,
                      const std::optional<LeaseFence>& fence) override;
  bool delete_managed(const std::string& name) override;
  std::optional<ManagedWorkloadRecord> get_managed(const std::string& name) override;
  std::vector<ManagedWorkloadRecord> list_managed(int limit,
                                                  const std::vector<ManagedState>& states,
                                                  const std::string& after) override;

  std::optional<BreakerState> get_breaker(const std::string& key) override;
  std::vector<BreakerState> list_breakers() override;
  bool compare_and_set_breaker(const BreakerState& next) override;

  std::optional<Lease> acquire_lease(const std::string& name, const std::string& holder,
                                     std::chrono::milliseconds ttl, StoreTime now) override;
  std::optional<Lease> renew_lease(const std::string& name, const std::string& holder,
                                   std::chrono::milliseconds ttl, StoreTime now) override;
  bool release_lease(const std::string& name, const std::string& holder, StoreTime now) override;
  std::optional<Lease> get_lease(const std::string& name) override;

 private:
  // Runs `fn(connection)` in a write transaction and commits; runs it again (up to three times
  // in all) when the database asks for a retry; turns SqlError into StateStoreError. kNoWait:
  // the commit does not wait for the disk (the dialect's no_wait_* statements around it).
  template <class F>
  auto write(const char* operation, F&& fn, StateStore::Sync sync = StateStore::Sync::kWait);
  // Runs `fn(connection)` outside a transaction (a single statement, its own snapshot).
  template <class F>
  auto read(const char* operation, F&& fn);
  [[noreturn]] void fail(const char* operation, const std::string& message) const;

  // Who waits for decisions in a group commit: one caller, woken (under selection_mutex_) when
  // one of its decisions is handed the lead or its last one is written. A condition variable per
  // caller, so a batch wakes its own callers, each once (the atomic wait of libstdc++ spins with
  // sched_yield first, which cost more than the work with dozens of callers waiting).
  struct SelectionWaiter {
    std::condition_variable woken;
  };
  // A decision waiting for its group commit (record_selection).
  struct PendingSelection {
    std::string accelerator;
    std::string selected_cluster;
    std::int64_t decided_ms = 0;
    std::string decided_at;  // as given (selections.decided_at)
    std::string policy;
    std::string reason;
    std::string json;          // packed (pack_explanation)
    std::int64_t same_as = 0;  // a repeated decision: accelerator, cluster and json come from it
    std::int64_t id = 0;
    bool missing = false;  // same_as is not a stored decision made afresh (error says so)
    bool no_wait = false;  // may be committed without waiting for the disk (Sync::kNoWait)
    std::exception_ptr error;
    // kWaiting until its batch is written (kDone: id or error set) or until it is handed the
    // lead (kLead: write the next batch). Read and written under selection_mutex_.
    int state = kWaiting;
    SelectionWaiter* waiter = nullptr;
    static constexpr int kWaiting = 0, kDone = 1, kLead = 2;
  };
  // Writes `batch` in one transaction and marks each done (with its id, or the error).
  void commit_selections(const std::vector<PendingSelection*>& batch);
  // The rows of `batch`, in the transaction of `c`: their ids, 0 where same_as is missing.
  static std::vector<std::int64_t> insert_selections(SqlConnection& c,
                                                     const std::vector<PendingSelection*>& batch);
  // Queues `mine` (one caller's decisions) for the next group commit and waits until all are
  // written (or failed).
  void commit_selection(std::vector<PendingSelection>& mine);

  const SqlDialect& dialect_;
  std::string location_;
  std::shared_ptr<Clock> clock_;
  ConnectionPool pool_;
  int schema_version_ = 0;

  // Group commit of decisions: callers queue; one of them (the leader) writes every queued
  // decision in one transaction while the next ones queue; each returns once its own batch
  // committed (or failed). The leader then hands the lead to the oldest waiting caller, so
  // each caller is woken once, by its own entry.
  std::mutex selection_mutex_;
  std::deque<PendingSelection*> selection_queue_;
  bool selection_writing_ = false;
};

}  // namespace falcon::state
