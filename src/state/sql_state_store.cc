#include "state/sql_state_store.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "falcon/errors.h"
#include "model/json_text.h"
#include "state/explanation_codec.h"
#include "state/migrations.h"
#include "state/submissions_jsonl.h"
#include "util/name_table.h"
#include "util/time_format.h"

namespace falcon {

namespace {

// The most bytes of one cluster's error text a stored probe or decision keeps. A failing xpk
// prints kilobytes; kept in full with every candidate of every failed decision, they filled a
// freed disk again within seconds. The first kilobyte names the cause (the process's log and
// the live answer have the whole text).
constexpr std::size_t kMaxStoredErrorBytes = 1024;

std::optional<std::string> bounded_error(const std::optional<std::string>& error) {
  if (!error || error->size() <= kMaxStoredErrorBytes) return error;
  std::size_t cut = kMaxStoredErrorBytes;
  // Not inside a UTF-8 sequence: back up over continuation bytes.
  while (cut > 0 && (static_cast<unsigned char>((*error)[cut]) & 0xC0) == 0x80) --cut;
  return fmt::format("{}... ({} more bytes)", error->substr(0, cut), error->size() - cut);
}

}  // namespace

std::string probe_extra_json(const ClusterProbeResult& result) {
  nlohmann::json extra = nlohmann::json::object();
  if (!result.capacity.empty()) extra["capacity"] = result.capacity;
  if (result.capacity_error) extra["capacity_error"] = *bounded_error(result.capacity_error);
  if (result.admission_delay_s) extra["admission_delay_s"] = *result.admission_delay_s;
  return extra.dump();
}

namespace {

constexpr std::array<std::pair<ManagedState, const char*>, 8> kManagedStateNames = {{
    {ManagedState::kSubmitting, "submitting"},
    {ManagedState::kStarting, "starting"},
    {ManagedState::kRunning, "running"},
    {ManagedState::kRecovering, "recovering"},
    {ManagedState::kCompleted, "completed"},
    {ManagedState::kFailed, "failed"},
    {ManagedState::kGaveUp, "gave_up"},
    {ManagedState::kCancelled, "cancelled"},
}};

constexpr std::array<std::pair<RecoveryPhase, const char*>, 5> kRecoveryPhaseNames = {{
    {RecoveryPhase::kNone, ""},
    {RecoveryPhase::kFencing, "fencing"},
    {RecoveryPhase::kDeciding, "deciding"},
    {RecoveryPhase::kSubmitting, "submitting"},
    {RecoveryPhase::kConfirming, "confirming"},
}};

}  // namespace

const char* to_string(ManagedState state) { return name_in(kManagedStateNames, state, "unknown"); }

std::optional<ManagedState> parse_managed_state(std::string_view text) {
  return value_in(kManagedStateNames, text);
}

bool is_active(ManagedState state) {
  return state == ManagedState::kSubmitting || state == ManagedState::kStarting ||
         state == ManagedState::kRunning || state == ManagedState::kRecovering;
}

bool managed_transition_allowed(ManagedState from, ManagedState to) {
  if (from == to) return true;
  if (!is_active(from)) return false;  // an ended workload stays ended
  switch (to) {
    case ManagedState::kSubmitting:
      return false;  // only a new record starts there
    case ManagedState::kStarting:
      // The first submit went through, or a recovery submitted the replacement.
      return from == ManagedState::kSubmitting || from == ManagedState::kRecovering;
    case ManagedState::kRunning:
      return from == ManagedState::kStarting || from == ManagedState::kRecovering;
    case ManagedState::kRecovering:
      return from == ManagedState::kStarting || from == ManagedState::kRunning;
    case ManagedState::kCompleted:
    case ManagedState::kFailed:
    case ManagedState::kGaveUp:
    case ManagedState::kCancelled:
      return true;
  }
  return false;
}

const char* to_string(RecoveryPhase phase) {
  return name_in(kRecoveryPhaseNames, phase, "unknown");
}

std::optional<RecoveryPhase> parse_recovery_phase(std::string_view text) {
  return value_in(kRecoveryPhaseNames, text);
}

}  // namespace falcon

namespace falcon::state {
namespace {

constexpr int kMaxAttempts = 3;
constexpr int kMaxPage = 1000;
constexpr int kMaxHistory = 100000;
constexpr const char* kCursorPrefix = "s1.";

std::int64_t to_ms(StoreTime t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

StoreTime from_ms(std::int64_t ms) { return StoreTime(std::chrono::milliseconds(ms)); }

SqlValue opt_ms(const std::optional<StoreTime>& t) {
  if (!t) return nullptr;
  return to_ms(*t);
}

std::optional<StoreTime> opt_time(const SqlRow& row, std::size_t i) {
  if (row.is_null(i)) return std::nullopt;
  return from_ms(row.int64(i));
}

SqlValue opt_int(const std::optional<int>& v) {
  if (!v) return nullptr;
  return std::int64_t{*v};
}

SqlValue opt_text(const std::optional<std::string>& v) {
  if (!v) return nullptr;
  return *v;
}

int to_int(std::int64_t v) { return static_cast<int>(v); }

std::optional<int> opt_int_cell(const SqlRow& row, std::size_t i) {
  if (row.is_null(i)) return std::nullopt;
  return to_int(row.int64(i));
}

// An ISO 8601 time of a model type, as stored milliseconds.
std::int64_t parse_time_field(const std::string& text, const char* field) {
  const auto t = parse_rfc3339(text);
  if (!t) {
    throw std::invalid_argument(
        fmt::format("{} '{}' is not an ISO 8601 / RFC 3339 timestamp", field, text));
  }
  return to_ms(*t);
}

std::string iso(std::int64_t ms) { return format_iso8601(from_ms(ms)); }

void require_nonempty(const std::string& value, const char* field) {
  if (value.empty()) throw std::invalid_argument(fmt::format("{} is empty", field));
}

void require_json(const std::string& text, const char* field, bool object_only = false) {
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    throw std::invalid_argument(fmt::format("{} is not valid JSON: '{}'", field, text));
  }
  if (object_only && !j.is_object()) {
    throw std::invalid_argument(fmt::format("{} is not a JSON object: '{}'", field, text));
  }
}

void require_limit(int limit, int max, const char* what) {
  if (limit < 1 || limit > max) {
    throw std::invalid_argument(fmt::format("{}: limit {} is outside 1..{}", what, limit, max));
  }
}

// --- Submissions.

#define FALCON_SUBMISSIONS_FROM                                                  \
  "FROM submissions s LEFT JOIN workload_states w ON w.cluster = s.cluster AND " \
  "w.workload = s.workload AND w.observed_at_ms >= s.submitted_at_ms"
constexpr const char* kSubmissionColumns =
    "s.id, s.cluster, s.workload, s.namespace, s.accelerator_type, s.device_class, "
    "s.submitted_at_ms, s.cluster_id, s.project, s.zone, s.docker_image, s.priority, "
    "s.spec_json, w.state, w.observed_at_ms, s.selection_id " FALCON_SUBMISSIONS_FROM;
constexpr const char* kSubmissionsFrom = FALCON_SUBMISSIONS_FROM;
#undef FALCON_SUBMISSIONS_FROM

SubmissionRow submission_from(const SqlRow& row) {
  SubmissionRow s;
  s.id = row.int64(0);
  s.handle.cluster = row.text(1);
  s.handle.workload_name = row.text(2);
  s.handle.namespace_ = row.text(3);
  s.accelerator_type = row.text(4);
  s.device_class = row.text(5);
  s.handle.submitted_at = iso(row.int64(6));
  s.cluster_id = row.text(7);
  s.project = row.text(8);
  s.zone = row.text(9);
  s.docker_image = row.text(10);
  s.priority = row.text(11);
  if (!row.is_null(12)) {
    const auto j = nlohmann::json::parse(row.text(12), nullptr, false);
    if (j.is_discarded()) throw SqlError("submission " + std::to_string(s.id) + ": bad spec_json");
    try {
      s.spec = j.get<WorkloadSpec>();
    } catch (const nlohmann::json::exception& e) {
      throw SqlError(fmt::format("submission {}: spec_json: {}", s.id, e.what()));
    }
  }
  s.state = row.opt_text(13);
  s.state_observed_at = opt_time(row, 14);
  s.selection_id = row.opt_int64(15).value_or(0);
  return s;
}

std::vector<SqlValue> submission_values(const SubmissionRow& r, std::int64_t submitted_ms) {
  SqlValue spec = nullptr;
  if (r.spec) spec = nlohmann::json(*r.spec).dump();
  SqlValue selection = nullptr;
  if (r.selection_id != 0) selection = r.selection_id;
  return {r.handle.cluster, r.handle.workload_name, r.handle.namespace_, r.accelerator_type,
          r.device_class,   submitted_ms,           r.cluster_id,        r.project,
          r.zone,           r.docker_image,         r.priority,          spec,
          selection};
}

constexpr const char* kInsertSubmission =
    "INSERT INTO submissions (cluster, workload, namespace, accelerator_type, device_class, "
    "submitted_at_ms, cluster_id, project, zone, docker_image, priority, spec_json, "
    "selection_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)";

std::string make_cursor(const SubmissionRow& last) {
  return fmt::format("{}{}.{}", kCursorPrefix, parse_time_field(last.handle.submitted_at, "t"),
                     last.id);
}

std::pair<std::int64_t, std::int64_t> parse_cursor(const std::string& cursor) {
  auto bad = [&] {
    return std::invalid_argument(
        fmt::format("cursor '{}' was not produced by list_submissions", cursor));
  };
  if (cursor.rfind(kCursorPrefix, 0) != 0) throw bad();
  const std::string rest = cursor.substr(std::strlen(kCursorPrefix));
  const auto dot = rest.find('.');
  if (dot == std::string::npos) throw bad();
  std::int64_t ms = 0;
  std::int64_t id = 0;
  const char* b = rest.data();
  auto r1 = std::from_chars(b, b + dot, ms);
  auto r2 = std::from_chars(b + dot + 1, b + rest.size(), id);
  if (r1.ec != std::errc() || r1.ptr != b + dot || r2.ec != std::errc() ||
      r2.ptr != b + rest.size() || id <= 0) {
    throw bad();
  }
  return {ms, id};
}

// --- Probes.

constexpr const char* kProbeColumns =
    "cluster, probed_at_ms, reachable, queue_depth, running_count, error, backend, duration_ms, "
    "extra_json";

ProbeRecord probe_from(const SqlRow& row) {
  ProbeRecord p;
  p.id = row.int64(0);
  p.result.cluster = row.text(1);
  p.result.probed_at = iso(row.int64(2));
  p.result.reachable = row.int64(3) != 0;
  p.result.queue_depth = opt_int_cell(row, 4);
  p.result.running_count = opt_int_cell(row, 5);
  p.result.error = row.opt_text(6);
  p.backend = row.text(7);
  p.duration_ms = row.int64(8);
  p.extra_json = row.text(9);
  return p;
}

// --- Workload events, exports, recoveries, breakers, leases.

WorkloadEvent event_from(const SqlRow& row) {
  return WorkloadEvent{.id = row.int64(0),
                       .cluster = row.text(1),
                       .workload = row.text(2),
                       .state = row.text(3),
                       .observed_at = from_ms(row.int64(4)),
                       .detail = row.text(5)};
}

constexpr const char* kExportColumns =
    "id, workload, cluster, dest, state, progress_json, result_json, started_at_ms, "
    "finished_at_ms";

ExportRecord export_from(const SqlRow& row) {
  return ExportRecord{.id = row.int64(0),
                      .workload = row.text(1),
                      .cluster = row.text(2),
                      .dest = row.text(3),
                      .state = row.text(4),
                      .progress_json = row.text(5),
                      .result_json = row.text(6),
                      .started_at = from_ms(row.int64(7)),
                      .finished_at = opt_time(row, 8)};
}

constexpr const char* kRecoveryColumns =
    "incident_id, workload, cluster, attempts, t_violation_ms, detected_ms, decided_ms, "
    "submitted_ms, admitted_ms, recovered_ms, classification, outcome, detail_json, to_cluster, "
    "replacement, cause";

RecoveryRecord recovery_from(const SqlRow& row) {
  RecoveryRecord r{.incident_id = row.text(0),
                   .workload = row.text(1),
                   .cluster = row.text(2),
                   .attempts = to_int(row.int64(3)),
                   .t_violation = opt_time(row, 4),
                   .detected = opt_time(row, 5),
                   .decided = opt_time(row, 6),
                   .submitted = opt_time(row, 7),
                   .admitted = opt_time(row, 8),
                   .recovered = opt_time(row, 9),
                   .classification = row.text(10),
                   .outcome = row.text(11),
                   .detail_json = row.text(12)};
  r.to_cluster = row.text(13);
  r.replacement = row.text(14);
  r.cause = row.text(15);
  return r;
}

// The columns a managed workload is written with; it is read with its version too.
constexpr const char* kManagedColumns =
    "name, spec_json, max_recoveries, stable_after_ms, recover_on_failure, incarnation, cluster, "
    "state, attempts, created_at_ms, updated_at_ms, detail_json, phase";
constexpr const char* kManagedRead =
    "name, spec_json, max_recoveries, stable_after_ms, recover_on_failure, incarnation, cluster, "
    "state, attempts, created_at_ms, updated_at_ms, detail_json, phase, version";

// A column's text as the enum it names (parse), or SqlError naming the workload and the value:
// a row written by a newer falcon is not guessed at.
template <typename E>
E known_value(std::optional<E> (*parse)(std::string_view), const std::string& text,
              const std::string& workload, const char* what) {
  if (auto value = parse(text)) return *value;
  throw SqlError(
      fmt::format("managed workload '{}' has {} '{}', which this falcon does not know "
                  "(written by a newer falcon?)",
                  workload, what, text));
}

ManagedWorkloadRecord managed_from(const SqlRow& row) {
  ManagedWorkloadRecord m;
  m.name = row.text(0);
  m.spec = nlohmann::json::parse(row.text(1)).get<WorkloadSpec>();
  m.max_recoveries = to_int(row.int64(2));
  m.stable_after = std::chrono::milliseconds(row.int64(3));
  m.recover_on_failure = row.int64(4) != 0;
  m.incarnation = row.text(5);
  m.cluster = row.text(6);
  m.state = known_value(parse_managed_state, row.text(7), m.name, "state");
  m.attempts = to_int(row.int64(8));
  m.created_at = from_ms(row.int64(9));
  m.updated_at = from_ms(row.int64(10));
  m.detail_json = row.text(11);
  m.phase = known_value(parse_recovery_phase, row.text(12), m.name, "recovery phase");
  m.version = row.int64(13);
  return m;
}

std::vector<SqlValue> managed_values(const ManagedWorkloadRecord& m) {
  return {m.name,
          nlohmann::json(m.spec).dump(),
          std::int64_t{m.max_recoveries},
          static_cast<std::int64_t>(m.stable_after.count()),
          std::int64_t{m.recover_on_failure ? 1 : 0},
          m.incarnation,
          m.cluster,
          std::string(to_string(m.state)),
          std::int64_t{m.attempts},
          to_ms(m.created_at),
          to_ms(m.updated_at),
          m.detail_json,
          std::string(to_string(m.phase))};
}

constexpr const char* kBreakerColumns =
    "key, state, consecutive_failures, trips, opened_until_ms, updated_at_ms, version";

BreakerState breaker_from(const SqlRow& row) {
  return BreakerState{.key = row.text(0),
                      .state = row.text(1),
                      .consecutive_failures = to_int(row.int64(2)),
                      .trips = to_int(row.int64(3)),
                      .opened_until = opt_time(row, 4),
                      .updated_at = from_ms(row.int64(5)),
                      .version = row.int64(6)};
}

constexpr const char* kLeaseColumns =
    "name, holder, token, acquired_at_ms, expires_at_ms, heartbeat_at_ms";

Lease lease_from(const SqlRow& row) {
  return Lease{.name = row.text(0),
               .holder = row.text(1),
               .token = row.int64(2),
               .acquired_at = from_ms(row.int64(3)),
               .expires_at = from_ms(row.int64(4)),
               .heartbeat_at = from_ms(row.int64(5))};
}

void check_lease_args(const std::string& name, const std::string& holder,
                      std::chrono::milliseconds ttl) {
  require_nonempty(name, "lease name");
  require_nonempty(holder, "lease holder");
  if (ttl.count() <= 0) {
    throw std::invalid_argument(fmt::format("lease '{}': ttl must be positive", name));
  }
}

std::string read_whole_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw std::runtime_error(
        fmt::format("cannot read '{}': {}", file.string(), std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    throw std::runtime_error(fmt::format("cannot read '{}': read error", file.string()));
  }
  return text.str();
}

}  // namespace

SqlStateStore::SqlStateStore(const SqlDialect& dialect, std::string location,
                             ConnectionPool::Opener open, const StateStoreOptions& options)
    : dialect_(dialect),
      location_(std::move(location)),
      clock_(options.clock ? options.clock : make_system_clock()),
      pool_(open, options.max_connections) {
  std::unique_ptr<SqlConnection> first;
  for (int attempt = 1;; ++attempt) {
    try {
      first = open();
      schema_version_ = apply_migrations(*first, dialect_, to_ms(clock_->now()));
      break;
    } catch (const SqlError& e) {
      if (e.retryable() && attempt < kMaxAttempts) continue;
      fail("open", e.what());
    }
  }
  pool_.adopt(std::move(first));
}

void SqlStateStore::fail(const char* operation, const std::string& message) const {
  throw StateStoreError(dialect_.backend, location_, operation, message);
}

template <class F>
auto SqlStateStore::write(const char* operation, F&& fn, StateStore::Sync sync) {
  using Result = std::invoke_result_t<F&, SqlConnection&>;
  const bool no_wait = sync == StateStore::Sync::kNoWait;
  for (int attempt = 1;; ++attempt) {
    try {
      auto conn = pool_.borrow();
      if (no_wait && !dialect_.no_wait_before.empty()) conn->execute(dialect_.no_wait_before);
      // Back to waiting commits on this connection whatever happens (it returns to the pool).
      struct Restore {
        SqlConnection& c;
        std::string after;
        ~Restore() {
          if (after.empty()) return;
          try {
            c.execute(after);
          } catch (const std::exception&) {
            // A connection that cannot take a PRAGMA is broken: the pool drops it.
          }
        }
      } restore{*conn, no_wait ? dialect_.no_wait_after : std::string()};
      SqlTransaction tx(*conn, dialect_.begin_write);
      if (no_wait && !dialect_.no_wait_in.empty()) conn->execute(dialect_.no_wait_in);
      if constexpr (std::is_void_v<Result>) {
        fn(*conn);
        tx.commit();
        return;
      } else {
        Result result = fn(*conn);
        tx.commit();
        return result;
      }
    } catch (const SqlError& e) {
      if (e.retryable() && attempt < kMaxAttempts) continue;
      fail(operation, e.what());
    }
  }
}

template <class F>
auto SqlStateStore::read(const char* operation, F&& fn) {
  try {
    auto conn = pool_.borrow();
    return fn(*conn);
  } catch (const SqlError& e) {
    fail(operation, e.what());
  }
}

// --- Submissions.

namespace {

// A submission's checks (cluster, name, time) and its column values; the submitted time in ms.
std::pair<std::int64_t, std::vector<SqlValue>> checked_submission(const SubmissionRow& row) {
  require_nonempty(row.handle.cluster, "submission cluster");
  require_nonempty(row.handle.workload_name, "submission workload name");
  const std::int64_t submitted_ms = parse_time_field(row.handle.submitted_at, "submitted_at");
  return {submitted_ms, submission_values(row, submitted_ms)};
}

}  // namespace

std::int64_t SqlStateStore::record_submission(const SubmissionRow& row) {
  auto checked = checked_submission(row);
  const std::int64_t submitted_ms = checked.first;
  auto& values = checked.second;
  return write("record_submission", [&](SqlConnection& c) {
    c.query(
        "DELETE FROM workload_states WHERE cluster = $1 AND workload = $2 AND "
        "observed_at_ms < $3",
        {row.handle.cluster, row.handle.workload_name, submitted_ms});
    c.query("DELETE FROM submissions WHERE cluster = $1 AND workload = $2",
            {row.handle.cluster, row.handle.workload_name});
    // ON CONFLICT: under PostgreSQL's READ COMMITTED a concurrent replacement of the same pair
    // can commit between the DELETE and the INSERT; the later submission then wins in place.
    const SqlRows ids = c.query(
        std::string(kInsertSubmission) +
            " ON CONFLICT (cluster, workload) DO UPDATE SET namespace = excluded.namespace, "
            "accelerator_type = excluded.accelerator_type, device_class = "
            "excluded.device_class, submitted_at_ms = excluded.submitted_at_ms, cluster_id = "
            "excluded.cluster_id, project = excluded.project, zone = excluded.zone, "
            "docker_image = excluded.docker_image, priority = excluded.priority, spec_json = "
            "excluded.spec_json, selection_id = excluded.selection_id RETURNING id",
        values);
    return ids.at(0).int64(0);
  });
}

bool SqlStateStore::record_submission_intent(const SubmissionRow& row) {
  auto values = checked_submission(row).second;
  return write("record_submission_intent", [&](SqlConnection& c) {
    const SqlRows ids = c.query(
        std::string(kInsertSubmission) + " ON CONFLICT (cluster, workload) DO NOTHING RETURNING id",
        values);
    return !ids.empty();
  });
}

bool SqlStateStore::forget_submission(const std::string& cluster, const std::string& workload,
                                      const std::string& submitted_at) {
  const std::int64_t submitted_ms = parse_time_field(submitted_at, "submitted_at");
  return write("forget_submission", [&](SqlConnection& c) {
    const SqlRows ids = c.query(
        "DELETE FROM submissions WHERE cluster = $1 AND workload = $2 AND submitted_at_ms = $3 "
        "RETURNING id",
        {cluster, workload, submitted_ms});
    return !ids.empty();
  });
}

std::int64_t SqlStateStore::record_delete_intent(const std::string& cluster,
                                                 const std::string& workload, StoreTime at) {
  require_nonempty(cluster, "delete cluster");
  require_nonempty(workload, "delete workload");
  return write("record_delete_intent", [&](SqlConnection& c) {
    return c
        .query(
            "INSERT INTO deletes (cluster, workload, requested_at_ms) VALUES ($1, $2, $3) "
            "RETURNING id",
            {cluster, workload, to_ms(at)})
        .at(0)
        .int64(0);
  });
}

bool SqlStateStore::finish_delete(std::int64_t id, const std::string& outcome,
                                  const std::string& detail, StoreTime at) {
  if (outcome != kDeleteDeleted && outcome != kDeleteNotFound && outcome != kDeleteFailed) {
    throw std::invalid_argument(
        fmt::format("delete {}: outcome '{}' is not deleted, not_found or failed", id, outcome));
  }
  const std::string kept = bounded_error(detail).value_or("");
  return write("finish_delete", [&](SqlConnection& c) {
    return !c.query(
                 "UPDATE deletes SET outcome = $2, detail = $3, finished_at_ms = $4 WHERE id = $1 "
                 "AND outcome IS NULL RETURNING id",
                 {id, outcome, kept, to_ms(at)})
                .empty();
  });
}

std::vector<DeleteRecord> SqlStateStore::list_deletes(const std::string& cluster,
                                                      const std::string& workload, int limit) {
  require_limit(limit, kMaxPage, "list_deletes");
  return read("list_deletes", [&](SqlConnection& c) {
    const SqlRows rows = c.query(
        "SELECT id, cluster, workload, requested_at_ms, outcome, detail, finished_at_ms FROM "
        "deletes WHERE cluster = $1 AND workload = $2 ORDER BY id DESC LIMIT $3",
        {cluster, workload, std::int64_t{limit}});
    std::vector<DeleteRecord> out;
    out.reserve(rows.size());
    for (const SqlRow& r : rows) {
      DeleteRecord d;
      d.id = r.int64(0);
      d.cluster = r.text(1);
      d.workload = r.text(2);
      d.requested_at = from_ms(r.int64(3));
      d.outcome = r.opt_text(4);
      d.detail = r.text(5);
      d.finished_at = opt_time(r, 6);
      out.push_back(std::move(d));
    }
    return out;
  });
}

namespace {

std::string join_clusters(const std::vector<std::string>& clusters) {
  std::string out;
  for (const auto& c : clusters) {
    if (!out.empty()) out += ',';
    out += c;
  }
  return out;
}

std::vector<std::string> split_clusters(const std::string& text) {
  std::vector<std::string> out;
  std::string::size_type start = 0;
  while (start < text.size()) {
    const auto comma = text.find(',', start);
    out.push_back(text.substr(start, comma == std::string::npos ? comma : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

std::int64_t SqlStateStore::record_nomination(const NominationRecord& r) {
  require_nonempty(r.workload_uid, "nomination workload_uid");
  require_nonempty(r.workload, "nomination workload");
  return write("record_nomination", [&](SqlConnection& c) {
    return c
        .query(
            "INSERT INTO nominations (manager, workload_uid, namespace, workload, accelerator, "
            "clusters, selection_id, requested_at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) "
            "RETURNING id",
            {r.manager, r.workload_uid, r.namespace_, r.workload, r.accelerator,
             join_clusters(r.clusters),
             r.selection_id > 0 ? SqlValue{r.selection_id} : SqlValue{nullptr},
             to_ms(r.requested_at)})
        .at(0)
        .int64(0);
  });
}

bool SqlStateStore::finish_nomination(std::int64_t id, const std::string& outcome,
                                      const std::string& detail, StoreTime at) {
  if (outcome != kNominationPatched && outcome != kNominationConflict &&
      outcome != kNominationFailed) {
    throw std::invalid_argument(
        fmt::format("nomination {}: outcome '{}' is not patched, conflict or failed", id, outcome));
  }
  const std::string kept = bounded_error(detail).value_or("");
  return write("finish_nomination", [&](SqlConnection& c) {
    return !c.query(
                 "UPDATE nominations SET outcome = $2, detail = $3, finished_at_ms = $4 WHERE id "
                 "= $1 AND outcome IS NULL RETURNING id",
                 {id, outcome, kept, to_ms(at)})
                .empty();
  });
}

std::vector<NominationRecord> SqlStateStore::list_nominations(const std::string& workload_uid,
                                                              int limit) {
  require_limit(limit, kMaxPage, "list_nominations");
  return read("list_nominations", [&](SqlConnection& c) {
    const std::string columns =
        "SELECT id, manager, workload_uid, namespace, workload, accelerator, clusters, "
        "selection_id, requested_at_ms, outcome, detail, finished_at_ms FROM nominations ";
    const SqlRows rows =
        workload_uid.empty()
            ? c.query(columns + "ORDER BY id DESC LIMIT $1", {std::int64_t{limit}})
            : c.query(columns + "WHERE workload_uid = $1 ORDER BY id DESC LIMIT $2",
                      {workload_uid, std::int64_t{limit}});
    std::vector<NominationRecord> out;
    out.reserve(rows.size());
    for (const SqlRow& r : rows) {
      NominationRecord n;
      n.id = r.int64(0);
      n.manager = r.text(1);
      n.workload_uid = r.text(2);
      n.namespace_ = r.text(3);
      n.workload = r.text(4);
      n.accelerator = r.text(5);
      n.clusters = split_clusters(r.text(6));
      n.selection_id = r.opt_int64(7).value_or(0);
      n.requested_at = from_ms(r.int64(8));
      n.outcome = r.opt_text(9);
      n.detail = r.text(10);
      n.finished_at = opt_time(r, 11);
      out.push_back(std::move(n));
    }
    return out;
  });
}

std::optional<SubmissionRow> SqlStateStore::find_submission(const std::string& cluster,
                                                            const std::string& workload) {
  return read("find_submission", [&](SqlConnection& c) -> std::optional<SubmissionRow> {
    const SqlRows rows = c.query(
        fmt::format("SELECT {} WHERE s.cluster = $1 AND s.workload = $2", kSubmissionColumns),
        {cluster, workload});
    if (rows.empty()) return std::nullopt;
    return submission_from(rows.front());
  });
}

SubmissionPage SqlStateStore::list_submissions(const SubmissionQuery& query) {
  require_limit(query.limit, kMaxPage, "list_submissions");
  std::vector<SqlValue> params;
  std::vector<std::string> where;
  auto param = [&](SqlValue v) {
    params.push_back(std::move(v));
    return fmt::format("${}", params.size());
  };
  if (query.cluster) where.push_back("s.cluster = " + param(*query.cluster));
  if (query.state) where.push_back("w.state = " + param(*query.state));
  if (query.unfinished) {
    where.push_back(fmt::format("(w.state IS NULL OR w.state NOT IN ({}, {}))",
                                param(std::string(kStateCompleted)),
                                param(std::string(kStateFailed))));
  }
  if (query.name_contains) {
    where.push_back(fmt::format("{}(s.workload, {}) > 0", dialect_.substring_index,
                                param(*query.name_contains)));
  }
  if (query.submitted_from) {
    where.push_back("s.submitted_at_ms >= " + param(to_ms(*query.submitted_from)));
  }
  if (query.submitted_before) {
    where.push_back("s.submitted_at_ms < " + param(to_ms(*query.submitted_before)));
  }
  // The total counts every matching row, whatever the page: the filters without the cursor.
  // workload_states has one row per (cluster, workload), so the join changes no count: without
  // a state filter it is left out.
  std::string count_sql = query.state || query.unfinished
                              ? fmt::format("SELECT COUNT(*) {}", kSubmissionsFrom)
                              : std::string("SELECT COUNT(*) FROM submissions s");
  for (std::size_t i = 0; i < where.size(); ++i) {
    count_sql += (i == 0 ? " WHERE " : " AND ") + where[i];
  }
  const std::vector<SqlValue> count_params = params;
  if (!query.cursor.empty()) {
    const auto [ms, id] = parse_cursor(query.cursor);
    const std::string p_ms = param(ms);
    const std::string p_ms_again = param(ms);
    where.push_back(
        fmt::format("(s.submitted_at_ms < {} OR (s.submitted_at_ms = {} AND s.id < {}))", p_ms,
                    p_ms_again, param(id)));
  }
  std::string sql = fmt::format("SELECT {}", kSubmissionColumns);
  for (std::size_t i = 0; i < where.size(); ++i) {
    sql += (i == 0 ? " WHERE " : " AND ") + where[i];
  }
  sql +=
      " ORDER BY s.submitted_at_ms DESC, s.id DESC LIMIT " + param(std::int64_t{query.limit} + 1);
  return read("list_submissions", [&](SqlConnection& c) {
    SubmissionPage page;
    const SqlRows rows = c.query(sql, params);
    for (const auto& row : rows) page.rows.push_back(submission_from(row));
    if (page.rows.size() > static_cast<std::size_t>(query.limit)) {
      page.rows.pop_back();
      page.next_cursor = make_cursor(page.rows.back());
    }
    if (query.with_total) {
      const SqlRows count = c.query(count_sql, count_params);
      page.total = count.empty() ? 0 : count.front().int64(0);
    }
    return page;
  });
}

SubmissionsImportResult SqlStateStore::import_submissions_jsonl(const std::filesystem::path& file) {
  constexpr const char* kOperation = "import_submissions_jsonl";
  SubmissionsImportResult result;
  std::error_code ec;
  const auto status = std::filesystem::status(file, ec);
  if (ec || !std::filesystem::exists(status)) {
    if (ec && ec != std::errc::no_such_file_or_directory) {
      fail(kOperation, fmt::format("cannot read '{}': {}", file.string(), ec.message()));
    }
    return result;
  }
  result.file_found = true;
  const std::string key =
      "import:submissions.jsonl:" + std::filesystem::absolute(file).lexically_normal().string();

  std::string text;
  try {
    text = read_whole_file(file);
  } catch (const std::exception& e) {
    fail(kOperation, e.what());
  }
  ParsedSubmissions parsed = parse_submissions_jsonl(text);

  write(kOperation, [&](SqlConnection& c) {
    // Claim the import first: a concurrent importer waits on this key (PostgreSQL) or on the
    // write lock (SQLite), then finds it taken and imports nothing.
    result.imported = 0;
    result.kept_existing = 0;
    const SqlRows claimed = c.query(
        "INSERT INTO store_meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING "
        "RETURNING key",
        {key, std::string("{}")});
    if (claimed.empty()) {
      result.already_imported = true;
      return;
    }
    for (const auto& row : parsed.rows) {
      const std::int64_t ms = parse_time_field(row.handle.submitted_at, "submitted_at");
      const SqlRows inserted = c.query(std::string(kInsertSubmission) +
                                           " ON CONFLICT (cluster, workload) DO NOTHING "
                                           "RETURNING id",
                                       submission_values(row, ms));
      ++(inserted.empty() ? result.kept_existing : result.imported);
    }
    const nlohmann::json summary{
        {"file", file.string()},           {"imported_at", format_iso8601(clock_->now())},
        {"imported", result.imported},     {"kept_existing", result.kept_existing},
        {"superseded", parsed.superseded}, {"skipped_lines", parsed.skipped_lines}};
    c.query("UPDATE store_meta SET value = $2 WHERE key = $1", {key, summary.dump()});
  });
  if (!result.already_imported) {
    result.superseded = parsed.superseded;
    result.skipped_lines = parsed.skipped_lines;
  }
  // Read-only from now on: the store is the record. (Root ignores the mode bits; an old falcon
  // run as root could still append, and its lines would not be imported.)
  std::filesystem::permissions(file,
                               std::filesystem::perms::owner_write |
                                   std::filesystem::perms::group_write |
                                   std::filesystem::perms::others_write,
                               std::filesystem::perm_options::remove, ec);
  result.made_read_only = !ec;
  if (ec) result.note = fmt::format("cannot make '{}' read-only: {}", file.string(), ec.message());
  return result;
}

// --- Selections.

// Group commit: a decision is one row, and a transaction's cost is its commit (on SQLite an
// fsync of the WAL, synchronous=FULL; on PostgreSQL a WAL flush and a round trip), so
// concurrent decisions share one. The caller that finds no batch being written becomes the
// leader: it takes every queued decision (its own included), writes them in one transaction
// and wakes their callers; decisions arriving meanwhile queue for the next batch. Nothing is
// answered before its batch committed, and a failed batch fails each of its callers.
std::int64_t SqlStateStore::record_selection(const ClusterSelection& selection) {
  std::vector<PendingSelection> mine(1);
  PendingSelection& pending = mine.front();
  pending.decided_ms = parse_time_field(selection.decided_at, "decided_at");
  pending.accelerator = selection.accelerator;
  pending.selected_cluster = selection.selected_cluster;
  pending.decided_at = selection.decided_at;
  pending.policy = selection.policy;
  pending.reason = selection.reason;
  const auto too_long = [](const std::optional<std::string>& text) {
    return text && text->size() > kMaxStoredErrorBytes;
  };
  const bool long_errors = std::any_of(
      selection.probe_results.begin(), selection.probe_results.end(),
      [&](const ClusterProbeResult& r) { return too_long(r.error) || too_long(r.capacity_error); });
  std::optional<ClusterSelection> bounded;  // a copy only when an error text is cut
  if (long_errors) {
    bounded = selection;
    for (ClusterProbeResult& r : bounded->probe_results) {
      r.error = bounded_error(r.error);
      r.capacity_error = bounded_error(r.capacity_error);
    }
  }
  pending.json = pack_explanation(to_json_text(bounded ? *bounded : selection));
  commit_selection(mine);
  if (pending.error) std::rethrow_exception(pending.error);
  return pending.id;
}

std::int64_t SqlStateStore::record_repeated_selection(std::int64_t same_as,
                                                      const std::string& decided_at) {
  const std::int64_t id = record_repeated_selections({{same_as, decided_at}}, Sync::kWait).front();
  if (id == 0) {
    throw std::invalid_argument(fmt::format(
        "record_repeated_selection: selection {} is not a stored decision made afresh", same_as));
  }
  return id;
}

std::vector<std::int64_t> SqlStateStore::record_repeated_selections(
    const std::vector<std::pair<std::int64_t, std::string>>& repeats, Sync sync) {
  std::vector<PendingSelection> mine(repeats.size());
  for (std::size_t i = 0; i < repeats.size(); ++i) {
    const auto& [same_as, decided_at] = repeats[i];
    if (same_as <= 0) {
      throw std::invalid_argument(fmt::format(
          "record_repeated_selection: same_as must be a selection id, not {}", same_as));
    }
    mine[i].decided_ms = parse_time_field(decided_at, "decided_at");
    mine[i].same_as = same_as;
  }
  std::vector<std::int64_t> ids;
  if (mine.empty()) return ids;
  // Through the group commit either way: one writer at a time in this process (several
  // connections taking turns at SQLite's write lock would sleep in its busy handler).
  for (PendingSelection& p : mine) p.no_wait = sync == Sync::kNoWait;
  commit_selection(mine);
  ids.reserve(mine.size());
  for (const PendingSelection& p : mine) {
    if (p.missing) {
      ids.push_back(0);
    } else if (p.error) {
      std::rethrow_exception(p.error);
    } else {
      ids.push_back(p.id);
    }
  }
  return ids;
}

// Group commit: a decision is one row, and a transaction's cost is its commit (on SQLite an
// fsync of the WAL, synchronous=FULL; on PostgreSQL a WAL flush and a round trip), so
// concurrent decisions share one. The caller that finds no batch being written becomes the
// leader: it takes every queued decision (its own included), writes them in one transaction
// and wakes their callers; decisions arriving meanwhile queue for the next batch. Nothing is
// answered before its batch committed, and a failed batch fails each of its callers. One
// caller's decisions queue together, and batches are written in queue order: its last one
// written means all are.
void SqlStateStore::commit_selection(std::vector<PendingSelection>& mine) {
  constexpr std::size_t kMaxBatch = 512;
  SelectionWaiter waiter;
  const auto all_done = [&] { return mine.back().state == PendingSelection::kDone; };
  const auto leads = [&] {
    return std::any_of(mine.begin(), mine.end(), [](const PendingSelection& p) {
      return p.state == PendingSelection::kLead;
    });
  };
  {
    std::unique_lock lock(selection_mutex_);
    for (PendingSelection& p : mine) {
      p.waiter = &waiter;
      selection_queue_.push_back(&p);
    }
    if (selection_writing_) {
      // A batch is being written: wait until ours are, or until the writer hands this caller
      // the next batch.
      waiter.woken.wait(lock, [&] { return all_done() || leads(); });
      if (all_done()) return;
    }
    selection_writing_ = true;
  }
  // The leader: writes every queued decision (its own first among them) in batches until its
  // own are written, then hands the lead to the oldest caller still waiting.
  for (;;) {
    std::vector<PendingSelection*> batch;
    {
      std::lock_guard lock(selection_mutex_);
      if (all_done()) break;
      const std::size_t n = std::min(selection_queue_.size(), kMaxBatch);
      batch.assign(selection_queue_.begin(),
                   selection_queue_.begin() + static_cast<std::ptrdiff_t>(n));
      selection_queue_.erase(selection_queue_.begin(),
                             selection_queue_.begin() + static_cast<std::ptrdiff_t>(n));
    }
    commit_selections(batch);
  }
  std::lock_guard lock(selection_mutex_);
  if (selection_queue_.empty()) {
    selection_writing_ = false;
  } else {
    PendingSelection* next = selection_queue_.front();
    next->state = PendingSelection::kLead;
    next->waiter->woken.notify_one();
  }
}

void SqlStateStore::commit_selections(const std::vector<PendingSelection*>& batch) {
  std::exception_ptr error;
  std::vector<std::int64_t> ids;
  try {
    // A batch of rows that all may skip the disk wait commits without it; one row that must
    // wait makes the whole batch wait.
    const bool no_wait = std::all_of(batch.begin(), batch.end(),
                                     [](const PendingSelection* p) { return p->no_wait; });
    const auto insert = [&](SqlConnection& c) { return insert_selections(c, batch); };
    ids = write("record_selection", insert,
                no_wait ? StateStore::Sync::kNoWait : StateStore::Sync::kWait);
  } catch (...) {
    error = std::current_exception();
  }
  std::lock_guard lock(selection_mutex_);  // see commit_selection
  SelectionWaiter* notified = nullptr;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    PendingSelection* p = batch[i];
    if (error) {
      p->error = error;
    } else if (ids[i] == 0) {
      p->missing = true;
      p->error = std::make_exception_ptr(std::invalid_argument(fmt::format(
          "record_repeated_selection: selection {} is not a stored decision made afresh",
          p->same_as)));
    } else {
      p->id = ids[i];
    }
    p->state = PendingSelection::kDone;
    // One caller's decisions are next to each other: wake it once.
    if (p->waiter != notified) {
      p->waiter->woken.notify_one();
      notified = p->waiter;
    }
  }
}

std::vector<std::int64_t> SqlStateStore::insert_selections(
    SqlConnection& c, const std::vector<PendingSelection*>& batch) {
  std::vector<std::int64_t> out;
  out.reserve(batch.size());
  for (const PendingSelection* p : batch) {
    if (p->same_as != 0) {
      // 0 (no row) when same_as is not a decision made afresh: that caller's error alone.
      const SqlRows rows = c.query(
          "INSERT INTO selections (accelerator, selected_cluster, decided_at_ms, "
          "selection_json, same_as) SELECT accelerator, selected_cluster, $1, '', id FROM "
          "selections WHERE id = $2 AND same_as IS NULL RETURNING id",
          {p->decided_ms, p->same_as});
      out.push_back(rows.empty() ? 0 : rows.front().int64(0));
      continue;
    }
    out.push_back(c.query("INSERT INTO selections (accelerator, selected_cluster, decided_at_ms, "
                          "selection_json, decided_at, policy, reason) VALUES ($1, $2, $3, $4, "
                          "$5, $6, $7) RETURNING id",
                          {p->accelerator, p->selected_cluster, p->decided_ms, p->json,
                           p->decided_at, p->policy, p->reason})
                      .at(0)
                      .int64(0));
  }
  return out;
}

namespace {

// A repeated decision's row has no JSON of its own: it reads the one it repeats.
constexpr const char* kSelectionColumns =
    "SELECT s.id, COALESCE(b.selection_json, s.selection_json), s.decided_at_ms, s.same_as FROM "
    "selections s LEFT JOIN selections b ON b.id = s.same_as ";

// The newest `limit` rows of `select` (a SELECT ... FROM selections s ...), of one accelerator
// type when given: list_selections and list_selection_summaries.
SqlRows newest_selections(SqlConnection& c, const std::string& select,
                          const std::optional<std::string>& accelerator, int limit) {
  return accelerator ? c.query(select + "WHERE s.accelerator = $1 ORDER BY s.id DESC LIMIT $2",
                               {*accelerator, std::int64_t{limit}})
                     : c.query(select + "ORDER BY s.id DESC LIMIT $1", {std::int64_t{limit}});
}

SelectionRecord selection_from(const SqlRow& row) {
  SelectionRecord r;
  r.id = row.int64(0);
  r.same_as = row.opt_int64(3).value_or(0);
  try {
    r.selection = nlohmann::json::parse(unpack_explanation(row.text(1))).get<ClusterSelection>();
  } catch (const std::exception& e) {
    throw SqlError(fmt::format("selection {} holds JSON that does not read back{}: {}", r.id,
                               r.same_as ? fmt::format(" (from selection {})", r.same_as) : "",
                               e.what()));
  }
  r.selection.selection_id = r.id;  // stored before the id existed
  if (r.same_as != 0) r.selection.decided_at = iso(row.int64(2));
  return r;
}

}  // namespace

std::optional<SelectionRecord> SqlStateStore::get_selection(std::int64_t id) {
  return read("get_selection", [&](SqlConnection& c) -> std::optional<SelectionRecord> {
    const SqlRows rows = c.query(std::string(kSelectionColumns) + "WHERE s.id = $1", {id});
    if (rows.empty()) return std::nullopt;
    return selection_from(rows.front());
  });
}

std::vector<SelectionSummary> SqlStateStore::list_selection_summaries(
    int limit, const std::optional<std::string>& accelerator) {
  require_limit(limit, kMaxPage, "list_selection_summaries");
  // A repeated decision's row has only its own time: the rest is the one's it repeats. A row
  // written before schema 4 has no decided_at, policy and reason columns filled: its (plain)
  // JSON's members are read by the database's JSON functions instead. COALESCE evaluates an
  // argument only when those before it are NULL, so packed JSON is never given to them.
  const std::string json = "COALESCE(b.selection_json, s.selection_json)";
  auto field = [&](const char* key) {
    return fmt::format("COALESCE(b.{1}, s.{1}, {0})",
                       fmt::format(fmt::runtime(dialect_.json_member), json, key), key);
  };
  const std::string columns = fmt::format(
      "SELECT s.id, s.same_as, s.accelerator, s.selected_cluster, s.decided_at_ms, {}, {}, {} "
      "FROM selections s LEFT JOIN selections b ON b.id = s.same_as ",
      field("decided_at"), field("policy"), field("reason"));
  return read("list_selection_summaries", [&](SqlConnection& c) {
    const SqlRows rows = newest_selections(c, columns, accelerator, limit);
    std::vector<SelectionSummary> out;
    out.reserve(rows.size());
    for (const auto& row : rows) {
      SelectionSummary& r = out.emplace_back();
      r.id = row.int64(0);
      r.same_as = row.opt_int64(1).value_or(0);
      r.accelerator = row.text(2);
      r.selected_cluster = row.text(3);
      // As selection_from: a decision made afresh keeps the time it was stored with.
      r.decided_at = r.same_as != 0 ? iso(row.int64(4)) : row.opt_text(5).value_or("");
      r.policy = row.opt_text(6).value_or("");
      r.reason = row.opt_text(7).value_or("");
    }
    return out;
  });
}

std::int64_t SqlStateStore::prune_selections(StoreTime before, std::int64_t max_rows) {
  if (max_rows <= 0) throw std::invalid_argument("prune_selections: max_rows must be positive");
  const std::int64_t before_ms = to_ms(before);
  // A few hundred rows a transaction: an explanation is up to ~150 KB, and a long delete would
  // hold the store's write lock while decisions wait for it.
  constexpr std::int64_t kBatch = 256;
  // Repeats first: a decision made afresh is kept while a kept row repeats it (that row reads
  // its explanation). What names a row is found by LEFT JOINs, which both databases run as one
  // pass (SQLite with an automatic index, PostgreSQL as an anti-join): a correlated NOT EXISTS
  // scanned the table once per old row in SQLite (87 s for 200,000 decisions; 0.3 s this way),
  // and PostgreSQL runs NOT IN row by row once its list outgrows work_mem.
  const std::string queries[] = {
      "DELETE FROM selections WHERE id IN (SELECT s.id FROM selections s LEFT JOIN submissions u "
      "ON u.selection_id = s.id WHERE s.decided_at_ms < $1 AND s.same_as IS NOT NULL AND u.id IS "
      "NULL LIMIT $2) RETURNING id",
      "DELETE FROM selections WHERE id IN (SELECT s.id FROM selections s LEFT JOIN submissions u "
      "ON u.selection_id = s.id LEFT JOIN selections r ON r.same_as = s.id WHERE "
      "s.decided_at_ms < $1 AND s.same_as IS NULL AND u.id IS NULL AND r.id IS NULL LIMIT $2) "
      "RETURNING id",
  };
  std::int64_t deleted = 0;
  for (const std::string& query : queries) {
    for (;;) {
      const std::int64_t batch = std::min(kBatch, max_rows - deleted);
      if (batch == 0) return deleted;
      const auto n = write("prune_selections", [&](SqlConnection& c) {
        return static_cast<std::int64_t>(c.query(query, {before_ms, batch}).size());
      });
      deleted += n;
      if (n < batch) break;
    }
  }
  return deleted;
}

std::vector<SelectionRecord> SqlStateStore::list_selections(
    int limit, const std::optional<std::string>& accelerator) {
  require_limit(limit, kMaxPage, "list_selections");
  return read("list_selections", [&](SqlConnection& c) {
    const SqlRows rows = newest_selections(c, kSelectionColumns, accelerator, limit);
    std::vector<SelectionRecord> out;
    for (const auto& row : rows) out.push_back(selection_from(row));
    return out;
  });
}

// --- Probes.

std::vector<std::int64_t> SqlStateStore::record_probes(const std::vector<ProbeRecord>& probes) {
  std::vector<std::int64_t> probed_ms(probes.size());
  for (std::size_t i = 0; i < probes.size(); ++i) {
    require_nonempty(probes[i].result.cluster, "probe cluster");
    probed_ms[i] = parse_time_field(probes[i].result.probed_at, "probed_at");
    require_json(probes[i].extra_json, "probe extra_json", /*object_only=*/true);
  }
  // Rows of latest_probes are written in cluster order, so concurrent batches lock them in the
  // same order and cannot deadlock.
  std::vector<std::size_t> order(probes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return probes[a].result.cluster < probes[b].result.cluster;
  });
  return write("record_probes", [&](SqlConnection& c) {
    std::vector<std::int64_t> ids(probes.size());
    for (const std::size_t i : order) {
      const ProbeRecord& p = probes[i];
      std::vector<SqlValue> values{p.result.cluster,
                                   probed_ms[i],
                                   std::int64_t{p.result.reachable ? 1 : 0},
                                   opt_int(p.result.queue_depth),
                                   opt_int(p.result.running_count),
                                   opt_text(bounded_error(p.result.error)),
                                   p.backend,
                                   p.duration_ms,
                                   p.extra_json};
      ids[i] = c.query(fmt::format("INSERT INTO probes ({}) VALUES ($1, $2, $3, $4, $5, $6, $7, "
                                   "$8, $9) RETURNING id",
                                   kProbeColumns),
                       values)
                   .at(0)
                   .int64(0);
      values.push_back(ids[i]);
      c.query(fmt::format(
                  "INSERT INTO latest_probes ({}, probe_id) VALUES ($1, $2, $3, $4, $5, $6, $7, "
                  "$8, $9, $10) ON CONFLICT (cluster) DO UPDATE SET probe_id = "
                  "excluded.probe_id, probed_at_ms = excluded.probed_at_ms, reachable = "
                  "excluded.reachable, queue_depth = excluded.queue_depth, running_count = "
                  "excluded.running_count, error = excluded.error, backend = excluded.backend, "
                  "duration_ms = excluded.duration_ms, extra_json = excluded.extra_json WHERE "
                  "excluded.probed_at_ms >= latest_probes.probed_at_ms",
                  kProbeColumns),
              values);
    }
    return ids;
  });
}

std::vector<ProbeRecord> SqlStateStore::latest_probes() {
  return read("latest_probes", [&](SqlConnection& c) {
    std::vector<ProbeRecord> out;
    for (const auto& row : c.query(
             fmt::format("SELECT probe_id, {} FROM latest_probes ORDER BY cluster", kProbeColumns),
             {})) {
      out.push_back(probe_from(row));
    }
    return out;
  });
}

std::optional<ProbeRecord> SqlStateStore::latest_probe(const std::string& cluster) {
  return read("latest_probe", [&](SqlConnection& c) -> std::optional<ProbeRecord> {
    const SqlRows rows = c.query(
        fmt::format("SELECT probe_id, {} FROM latest_probes WHERE cluster = $1", kProbeColumns),
        {cluster});
    if (rows.empty()) return std::nullopt;
    return probe_from(rows.front());
  });
}

std::vector<ProbeRecord> SqlStateStore::probe_history(const std::string& cluster, StoreTime from,
                                                      StoreTime to, int limit) {
  require_limit(limit, kMaxHistory, "probe_history");
  return read("probe_history", [&](SqlConnection& c) {
    std::vector<ProbeRecord> out;
    for (const auto& row :
         c.query(fmt::format("SELECT id, {} FROM probes WHERE cluster = $1 AND probed_at_ms >= $2 "
                             "AND probed_at_ms < $3 ORDER BY probed_at_ms, id LIMIT $4",
                             kProbeColumns),
                 {cluster, to_ms(from), to_ms(to), std::int64_t{limit}})) {
      out.push_back(probe_from(row));
    }
    return out;
  });
}

DownsampleResult SqlStateStore::downsample_probes(const ProbeRetention& retention, StoreTime now) {
  const auto bucket_ms = std::chrono::duration_cast<std::chrono::milliseconds>(retention.bucket);
  if (bucket_ms.count() <= 0) {
    throw std::invalid_argument("probe retention: bucket must be positive");
  }
  if (retention.full_resolution.count() < 0 ||
      (retention.drop_after && *retention.drop_after < retention.full_resolution)) {
    throw std::invalid_argument(
        "probe retention: full_resolution must be >= 0 and drop_after >= full_resolution");
  }
  const std::int64_t thin_before = to_ms(now - retention.full_resolution);
  return write("downsample_probes", [&](SqlConnection& c) {
    DownsampleResult result;
    if (retention.drop_after) {
      result.dropped = static_cast<std::int64_t>(
          c.query("DELETE FROM probes WHERE probed_at_ms < $1 RETURNING id",
                  {to_ms(now - *retention.drop_after)})
              .size());
    }
    // Keep the newest probe of each cluster in each bucket; delete the rest of the old part.
    result.thinned = static_cast<std::int64_t>(
        c.query("DELETE FROM probes WHERE id IN (SELECT id FROM (SELECT id, ROW_NUMBER() OVER "
                "(PARTITION BY cluster, probed_at_ms / $2 ORDER BY probed_at_ms DESC, id DESC) "
                "AS rn FROM probes WHERE probed_at_ms < $1) ranked WHERE rn > 1) RETURNING id",
                {thin_before, std::int64_t{bucket_ms.count()}})
            .size());
    return result;
  });
}

// --- Workload events.

std::optional<std::int64_t> SqlStateStore::record_workload_event(const WorkloadEvent& event) {
  require_nonempty(event.cluster, "event cluster");
  require_nonempty(event.workload, "event workload");
  require_nonempty(event.state, "event state");
  const std::int64_t observed_ms = to_ms(event.observed_at);
  return write("record_workload_event", [&](SqlConnection& c) -> std::optional<std::int64_t> {
    // The conditional upsert is the arbiter: PostgreSQL locks the pair's row, so of two
    // replicas reporting the same change one updates it and the other finds nothing to change.
    const SqlRows changed = c.query(
        "INSERT INTO workload_states (cluster, workload, state, observed_at_ms) VALUES ($1, $2, "
        "$3, $4) ON CONFLICT (cluster, workload) DO UPDATE SET state = excluded.state, "
        "observed_at_ms = excluded.observed_at_ms WHERE workload_states.state <> excluded.state "
        "AND workload_states.observed_at_ms <= excluded.observed_at_ms RETURNING state",
        {event.cluster, event.workload, event.state, observed_ms});
    if (changed.empty()) return std::nullopt;
    return c
        .query(
            "INSERT INTO workload_events (cluster, workload, state, observed_at_ms, detail) "
            "VALUES ($1, $2, $3, $4, $5) RETURNING id",
            {event.cluster, event.workload, event.state, observed_ms, event.detail})
        .at(0)
        .int64(0);
  });
}

std::vector<WorkloadEvent> SqlStateStore::list_workload_events(const std::string& cluster,
                                                               const std::string& workload,
                                                               int limit) {
  require_limit(limit, kMaxHistory, "list_workload_events");
  return read("list_workload_events", [&](SqlConnection& c) {
    std::vector<WorkloadEvent> out;
    for (const auto& row :
         c.query("SELECT id, cluster, workload, state, observed_at_ms, detail FROM "
                 "workload_events WHERE cluster = $1 AND workload = $2 ORDER BY id DESC LIMIT $3",
                 {cluster, workload, std::int64_t{limit}})) {
      out.push_back(event_from(row));
    }
    std::reverse(out.begin(), out.end());
    return out;
  });
}

std::vector<WorkloadEvent> SqlStateStore::cluster_events(const std::string& cluster, StoreTime from,
                                                         StoreTime to, int limit) {
  require_limit(limit, kMaxHistory, "cluster_events");
  return read("cluster_events", [&](SqlConnection& c) {
    std::vector<WorkloadEvent> out;
    for (const auto& row :
         c.query("SELECT id, cluster, workload, state, observed_at_ms, detail FROM "
                 "workload_events WHERE cluster = $1 AND observed_at_ms >= $2 AND "
                 "observed_at_ms < $3 ORDER BY observed_at_ms, id LIMIT $4",
                 {cluster, to_ms(from), to_ms(to), std::int64_t{limit}})) {
      out.push_back(event_from(row));
    }
    return out;
  });
}

// --- Exports.

std::int64_t SqlStateStore::start_export(const ExportRecord& record) {
  require_nonempty(record.workload, "export workload");
  require_nonempty(record.cluster, "export cluster");
  require_nonempty(record.dest, "export dest");
  require_json(record.progress_json, "export progress_json");
  if (record.state != kExportQueued && record.state != kExportRunning) {
    throw std::invalid_argument(
        fmt::format("export: initial state '{}' is not queued or running", record.state));
  }
  return write("start_export", [&](SqlConnection& c) {
    return c
        .query(
            "INSERT INTO exports (workload, cluster, dest, state, progress_json, result_json, "
            "started_at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
            {record.workload, record.cluster, record.dest, record.state, record.progress_json,
             std::string("null"), to_ms(record.started_at)})
        .at(0)
        .int64(0);
  });
}

bool SqlStateStore::begin_export(std::int64_t id, StoreTime started_at) {
  return write("begin_export", [&](SqlConnection& c) {
    return !c.query(
                 "UPDATE exports SET state = $2, started_at_ms = $3 WHERE id = $1 AND state IN "
                 "($2, $4) RETURNING id",
                 {id, std::string(kExportRunning), to_ms(started_at), std::string(kExportQueued)})
                .empty();
  });
}

bool SqlStateStore::update_export_progress(std::int64_t id, const std::string& progress_json) {
  require_json(progress_json, "export progress_json");
  return write("update_export_progress", [&](SqlConnection& c) {
    return !c.query(
                 "UPDATE exports SET progress_json = $2 WHERE id = $1 AND state = $3 "
                 "RETURNING id",
                 {id, progress_json, std::string(kExportRunning)})
                .empty();
  });
}

bool SqlStateStore::finish_export(std::int64_t id, const std::string& state,
                                  const std::string& result_json, StoreTime finished_at) {
  if (state != kExportDone && state != kExportFailed) {
    throw std::invalid_argument(
        fmt::format("export {}: final state '{}' is not done or failed", id, state));
  }
  require_json(result_json, "export result_json");
  return write("finish_export", [&](SqlConnection& c) {
    return !c.query(
                 "UPDATE exports SET state = $2, result_json = $3, finished_at_ms = $4 WHERE "
                 "id = $1 AND state IN ($5, $6) RETURNING id",
                 {id, state, result_json, to_ms(finished_at), std::string(kExportRunning),
                  std::string(kExportQueued)})
                .empty();
  });
}

std::optional<ExportRecord> SqlStateStore::get_export(std::int64_t id) {
  return read("get_export", [&](SqlConnection& c) -> std::optional<ExportRecord> {
    const SqlRows rows =
        c.query(fmt::format("SELECT {} FROM exports WHERE id = $1", kExportColumns), {id});
    if (rows.empty()) return std::nullopt;
    return export_from(rows.front());
  });
}

std::vector<ExportRecord> SqlStateStore::list_exports(int limit,
                                                      const std::optional<std::string>& workload) {
  require_limit(limit, kMaxPage, "list_exports");
  return read("list_exports", [&](SqlConnection& c) {
    const SqlRows rows =
        workload ? c.query(fmt::format("SELECT {} FROM exports WHERE workload = $1 ORDER BY id "
                                       "DESC LIMIT $2",
                                       kExportColumns),
                           {*workload, std::int64_t{limit}})
                 : c.query(fmt::format("SELECT {} FROM exports ORDER BY id DESC LIMIT $1",
                                       kExportColumns),
                           {std::int64_t{limit}});
    std::vector<ExportRecord> out;
    for (const auto& row : rows) out.push_back(export_from(row));
    return out;
  });
}

// --- Recoveries.

void SqlStateStore::put_recovery(const RecoveryRecord& r) {
  require_nonempty(r.incident_id, "recovery incident_id");
  require_nonempty(r.workload, "recovery workload");
  require_json(r.detail_json, "recovery detail_json");
  write("put_recovery", [&](SqlConnection& c) {
    c.query(
        fmt::format("INSERT INTO recoveries ({}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, "
                    "$11, $12, $13, $14, $15, $16) ON CONFLICT (incident_id) DO UPDATE SET "
                    "to_cluster = excluded.to_cluster, replacement = excluded.replacement, "
                    "cause = excluded.cause, workload = "
                    "excluded.workload, cluster = excluded.cluster, attempts = excluded.attempts, "
                    "t_violation_ms = excluded.t_violation_ms, detected_ms = excluded.detected_ms, "
                    "decided_ms = excluded.decided_ms, submitted_ms = excluded.submitted_ms, "
                    "admitted_ms = excluded.admitted_ms, recovered_ms = excluded.recovered_ms, "
                    "classification = excluded.classification, outcome = excluded.outcome, "
                    "detail_json = excluded.detail_json",
                    kRecoveryColumns),
        {r.incident_id, r.workload, r.cluster, std::int64_t{r.attempts}, opt_ms(r.t_violation),
         opt_ms(r.detected), opt_ms(r.decided), opt_ms(r.submitted), opt_ms(r.admitted),
         opt_ms(r.recovered), r.classification, r.outcome, r.detail_json, r.to_cluster,
         r.replacement, r.cause});
  });
}

std::optional<RecoveryRecord> SqlStateStore::get_recovery(const std::string& incident_id) {
  return read("get_recovery", [&](SqlConnection& c) -> std::optional<RecoveryRecord> {
    const SqlRows rows =
        c.query(fmt::format("SELECT {} FROM recoveries WHERE incident_id = $1", kRecoveryColumns),
                {incident_id});
    if (rows.empty()) return std::nullopt;
    return recovery_from(rows.front());
  });
}

std::vector<RecoveryRecord> SqlStateStore::list_recoveries(
    int limit, const std::optional<std::string>& workload) {
  require_limit(limit, kMaxPage, "list_recoveries");
  return read("list_recoveries", [&](SqlConnection& c) {
    const SqlRows rows =
        workload ? c.query(fmt::format("SELECT {} FROM recoveries WHERE workload = $1 ORDER BY "
                                       "id DESC LIMIT $2",
                                       kRecoveryColumns),
                           {*workload, std::int64_t{limit}})
                 : c.query(fmt::format("SELECT {} FROM recoveries ORDER BY id DESC LIMIT $1",
                                       kRecoveryColumns),
                           {std::int64_t{limit}});
    std::vector<RecoveryRecord> out;
    for (const auto& row : rows) out.push_back(recovery_from(row));
    return out;
  });
}

// --- Managed workloads.

namespace {

void check_managed(const ManagedWorkloadRecord& m) {
  require_nonempty(m.name, "managed workload name");
  require_nonempty(m.incarnation, "managed workload incarnation");
  require_json(m.detail_json, "managed workload detail_json", /*object_only=*/true);
  if (m.max_recoveries < 0) {
    throw std::invalid_argument(
        fmt::format("managed workload '{}': max_recoveries must be >= 0", m.name));
  }
  if (m.stable_after.count() < 0) {
    throw std::invalid_argument(
        fmt::format("managed workload '{}': stable_after must be >= 0", m.name));
  }
}

}  // namespace

bool SqlStateStore::create_managed(const ManagedWorkloadRecord& m) {
  check_managed(m);
  return write("create_managed", [&](SqlConnection& c) {
    return !c.query(fmt::format("INSERT INTO managed_workloads ({}) VALUES ($1, $2, $3, $4, $5, "
                                "$6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT (name) DO NOTHING "
                                "RETURNING name",
                                kManagedColumns),
                    managed_values(m))
                .empty();
  });
}

bool SqlStateStore::update_managed(ManagedWorkloadRecord& m,
                                   const std::optional<LeaseFence>& fence) {
  check_managed(m);
  std::vector<SqlValue> values = managed_values(m);
  values.push_back(m.version);
  std::string condition = "name = $1 AND version = $14";
  if (fence) {
    values.push_back(fence->lease);
    values.push_back(fence->token);
    condition += " AND EXISTS (SELECT 1 FROM leases WHERE name = $15 AND token = $16)";
  }
  const std::optional<std::int64_t> version =
      write("update_managed", [&](SqlConnection& c) -> std::optional<std::int64_t> {
        const SqlRows rows = c.query(
            fmt::format("UPDATE managed_workloads SET spec_json = $2, max_recoveries = $3, "
                        "stable_after_ms = $4, recover_on_failure = $5, incarnation = $6, "
                        "cluster = $7, state = $8, attempts = $9, created_at_ms = $10, "
                        "updated_at_ms = $11, detail_json = $12, phase = $13, version = version + "
                        "1 WHERE {} "
                        "RETURNING version",
                        condition),
            values);
        if (rows.empty()) return std::nullopt;
        return rows.front().int64(0);
      });
  if (!version) return false;
  m.version = *version;
  return true;
}

bool SqlStateStore::delete_managed(const std::string& name) {
  return write("delete_managed", [&](SqlConnection& c) {
    return !c.query("DELETE FROM managed_workloads WHERE name = $1 RETURNING name", {name}).empty();
  });
}

std::optional<ManagedWorkloadRecord> SqlStateStore::get_managed(const std::string& name) {
  return read("get_managed", [&](SqlConnection& c) -> std::optional<ManagedWorkloadRecord> {
    const SqlRows rows = c.query(
        fmt::format("SELECT {} FROM managed_workloads WHERE name = $1", kManagedRead), {name});
    if (rows.empty()) return std::nullopt;
    return managed_from(rows.front());
  });
}

std::vector<ManagedWorkloadRecord> SqlStateStore::list_managed(
    int limit, const std::vector<ManagedState>& states, const std::string& after) {
  require_limit(limit, kMaxPage, "list_managed");
  return read("list_managed", [&](SqlConnection& c) {
    std::vector<SqlValue> values{std::int64_t{limit}, after};
    std::string where = " WHERE name > $2";
    for (std::size_t i = 0; i < states.size(); ++i) {
      values.push_back(std::string(to_string(states[i])));
      where += fmt::format("{}${}", i == 0 ? " AND state IN (" : ", ", values.size());
    }
    if (!states.empty()) where += ")";
    std::vector<ManagedWorkloadRecord> out;
    for (const auto& row :
         c.query(fmt::format("SELECT {} FROM managed_workloads{} ORDER BY name LIMIT $1",
                             kManagedRead, where),
                 values)) {
      out.push_back(managed_from(row));
    }
    return out;
  });
}

// --- Circuit breakers.

std::optional<BreakerState> SqlStateStore::get_breaker(const std::string& key) {
  return read("get_breaker", [&](SqlConnection& c) -> std::optional<BreakerState> {
    const SqlRows rows = c.query(
        fmt::format("SELECT {} FROM circuit_breakers WHERE key = $1", kBreakerColumns), {key});
    if (rows.empty()) return std::nullopt;
    return breaker_from(rows.front());
  });
}

std::vector<BreakerState> SqlStateStore::list_breakers() {
  return read("list_breakers", [&](SqlConnection& c) {
    std::vector<BreakerState> out;
    for (const auto& row : c.query(
             fmt::format("SELECT {} FROM circuit_breakers ORDER BY key", kBreakerColumns), {})) {
      out.push_back(breaker_from(row));
    }
    return out;
  });
}

bool SqlStateStore::compare_and_set_breaker(const BreakerState& next) {
  require_nonempty(next.key, "breaker key");
  if (next.state != kBreakerClosed && next.state != kBreakerOpen &&
      next.state != kBreakerHalfOpen) {
    throw std::invalid_argument(fmt::format(
        "breaker '{}': state '{}' is not closed, open or half_open", next.key, next.state));
  }
  if (next.version < 0) {
    throw std::invalid_argument(fmt::format("breaker '{}': negative version", next.key));
  }
  return write("compare_and_set_breaker", [&](SqlConnection& c) {
    const std::vector<SqlValue> values{next.key,
                                       next.state,
                                       std::int64_t{next.consecutive_failures},
                                       std::int64_t{next.trips},
                                       opt_ms(next.opened_until),
                                       to_ms(next.updated_at),
                                       next.version};
    if (next.version == 0) {
      return !c.query(fmt::format("INSERT INTO circuit_breakers ({}) VALUES ($1, $2, $3, $4, $5, "
                                  "$6, $7 + 1) ON CONFLICT (key) DO NOTHING RETURNING key",
                                  kBreakerColumns),
                      values)
                  .empty();
    }
    return !c.query(
                 "UPDATE circuit_breakers SET state = $2, consecutive_failures = $3, trips = "
                 "$4, opened_until_ms = $5, updated_at_ms = $6, version = version + 1 WHERE "
                 "key = $1 AND version = $7 RETURNING key",
                 values)
                .empty();
  });
}

// --- Leases.

std::optional<Lease> SqlStateStore::acquire_lease(const std::string& name,
                                                  const std::string& holder,
                                                  std::chrono::milliseconds ttl, StoreTime now) {
  check_lease_args(name, holder, ttl);
  return write("acquire_lease", [&](SqlConnection& c) -> std::optional<Lease> {
    // One statement, atomic on both databases: take the row when it is free, expired or ours.
    // In SET, `leases.*` is the row as it was; the token grows when the holder changes or the
    // lease had expired.
    const SqlRows rows = c.query(
        fmt::format(
            "INSERT INTO leases ({0}) VALUES ($1, $2, 1, $3, $4, $3) ON CONFLICT (name) DO UPDATE "
            "SET heartbeat_at_ms = excluded.heartbeat_at_ms, "
            "token = CASE WHEN leases.holder = excluded.holder AND leases.expires_at_ms > "
            "excluded.acquired_at_ms THEN leases.token ELSE leases.token + 1 END, "
            "acquired_at_ms = CASE WHEN leases.holder = excluded.holder AND leases.expires_at_ms "
            "> excluded.acquired_at_ms THEN leases.acquired_at_ms ELSE excluded.acquired_at_ms "
            "END, holder = excluded.holder, expires_at_ms = excluded.expires_at_ms WHERE "
            "leases.holder = excluded.holder OR leases.expires_at_ms <= excluded.acquired_at_ms "
            "RETURNING {0}",
            kLeaseColumns),
        {name, holder, to_ms(now), to_ms(now + ttl)});
    if (rows.empty()) return std::nullopt;
    return lease_from(rows.front());
  });
}

std::optional<Lease> SqlStateStore::renew_lease(const std::string& name, const std::string& holder,
                                                std::chrono::milliseconds ttl, StoreTime now) {
  check_lease_args(name, holder, ttl);
  return write("renew_lease", [&](SqlConnection& c) -> std::optional<Lease> {
    const SqlRows rows =
        c.query(fmt::format("UPDATE leases SET expires_at_ms = $4, heartbeat_at_ms = $3 WHERE "
                            "name = $1 AND holder = $2 AND expires_at_ms > $3 RETURNING {}",
                            kLeaseColumns),
                {name, holder, to_ms(now), to_ms(now + ttl)});
    if (rows.empty()) return std::nullopt;
    return lease_from(rows.front());
  });
}

bool SqlStateStore::release_lease(const std::string& name, const std::string& holder,
                                  StoreTime now) {
  require_nonempty(name, "lease name");
  require_nonempty(holder, "lease holder");
  return write("release_lease", [&](SqlConnection& c) {
    return !c.query(
                 "UPDATE leases SET expires_at_ms = $3 WHERE name = $1 AND holder = $2 AND "
                 "expires_at_ms > $3 RETURNING name",
                 {name, holder, to_ms(now)})
                .empty();
  });
}

std::optional<Lease> SqlStateStore::get_lease(const std::string& name) {
  return read("get_lease", [&](SqlConnection& c) -> std::optional<Lease> {
    const SqlRows rows =
        c.query(fmt::format("SELECT {} FROM leases WHERE name = $1", kLeaseColumns), {name});
    if (rows.empty()) return std::nullopt;
    return lease_from(rows.front());
  });
}

}  // namespace falcon::state

namespace falcon {

std::vector<ManagedWorkloadRecord> list_all_managed(StateStore& store,
                                                    const std::vector<ManagedState>& states) {
  constexpr int kPage = 1000;
  std::vector<ManagedWorkloadRecord> all;
  std::string after;
  for (;;) {
    std::vector<ManagedWorkloadRecord> page = store.list_managed(kPage, states, after);
    const bool last = page.size() < static_cast<std::size_t>(kPage);
    if (!page.empty()) after = page.back().name;
    all.insert(all.end(), std::make_move_iterator(page.begin()),
               std::make_move_iterator(page.end()));
    if (last) return all;
  }
}

}  // namespace falcon
