#include "state/migrations.h"

#include <fmt/format.h>

#include "falcon/state_store.h"

namespace falcon::state {
namespace {

// Version 1: every table of issue 13 (submissions, selections, probes, workload events,
// exports) and of issues 15 and 16 (circuit breakers, recoveries, leases). Times are integer
// milliseconds since the Unix epoch (UTC), named *_ms. Flexible parts are JSON text.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE submissions (
  id {id},
  cluster TEXT NOT NULL,
  workload TEXT NOT NULL,
  namespace TEXT NOT NULL,
  accelerator_type TEXT NOT NULL,
  device_class TEXT NOT NULL,
  submitted_at_ms {int} NOT NULL,
  cluster_id TEXT NOT NULL,
  project TEXT NOT NULL,
  zone TEXT NOT NULL,
  docker_image TEXT NOT NULL,
  priority TEXT NOT NULL,
  spec_json TEXT,
  UNIQUE (cluster, workload)
);
CREATE INDEX submissions_by_time ON submissions (submitted_at_ms, id);
CREATE INDEX submissions_by_cluster_time ON submissions (cluster, submitted_at_ms, id);

CREATE TABLE workload_states (
  cluster TEXT NOT NULL,
  workload TEXT NOT NULL,
  state TEXT NOT NULL,
  observed_at_ms {int} NOT NULL,
  PRIMARY KEY (cluster, workload)
);
CREATE INDEX workload_states_by_state ON workload_states (state);

CREATE TABLE workload_events (
  id {id},
  cluster TEXT NOT NULL,
  workload TEXT NOT NULL,
  state TEXT NOT NULL,
  observed_at_ms {int} NOT NULL,
  detail TEXT NOT NULL
);
CREATE INDEX workload_events_by_workload ON workload_events (cluster, workload, id);

CREATE TABLE selections (
  id {id},
  accelerator TEXT NOT NULL,
  selected_cluster TEXT NOT NULL,
  decided_at_ms {int} NOT NULL,
  selection_json TEXT NOT NULL
);
CREATE INDEX selections_by_accelerator ON selections (accelerator, id);
CREATE INDEX selections_by_time ON selections (decided_at_ms);

CREATE TABLE probes (
  id {id},
  cluster TEXT NOT NULL,
  probed_at_ms {int} NOT NULL,
  reachable {int} NOT NULL,
  queue_depth {int},
  running_count {int},
  error TEXT,
  backend TEXT NOT NULL,
  duration_ms {int} NOT NULL,
  extra_json TEXT NOT NULL
);
CREATE INDEX probes_by_cluster_time ON probes (cluster, probed_at_ms, id);
CREATE INDEX probes_by_time ON probes (probed_at_ms);

CREATE TABLE latest_probes (
  cluster TEXT PRIMARY KEY,
  probe_id {int} NOT NULL,
  probed_at_ms {int} NOT NULL,
  reachable {int} NOT NULL,
  queue_depth {int},
  running_count {int},
  error TEXT,
  backend TEXT NOT NULL,
  duration_ms {int} NOT NULL,
  extra_json TEXT NOT NULL
);

CREATE TABLE exports (
  id {id},
  workload TEXT NOT NULL,
  cluster TEXT NOT NULL,
  dest TEXT NOT NULL,
  state TEXT NOT NULL,
  progress_json TEXT NOT NULL,
  result_json TEXT NOT NULL,
  started_at_ms {int} NOT NULL,
  finished_at_ms {int}
);
CREATE INDEX exports_by_workload ON exports (workload, id);

CREATE TABLE recoveries (
  id {id},
  incident_id TEXT NOT NULL UNIQUE,
  workload TEXT NOT NULL,
  cluster TEXT NOT NULL,
  attempts {int} NOT NULL,
  t_violation_ms {int},
  detected_ms {int},
  decided_ms {int},
  submitted_ms {int},
  admitted_ms {int},
  recovered_ms {int},
  classification TEXT NOT NULL,
  outcome TEXT NOT NULL,
  detail_json TEXT NOT NULL
);
CREATE INDEX recoveries_by_workload ON recoveries (workload, id);

CREATE TABLE circuit_breakers (
  key TEXT PRIMARY KEY,
  state TEXT NOT NULL,
  consecutive_failures {int} NOT NULL,
  trips {int} NOT NULL,
  opened_until_ms {int},
  updated_at_ms {int} NOT NULL,
  version {int} NOT NULL
);

CREATE TABLE leases (
  name TEXT PRIMARY KEY,
  holder TEXT NOT NULL,
  token {int} NOT NULL,
  acquired_at_ms {int} NOT NULL,
  expires_at_ms {int} NOT NULL
);

CREATE TABLE store_meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
)sql";

// Version 2 (issue 16, self-healing): managed workloads; a recovery's destination, replacement
// and cause; a lease's last heartbeat.
constexpr const char* kSchemaV2 = R"sql(
CREATE TABLE managed_workloads (
  name TEXT PRIMARY KEY,
  spec_json TEXT NOT NULL,
  max_recoveries {int} NOT NULL,
  stable_after_ms {int} NOT NULL,
  recover_on_failure {int} NOT NULL,
  incarnation TEXT NOT NULL,
  cluster TEXT NOT NULL,
  state TEXT NOT NULL,
  attempts {int} NOT NULL,
  created_at_ms {int} NOT NULL,
  updated_at_ms {int} NOT NULL,
  detail_json TEXT NOT NULL
);
CREATE INDEX managed_workloads_by_state ON managed_workloads (state, name);

ALTER TABLE recoveries ADD COLUMN to_cluster TEXT NOT NULL DEFAULT '';
ALTER TABLE recoveries ADD COLUMN replacement TEXT NOT NULL DEFAULT '';
ALTER TABLE recoveries ADD COLUMN cause TEXT NOT NULL DEFAULT '';

ALTER TABLE leases ADD COLUMN heartbeat_at_ms {int} NOT NULL DEFAULT 0;
)sql";

// Version 3 (issue 13, decisions at volume): a decision repeated on the same inputs points at
// the one it repeats instead of storing its explanation again (selection_json is then ''); a
// submission names the decision that chose its cluster (null: the cluster was given).
constexpr const char* kSchemaV3 = R"sql(
ALTER TABLE selections ADD COLUMN same_as {int};
ALTER TABLE submissions ADD COLUMN selection_id {int};
)sql";

// Version 4: a decision's explanation is stored packed (state/explanation_codec.h: ~30x
// smaller), and the fields a list of decisions shows get columns of their own, so that a list
// does not unpack explanations. Rows of earlier versions keep their JSON as it is, these
// columns NULL: reads fall back to the JSON (list_selection_summaries).
constexpr const char* kSchemaV4 = R"sql(
ALTER TABLE selections ADD COLUMN decided_at TEXT;
ALTER TABLE selections ADD COLUMN policy TEXT;
ALTER TABLE selections ADD COLUMN reason TEXT;
)sql";

// Version 5 (issue 27): a managed workload's row has a version, and every update is a
// compare-and-set on it (StateStore::update_managed).
constexpr const char* kSchemaV5 = R"sql(
ALTER TABLE managed_workloads ADD COLUMN version {int} NOT NULL DEFAULT 1;
)sql";

constexpr const char* kSchemaV6 = R"sql(
CREATE TABLE deletes (
  id {id},
  cluster TEXT NOT NULL,
  workload TEXT NOT NULL,
  requested_at_ms {int} NOT NULL,
  outcome TEXT,
  detail TEXT NOT NULL DEFAULT '',
  finished_at_ms {int}
);
CREATE INDEX deletes_by_workload ON deletes (cluster, workload, id);
ALTER TABLE managed_workloads ADD COLUMN phase TEXT NOT NULL DEFAULT '';
UPDATE managed_workloads SET phase = COALESCE({detail_phase}, '');
)sql";

// Version 7 (issue 29): the dispatcher's nominations, recorded before the manager is patched.
constexpr const char* kSchemaV7 = R"sql(
CREATE TABLE nominations (
  id {id},
  manager TEXT NOT NULL,
  workload_uid TEXT NOT NULL,
  namespace TEXT NOT NULL,
  workload TEXT NOT NULL,
  accelerator TEXT NOT NULL,
  clusters TEXT NOT NULL,
  selection_id {int},
  requested_at_ms {int} NOT NULL,
  outcome TEXT,
  detail TEXT NOT NULL DEFAULT '',
  finished_at_ms {int}
);
CREATE INDEX nominations_by_workload ON nominations (workload_uid, id);
)sql";

constexpr const char* kVersionTable = R"sql(
CREATE TABLE IF NOT EXISTS schema_migrations (
  version {int} PRIMARY KEY,
  name TEXT NOT NULL,
  applied_at_ms {int} NOT NULL
))sql";

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (std::size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos)) {
    s.replace(pos, from.size(), to);
    pos += to.size();
  }
}

}  // namespace

SchemaTooNewError::SchemaTooNewError(int found, int known)
    : SqlError(fmt::format(
          "the database's schema is version {}, but this falcon knows versions up to {}: a newer "
          "falcon has migrated it; use that falcon (or a newer one), or another database",
          found, known)),
      found_(found) {}

const std::vector<Migration>& migrations() {
  static const std::vector<Migration> all{
      {1,
       "initial: submissions, selections, probes, events, exports, recoveries, breakers, "
       "leases",
       kSchemaV1},
      {2, "self-healing: managed workloads, recovery destinations and causes, lease heartbeats",
       kSchemaV2},
      {3,
       "repeated decisions share their explanation (selections.same_as); submissions name "
       "their decision (submissions.selection_id)",
       kSchemaV3},
      {4,
       "explanations stored packed; decided_at, policy and reason columns for lists of "
       "decisions",
       kSchemaV4},
      {5, "managed workloads are updated by compare-and-set on a version column", kSchemaV5},
      {6,
       "deletes of workloads are recorded before xpk runs, then their outcome; a managed "
       "workload's recovery phase is a column",
       kSchemaV6},
      {7, "the dispatcher's nominations of worker clusters, recorded before the manager is patched",
       kSchemaV7},
  };
  static_assert(kStateSchemaVersion == 7, "add the migration for the new schema version");
  return all;
}

std::string render_migration(const std::string& sql, const SqlDialect& dialect) {
  std::string out = sql;
  replace_all(out, "{id}", dialect.id_column);
  replace_all(out, "{int}", dialect.int_type);
  replace_all(out, "{detail_phase}",
              fmt::format(fmt::runtime(dialect.json_member), "detail_json", "phase"));
  return out;
}

int recorded_schema_version(SqlConnection& conn) {
  const SqlRows rows = conn.query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations", {});
  return rows.empty() ? 0 : static_cast<int>(rows.front().int64(0));
}

int apply_migrations(SqlConnection& conn, const SqlDialect& dialect, std::int64_t now_ms) {
  const int known = migrations().back().version;
  // Most opens find the schema current: a plain read then, without the write lock (another
  // process may be holding it for a long write).
  try {
    const int found = recorded_schema_version(conn);
    if (found > known) throw SchemaTooNewError(found, known);
    if (found == known) return known;
  } catch (const SchemaTooNewError&) {
    throw;
  } catch (const SqlError&) {
    // No version table yet (or the read failed): the locked path below finds out.
  }
  SqlTransaction tx(conn, dialect.begin_write);
  if (!dialect.migration_lock.empty()) conn.query(dialect.migration_lock, {});
  conn.execute(render_migration(kVersionTable, dialect));
  const int found = recorded_schema_version(conn);
  if (found > known) throw SchemaTooNewError(found, known);
  for (const Migration& m : migrations()) {
    if (m.version <= found) continue;
    try {
      conn.execute(render_migration(m.sql, dialect));
    } catch (const SqlError& e) {
      throw SqlError(fmt::format("migration {} ({}): {}", m.version, m.name, e.what()),
                     e.retryable());
    }
    conn.query("INSERT INTO schema_migrations (version, name, applied_at_ms) VALUES ($1, $2, $3)",
               {std::int64_t{m.version}, m.name, now_ms});
  }
  tx.commit();
  return std::max(found, known);
}

}  // namespace falcon::state
