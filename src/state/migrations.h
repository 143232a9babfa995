// The schema, as numbered migrations, and the code that brings a database up to date.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "state/sql_connection.h"

namespace falcon::state {

struct Migration {
  int version;
  std::string name;
  // DDL with placeholders the dialect fills: {id} an auto-assigned 64-bit key, {int} a 64-bit
  // integer column.
  std::string sql;
};

// Every migration this binary knows, in order; the last one's version is kStateSchemaVersion.
const std::vector<Migration>& migrations();

// `sql` with the dialect's placeholders filled in.
std::string render_migration(const std::string& sql, const SqlDialect& dialect);

// The schema version recorded in the database (0 when it has none). Throws SqlError.
int recorded_schema_version(SqlConnection& conn);

// Reads the recorded version; when it is older than the newest known one, then, in one
// transaction holding the dialect's migration lock: creates the version table when missing,
// reads the version again and applies every later migration, each recorded with `now_ms`.
// Returns the version the database is at afterwards. Throws SchemaTooNewError (nothing changed)
// when the database is at a version above the newest known one, SqlError otherwise.
int apply_migrations(SqlConnection& conn, const SqlDialect& dialect, std::int64_t now_ms);

class SchemaTooNewError : public SqlError {
 public:
  SchemaTooNewError(int found, int known);
  int found() const { return found_; }

 private:
  int found_;
};

}  // namespace falcon::state
