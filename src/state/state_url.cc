#include "state/state_url.h"

#include <filesystem>

#include <fmt/format.h>

#include "falcon/errors.h"
#include "falcon/state_store.h"

namespace falcon::state {
namespace {

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

[[noreturn]] void bad_url(const std::string& url, const std::string& problem) {
  throw StateStoreError("", redact_state_url(url), "open",
                        fmt::format("{} (use sqlite:///absolute/path/falcon.db, a plain file path, "
                                    "or postgresql://user@host:port/database)",
                                    problem));
}

}  // namespace

StateUrl parse_state_url(const std::string& url) {
  if (url.empty()) bad_url(url, "the state URL is empty");
  if (starts_with(url, "postgresql://") || starts_with(url, "postgres://")) {
    return StateUrl{.backend = StateUrl::Backend::kPostgres, .postgres_uri = url};
  }
  if (starts_with(url, "sqlite:")) {
    std::string rest = url.substr(std::string("sqlite:").size());
    if (starts_with(rest, "//")) {
      rest = rest.substr(2);  // the authority, which must be empty: sqlite:///abs/path
      if (!starts_with(rest, "/")) {
        bad_url(url,
                "an SQLite URL has no host: write sqlite:///absolute/path (three slashes) "
                "or sqlite:relative/path");
      }
    }
    if (rest.empty()) bad_url(url, "the SQLite URL names no file");
    return StateUrl{.backend = StateUrl::Backend::kSqlite, .sqlite_path = rest};
  }
  if (const auto scheme_end = url.find("://"); scheme_end != std::string::npos) {
    bad_url(url, fmt::format("unknown state store scheme '{}'", url.substr(0, scheme_end)));
  }
  return StateUrl{.backend = StateUrl::Backend::kSqlite, .sqlite_path = url};
}

}  // namespace falcon::state

namespace falcon {

std::string default_state_url(const std::filesystem::path& state_dir) {
  return "sqlite://" +
         std::filesystem::absolute(state_dir / "falcon.db").lexically_normal().string();
}

std::string redact_state_url(const std::string& url) {
  std::string out = url;
  // scheme://user:password@host -> scheme://user:***@host
  if (const auto scheme_end = out.find("://"); scheme_end != std::string::npos) {
    const auto authority = scheme_end + 3;
    const auto authority_end = out.find_first_of("/?#", authority);
    const auto at =
        out.rfind('@', authority_end == std::string::npos ? std::string::npos : authority_end);
    if (at != std::string::npos && at >= authority) {
      const auto colon = out.find(':', authority);
      if (colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
    }
  }
  // ...?password=secret&... (libpq accepts the password as a parameter too)
  for (auto pos = out.find("password="); pos != std::string::npos;
       pos = out.find("password=", pos + 1)) {
    const auto value = pos + std::string("password=").size();
    const auto end = out.find_first_of("& ", value);
    out.replace(value, (end == std::string::npos ? out.size() : end) - value, "***");
  }
  return out;
}

}  // namespace falcon
