#include "state/sqlite_connection.h"

#include <sqlite3.h>

#include <algorithm>
#include <climits>
#include <thread>

#include <fmt/format.h>

namespace falcon::state {
namespace {

// Resets a statement when a query leaves, however it leaves, so its read lock is released.
class StatementReset {
 public:
  explicit StatementReset(sqlite3_stmt* stmt) : stmt_(stmt) {}
  ~StatementReset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  StatementReset(const StatementReset&) = delete;
  StatementReset& operator=(const StatementReset&) = delete;

 private:
  sqlite3_stmt* stmt_;
};

}  // namespace

SqliteConnection::SqliteConnection(const std::string& path,
                                   std::chrono::milliseconds busy_timeout) {
  const int flags =
      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE;
  const int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    const std::string message = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw SqlError(fmt::format("cannot open '{}': {}", path, message));
  }
  try {
    const auto ms = busy_timeout.count();
    sqlite3_busy_timeout(db_, ms > INT_MAX ? INT_MAX : static_cast<int>(ms));
    // WAL: readers never block the writer and the writer never blocks readers. The mode is
    // stored in the file, so later opens find it already set. Switching needs the database to
    // itself, and SQLite answers SQLITE_BUSY for that without calling the busy handler: while
    // other openers of a fresh file hold it (creating it, migrating), try again until the busy
    // timeout.
    SqlRows mode = query("PRAGMA journal_mode", {});
    const auto give_up = std::chrono::steady_clock::now() + busy_timeout;
    for (auto pause = std::chrono::milliseconds(1);
         mode.empty() || mode.front().opt_text(0) != std::optional<std::string>("wal");
         pause = std::min(pause * 2, std::chrono::milliseconds(50))) {
      try {
        mode = query("PRAGMA journal_mode=WAL", {});
        break;
      } catch (const SqlError&) {
        const int code = sqlite3_errcode(db_) & 0xff;
        if ((code != SQLITE_BUSY && code != SQLITE_LOCKED) ||
            std::chrono::steady_clock::now() >= give_up) {
          throw;
        }
      }
      std::this_thread::sleep_for(pause);
    }
    if (mode.empty() || mode.front().opt_text(0) != std::optional<std::string>("wal")) {
      throw SqlError(fmt::format("cannot switch '{}' to WAL mode (journal_mode is '{}')", path,
                                 mode.empty() ? "" : mode.front().opt_text(0).value_or("")));
    }
    // FULL: every commit syncs the WAL, so an acknowledged write survives power loss, not only
    // a crash of the process (NORMAL's guarantee). Writes are few (probes every few seconds,
    // decisions, submissions), so one fsync each is cheap.
    execute("PRAGMA synchronous=FULL");
  } catch (...) {
    for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
    sqlite3_close_v2(db_);
    throw;
  }
}

SqliteConnection::~SqliteConnection() {
  for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
  sqlite3_close_v2(db_);
}

void SqliteConnection::fail(int rc, const std::string& what) const {
  throw SqlError(fmt::format("{}: {} ({})", what, sqlite3_errmsg(db_), sqlite3_errstr(rc)));
}

sqlite3_stmt* SqliteConnection::prepare(const std::string& sql) {
  if (auto it = statements_.find(sql); it != statements_.end()) return it->second;
  sqlite3_stmt* stmt = nullptr;
  const int rc = sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size()),
                                    SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) fail(rc, "preparing `" + sql + "`");
  statements_.emplace(sql, stmt);
  return stmt;
}

SqlRows SqliteConnection::query(const std::string& sql, const std::vector<SqlValue>& params) {
  sqlite3_stmt* stmt = prepare(sql);
  StatementReset reset(stmt);
  if (sqlite3_bind_parameter_count(stmt) != static_cast<int>(params.size())) {
    throw SqlError(fmt::format("`{}` takes {} parameters, {} given", sql,
                               sqlite3_bind_parameter_count(stmt), params.size()));
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    const std::string name = fmt::format("${}", i + 1);
    const int index = sqlite3_bind_parameter_index(stmt, name.c_str());
    if (index == 0) throw SqlError(fmt::format("`{}` does not use parameter {}", sql, name));
    int rc = SQLITE_OK;
    if (const auto* v = std::get_if<std::int64_t>(&params[i])) {
      rc = sqlite3_bind_int64(stmt, index, *v);
    } else if (const auto* t = std::get_if<std::string>(&params[i])) {
      rc = sqlite3_bind_text(stmt, index, t->data(), static_cast<int>(t->size()), SQLITE_TRANSIENT);
    } else {
      rc = sqlite3_bind_null(stmt, index);
    }
    if (rc != SQLITE_OK) fail(rc, "binding " + name);
  }
  SqlRows rows;
  const int columns = sqlite3_column_count(stmt);
  for (;;) {
    const int rc = sqlite3_step(stmt);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) fail(rc, "running `" + sql + "`");
    std::vector<std::optional<std::string>> cells;
    cells.reserve(static_cast<std::size_t>(columns));
    for (int c = 0; c < columns; ++c) {
      if (sqlite3_column_type(stmt, c) == SQLITE_NULL) {
        cells.emplace_back(std::nullopt);
      } else {
        const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, c));
        cells.emplace_back(
            std::string(text, static_cast<std::size_t>(sqlite3_column_bytes(stmt, c))));
      }
    }
    rows.emplace_back(std::move(cells));
  }
  return rows;
}

void SqliteConnection::execute(const std::string& sql) {
  char* error = nullptr;
  const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
  if (rc != SQLITE_OK) {
    std::string message = error ? error : sqlite3_errstr(rc);
    sqlite3_free(error);
    throw SqlError(fmt::format("{} ({})", message, sqlite3_errstr(rc)));
  }
}

}  // namespace falcon::state
