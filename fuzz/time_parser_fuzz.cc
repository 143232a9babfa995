// RFC 3339 timestamps from users (`--since`), xpk's tables and Google's responses: parsing
// never overflows, and whatever parses survives a round trip through the formatters.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "util/time_format.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto nanos = falcon::parse_rfc3339_nanos(text);
  const auto time = falcon::parse_rfc3339(text);
  if (nanos.has_value() != time.has_value()) __builtin_trap();
  if (!nanos) return 0;

  // Nanosecond text reads back as the same instant.
  const std::string exact = falcon::format_rfc3339_nanos(*nanos);
  if (falcon::parse_rfc3339_nanos(exact) != nanos) __builtin_trap();

  // Millisecond text reads back as the instant truncated toward the past, unless truncating
  // went below the first representable instant (1677-09-21T00:12:43.145224192Z).
  const std::string millis = falcon::format_iso8601(*time);
  const auto back = falcon::parse_rfc3339(millis);
  if (!back) {
    if (*nanos >= -9'223'372'036'854'000'000) __builtin_trap();
    return 0;
  }
  if (*back > *time || *time - *back >= std::chrono::milliseconds(1)) __builtin_trap();
  return 0;
}
