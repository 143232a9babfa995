// open_state_store: the URL picks the backend.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "falcon/errors.h"
#include "falcon/state_store.h"
#include "state/postgres_connection.h"
#include "state/sql_state_store.h"
#include "state/sqlite_connection.h"
#include "state/state_url.h"

namespace falcon {
namespace {

// The file and its directory exist with private modes before SQLite opens it: SQLite would
// create the file with 0644, and its -wal and -shm files copy the main file's mode.
void prepare_sqlite_file(const std::filesystem::path& path, const std::string& location) {
  auto fail = [&](const std::string& message) {
    throw StateStoreError("sqlite", location, "open", message);
  };
  const auto dir = path.parent_path();
  if (!dir.empty()) {
    std::error_code ec;
    if (!std::filesystem::exists(dir, ec)) {
      std::filesystem::create_directories(dir, ec);
      if (ec) fail(fmt::format("cannot create directory '{}': {}", dir.string(), ec.message()));
      std::filesystem::permissions(dir, std::filesystem::perms::owner_all, ec);
    }
  }
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) fail(fmt::format("cannot open '{}': {}", path.string(), std::strerror(errno)));
  ::close(fd);
}

}  // namespace

std::unique_ptr<StateStore> open_state_store(const std::string& url,
                                             const StateStoreOptions& options) {
  const state::StateUrl parsed = state::parse_state_url(url);
  const std::string location = redact_state_url(url);
  const auto timeout = options.busy_timeout;
  if (parsed.backend == state::StateUrl::Backend::kPostgres) {
    const std::string uri = parsed.postgres_uri;
    return std::make_unique<state::SqlStateStore>(
        state::postgres_dialect(), location,
        [uri, timeout] { return std::make_unique<state::PostgresConnection>(uri, timeout); },
        options);
  }
  const std::string path = parsed.sqlite_path;
  prepare_sqlite_file(path, location);
  return std::make_unique<state::SqlStateStore>(
      state::sqlite_dialect(), location,
      [path, timeout] { return std::make_unique<state::SqliteConnection>(path, timeout); },
      options);
}

}  // namespace falcon
