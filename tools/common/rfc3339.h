// RFC 3339 timestamps as Google's APIs write them (`2026-04-13T08:00:00.123456789Z`), for the
// local fleet and the local Google-protocol server. The tools keep their own reading and writing
// of time so that a mistake in the layer's parser (src/util/) cannot hide behind the same mistake
// in the stand-ins it is tested against.
//
//   falcon::tools::parse_rfc3339_nanos("2026-04-13T10:00:00.5+02:00");  // 08:00:00.5 UTC, in ns
//   falcon::tools::format_rfc3339_nanos(0);                 // "1970-01-01T00:00:00.000000000Z"
//   falcon::tools::format_rfc3339(0, 3);                    // "1970-01-01T00:00:00.000Z"
//
// Instants are nanoseconds since the Unix epoch in an int64 (1677-09-21 .. 2262-04-11), the
// resolution of Google's Timestamp and of std::chrono::system_clock on this platform.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace falcon::tools {

// Reads `YYYY-MM-DDTHH:MM:SS[.F]Z` where F is one or more digits (the first nine count, the rest
// are dropped) and Z is `Z` or an offset `+hh:mm` / `-hh:mm` (hh up to 23). `T` and `Z` may be
// lower case (RFC 3339 section 5.6). A bare date `YYYY-MM-DD` is midnight UTC, as Cloud
// Logging's filters read one. nullopt for anything else: an impossible date (2026-02-29), an hour
// above 23, a minute or second above 59 (no leap second: Google's Timestamp has none), missing
// or extra characters, or an instant outside the int64 nanosecond range.
std::optional<std::int64_t> parse_rfc3339_nanos(std::string_view text);

// The same instant as a system_clock time point.
std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view text);

// `nanos` in UTC with `fraction_digits` (0..9, clamped) digits after the seconds, truncated
// towards the past, and `Z`: 0 gives `...T08:00:00Z`, 3 `...T08:00:00.123Z`.
std::string format_rfc3339(std::int64_t nanos, int fraction_digits);

// format_rfc3339(nanos, 9): `2026-04-13T08:00:00.000000123Z`, what Cloud Logging returns.
std::string format_rfc3339_nanos(std::int64_t nanos);

// Nanoseconds since the epoch of a system_clock time point.
std::int64_t to_nanos(std::chrono::system_clock::time_point t);

}  // namespace falcon::tools
