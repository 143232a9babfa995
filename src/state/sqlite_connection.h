// SqlConnection over libsqlite3: one database file, WAL, synchronous=FULL, a busy timeout,
// prepared statements cached per connection.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>

#include "state/sql_connection.h"

struct sqlite3;
struct sqlite3_stmt;

namespace falcon::state {

class SqliteConnection final : public SqlConnection {
 public:
  // Opens (creating) `path`, switches it to WAL and sets synchronous=FULL and the busy timeout.
  // Throws SqlError.
  SqliteConnection(const std::string& path, std::chrono::milliseconds busy_timeout);
  ~SqliteConnection() override;
  SqliteConnection(const SqliteConnection&) = delete;
  SqliteConnection& operator=(const SqliteConnection&) = delete;

  SqlRows query(const std::string& sql, const std::vector<SqlValue>& params) override;
  void execute(const std::string& sql) override;
  bool broken() const override { return false; }

 private:
  sqlite3_stmt* prepare(const std::string& sql);
  [[noreturn]] void fail(int rc, const std::string& what) const;

  sqlite3* db_ = nullptr;
  std::unordered_map<std::string, sqlite3_stmt*> statements_;
};

}  // namespace falcon::state
