// What a state-store URL names: an SQLite file or a PostgreSQL connection URI.
#pragma once

#include <string>

namespace falcon::state {

struct StateUrl {
  enum class Backend { kSqlite, kPostgres };
  Backend backend = Backend::kSqlite;
  std::string sqlite_path;   // kSqlite: the database file, as given (relative or absolute)
  std::string postgres_uri;  // kPostgres: the URL, handed to libpq unchanged
};

// Accepts sqlite:///absolute/path, sqlite:relative/path, a plain path (no `scheme://`),
// postgresql://... and postgres://... . Throws StateStoreError (operation "open") naming the
// URL without its password for anything else: an empty URL, another scheme, sqlite://host/...,
// an SQLite URL with no path.
StateUrl parse_state_url(const std::string& url);

}  // namespace falcon::state
