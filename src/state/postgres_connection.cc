#include "state/postgres_connection.h"

#include <libpq-fe.h>

#include <memory>

#include <fmt/format.h>

namespace falcon::state {
namespace {

// Type OIDs of PostgreSQL's catalog (pg_type.h is a server header; these never change).
constexpr Oid kInt8Oid = 20;
constexpr Oid kTextOid = 25;

using ResultPtr = std::unique_ptr<PGresult, decltype(&PQclear)>;

std::string trimmed(const char* text) {
  std::string s = text ? text : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Serialization failures and deadlocks roll the transaction back and ask the client to retry.
bool retryable_state(const char* sqlstate) {
  if (sqlstate == nullptr) return false;
  const std::string s = sqlstate;
  return s == "40001" || s == "40P01";
}

void ignore_notice(void* /*arg*/, const char* /*message*/) {}

}  // namespace

PostgresConnection::PostgresConnection(const std::string& url,
                                       std::chrono::milliseconds connect_timeout) {
  const auto seconds = std::max<long long>(1, (connect_timeout.count() + 999) / 1000);
  const std::string timeout = std::to_string(seconds);
  // Our defaults come first: a later keyword (the URL's own, expanded from dbname) wins.
  const char* keys[] = {"connect_timeout", "application_name", "dbname", nullptr};
  const char* values[] = {timeout.c_str(), "falcon", url.c_str(), nullptr};
  conn_ = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (conn_ == nullptr) throw SqlError("cannot connect: out of memory");
  if (PQstatus(conn_) != CONNECTION_OK) {
    const std::string message = trimmed(PQerrorMessage(conn_));
    PQfinish(conn_);
    conn_ = nullptr;
    throw SqlError("cannot connect: " + message);
  }
  // NOTICEs (CREATE ... IF NOT EXISTS of an existing table) would go to stderr.
  PQsetNoticeProcessor(conn_, ignore_notice, nullptr);
}

PostgresConnection::~PostgresConnection() {
  if (conn_) PQfinish(conn_);
}

bool PostgresConnection::broken() const { return PQstatus(conn_) != CONNECTION_OK; }

SqlRows PostgresConnection::query(const std::string& sql, const std::vector<SqlValue>& params) {
  std::vector<Oid> types;
  std::vector<std::string> texts;
  std::vector<const char*> values;
  types.reserve(params.size());
  texts.reserve(params.size());
  std::string key = sql;
  key.push_back('\0');
  for (const auto& p : params) {
    if (const auto* v = std::get_if<std::int64_t>(&p)) {
      types.push_back(kInt8Oid);
      texts.push_back(std::to_string(*v));
      key.push_back('i');
    } else if (const auto* t = std::get_if<std::string>(&p)) {
      types.push_back(kTextOid);
      texts.push_back(*t);
      key.push_back('t');
    } else {
      types.push_back(0);  // NULL: the server infers the type from where it is used
      texts.emplace_back();
      key.push_back('n');
    }
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    values.push_back(std::holds_alternative<std::nullptr_t>(params[i]) ? nullptr
                                                                       : texts[i].c_str());
  }

  auto it = statements_.find(key);
  if (it == statements_.end()) {
    const std::string name = fmt::format("falcon_{}", statements_.size() + 1);
    ResultPtr prepared(
        PQprepare(conn_, name.c_str(), sql.c_str(), static_cast<int>(types.size()), types.data()),
        &PQclear);
    if (!prepared || PQresultStatus(prepared.get()) != PGRES_COMMAND_OK) {
      const char* state = prepared ? PQresultErrorField(prepared.get(), PG_DIAG_SQLSTATE) : nullptr;
      throw SqlError(fmt::format("preparing `{}`: {}", sql, trimmed(PQerrorMessage(conn_))),
                     retryable_state(state));
    }
    it = statements_.emplace(std::move(key), name).first;
  }

  ResultPtr result(PQexecPrepared(conn_, it->second.c_str(), static_cast<int>(values.size()),
                                  values.data(), nullptr, nullptr, /*resultFormat=*/0),
                   &PQclear);
  const ExecStatusType status = result ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
    const char* state = result ? PQresultErrorField(result.get(), PG_DIAG_SQLSTATE) : nullptr;
    throw SqlError(trimmed(result ? PQresultErrorMessage(result.get()) : PQerrorMessage(conn_)),
                   retryable_state(state));
  }
  SqlRows rows;
  const int n = PQntuples(result.get());
  const int columns = PQnfields(result.get());
  rows.reserve(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    std::vector<std::optional<std::string>> cells;
    cells.reserve(static_cast<std::size_t>(columns));
    for (int c = 0; c < columns; ++c) {
      if (PQgetisnull(result.get(), r, c)) {
        cells.emplace_back(std::nullopt);
      } else {
        cells.emplace_back(std::string(PQgetvalue(result.get(), r, c),
                                       static_cast<std::size_t>(PQgetlength(result.get(), r, c))));
      }
    }
    rows.emplace_back(std::move(cells));
  }
  return rows;
}

void PostgresConnection::execute(const std::string& sql) {
  ResultPtr result(PQexec(conn_, sql.c_str()), &PQclear);
  const ExecStatusType status = result ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    const char* state = result ? PQresultErrorField(result.get(), PG_DIAG_SQLSTATE) : nullptr;
    throw SqlError(trimmed(result ? PQresultErrorMessage(result.get()) : PQerrorMessage(conn_)),
                   retryable_state(state));
  }
}

}  // namespace falcon::state
