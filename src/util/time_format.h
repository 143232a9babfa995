// ISO 8601 / RFC 3339 timestamps, as the layer prints and reads them.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace falcon {

// `2026-04-13T08:00:00.123Z`: UTC, milliseconds, `Z`.
std::string format_iso8601(std::chrono::system_clock::time_point t);

// Parses RFC 3339: `2026-04-13T08:00:00Z`, fractional seconds of any length (kept to the
// nanosecond), `Z` or a `+hh:mm` / `-hh:mm` offset, and a bare date `2026-04-13` (midnight UTC).
// nullopt when the text is not such a timestamp, or names an instant int64 nanoseconds since the
// epoch cannot hold (before 1677-09-21T00:12:43.145224192Z or after
// 2262-04-11T23:47:16.854775807Z).
std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view text);

// Same as parse_rfc3339 but in nanoseconds since the epoch, for exact ordering of log entries.
std::optional<std::int64_t> parse_rfc3339_nanos(std::string_view text);

// Whether `text` has the form parse_rfc3339 reads, whatever the instant: true for
// `9999-12-31T23:59:59Z`, which it cannot hold. Tells "out of range" from "not a time".
bool is_rfc3339_form(std::string_view text);

// Nanoseconds since the epoch as RFC 3339 with 9 fractional digits: `...T08:00:00.000000123Z`.
std::string format_rfc3339_nanos(std::int64_t nanos);

}  // namespace falcon
