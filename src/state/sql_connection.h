// The small SQL seam under the state store: one connection, statements with $1..$N parameters,
// rows of text cells. SQLite and PostgreSQL implement it; the store's logic is written once
// over it, in SQL both databases accept.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace falcon::state {

// A parameter: NULL, an integer or text.
using SqlValue = std::variant<std::nullptr_t, std::int64_t, std::string>;

// A failed statement: the database's message. `retryable` marks failures where the whole
// transaction may simply be run again (PostgreSQL serialization failure or deadlock).
class SqlError : public std::runtime_error {
 public:
  SqlError(const std::string& message, bool retryable = false)
      : std::runtime_error(message), retryable_(retryable) {}
  bool retryable() const { return retryable_; }

 private:
  bool retryable_;
};

// One result row; cells are text (integers in decimal) or NULL.
class SqlRow {
 public:
  explicit SqlRow(std::vector<std::optional<std::string>> cells) : cells_(std::move(cells)) {}
  std::size_t size() const { return cells_.size(); }
  bool is_null(std::size_t i) const { return !cells_.at(i).has_value(); }
  // Throw SqlError for NULL (and, for integers, for text that is not an integer).
  const std::string& text(std::size_t i) const;
  std::int64_t int64(std::size_t i) const;
  std::optional<std::string> opt_text(std::size_t i) const { return cells_.at(i); }
  std::optional<std::int64_t> opt_int64(std::size_t i) const;

 private:
  std::vector<std::optional<std::string>> cells_;
};

using SqlRows = std::vector<SqlRow>;

// Not thread-safe: one thread uses a connection at a time (the pool sees to it).
class SqlConnection {
 public:
  virtual ~SqlConnection() = default;
  // Runs one statement; `params[i]` binds $<i+1>, and every parameter must be used. Returns the
  // rows it produced (none for most writes without RETURNING). Throws SqlError.
  virtual SqlRows query(const std::string& sql, const std::vector<SqlValue>& params = {}) = 0;
  // Runs SQL text without parameters, possibly several statements. Throws SqlError.
  virtual void execute(const std::string& sql) = 0;
  // True once the connection is unusable (PostgreSQL connection lost); the pool drops it.
  virtual bool broken() const = 0;
};

// The differences between the two databases that the store's SQL has to know.
struct SqlDialect {
  std::string backend;          // "sqlite" | "postgresql"
  std::string begin_write;      // starts a transaction that will write
  std::string id_column;        // an auto-assigned 64-bit primary key
  std::string int_type;         // a 64-bit integer column
  std::string substring_index;  // f(haystack, needle) > 0 when needle occurs in haystack
  // fmt pattern: {0} an expression holding a JSON object's text, {1} a key; the text of that
  // top-level member (NULL when it is missing).
  std::string json_member;
  std::string migration_lock;  // run first inside the migration transaction ("" for none)
  // A commit that does not wait for the disk (StateStore::Sync::kNoWait): `no_wait_before` runs
  // before BEGIN and `no_wait_after` after the transaction (whatever its outcome), on the same
  // connection; `no_wait_in` first inside it. "" for none.
  std::string no_wait_before;
  std::string no_wait_in;
  std::string no_wait_after;
};

const SqlDialect& sqlite_dialect();
const SqlDialect& postgres_dialect();

// A transaction on a connection, rolled back on destruction unless committed.
class SqlTransaction {
 public:
  SqlTransaction(SqlConnection& conn, const std::string& begin);
  ~SqlTransaction();
  SqlTransaction(const SqlTransaction&) = delete;
  SqlTransaction& operator=(const SqlTransaction&) = delete;
  void commit();

 private:
  SqlConnection& conn_;
  bool open_ = true;
};

}  // namespace falcon::state
