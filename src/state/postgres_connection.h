// SqlConnection over libpq: one session with a PostgreSQL server, statements prepared once per
// connection and run with typed text parameters.
#pragma once

#include <chrono>
#include <string>
#include <unordered_map>

#include "state/sql_connection.h"

struct pg_conn;

namespace falcon::state {

class PostgresConnection final : public SqlConnection {
 public:
  // Connects to `url` (a libpq URI: postgresql://user[:password]@host[:port]/db?options).
  // Throws SqlError with libpq's message.
  PostgresConnection(const std::string& url, std::chrono::milliseconds connect_timeout);
  ~PostgresConnection() override;
  PostgresConnection(const PostgresConnection&) = delete;
  PostgresConnection& operator=(const PostgresConnection&) = delete;

  SqlRows query(const std::string& sql, const std::vector<SqlValue>& params) override;
  void execute(const std::string& sql) override;
  bool broken() const override;

 private:
  pg_conn* conn_ = nullptr;
  // (sql, parameter types) -> prepared statement name
  std::unordered_map<std::string, std::string> statements_;
};

}  // namespace falcon::state
