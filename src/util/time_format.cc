#include "util/time_format.h"

#include <cstdint>
#include <cstdio>

namespace falcon {
namespace {

// Days since 1970-01-01 for a proleptic Gregorian date (Howard Hinnant's algorithm).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

struct Civil {
  std::int64_t y;
  unsigned m, d;
};

Civil civil_from_days(std::int64_t z) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const std::int64_t y = static_cast<std::int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  return {y + (m <= 2), m, d};
}

bool read_digits(std::string_view s, std::size_t pos, std::size_t n, int& out) {
  if (pos + n > s.size()) return false;
  int v = 0;
  for (std::size_t i = 0; i < n; ++i) {
    char c = s[pos + i];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  out = v;
  return true;
}

// seconds + nanos / 1e9 as int64 nanoseconds since the epoch (0 <= nanos < 1e9), or nullopt
// when that instant is outside what int64 nanoseconds hold: before
// 1677-09-21T00:12:43.145224192Z or after 2262-04-11T23:47:16.854775807Z.
std::optional<std::int64_t> to_nanos(std::int64_t seconds, std::int64_t nanos) {
  if (seconds < 0 && nanos > 0) {  // so that the product, not only the sum, stays in range
    seconds += 1;
    nanos -= 1'000'000'000;
  }
  std::int64_t out;
  if (__builtin_mul_overflow(seconds, std::int64_t{1'000'000'000}, &out) ||
      __builtin_add_overflow(out, nanos, &out)) {
    return std::nullopt;
  }
  return out;
}

std::string format_with_fraction(std::int64_t nanos, int digits) {
  constexpr std::int64_t kNanosPerDay = 86'400'000'000'000;
  std::int64_t days = nanos / kNanosPerDay;
  std::int64_t rem = nanos % kNanosPerDay;
  if (rem < 0) {
    rem += kNanosPerDay;
    --days;
  }
  const Civil c = civil_from_days(days);
  const std::int64_t secs = rem / 1'000'000'000;
  std::int64_t frac = rem % 1'000'000'000;
  for (int i = digits; i < 9; ++i) frac /= 10;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04lld-%02u-%02uT%02lld:%02lld:%02lld.%0*lldZ",
                static_cast<long long>(c.y), c.m, c.d, static_cast<long long>(secs / 3600),
                static_cast<long long>(secs / 60 % 60), static_cast<long long>(secs % 60), digits,
                static_cast<long long>(frac));
  return buf;
}

// An RFC 3339 timestamp as whole seconds since the epoch and nanoseconds (0 <= nanos < 1e9),
// checked for form only: four-digit years cannot overflow the seconds.
struct Instant {
  std::int64_t seconds = 0;
  std::int64_t nanos = 0;
};

std::optional<Instant> parse_instant(std::string_view s) {
  int year, month, day;
  if (!read_digits(s, 0, 4, year) || s.size() < 10 || s[4] != '-' || s[7] != '-' ||
      !read_digits(s, 5, 2, month) || !read_digits(s, 8, 2, day)) {
    return std::nullopt;
  }
  if (month < 1 || month > 12 || day < 1 || day > 31) return std::nullopt;
  const std::int64_t days =
      days_from_civil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  if (civil_from_days(days).d != static_cast<unsigned>(day)) return std::nullopt;  // Feb 30
  std::int64_t seconds = days * 86'400;
  if (s.size() == 10) return Instant{seconds, 0};

  int hh, mm, ss;
  if (s.size() < 20 || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
      !read_digits(s, 11, 2, hh) || s[13] != ':' || !read_digits(s, 14, 2, mm) || s[16] != ':' ||
      !read_digits(s, 17, 2, ss)) {
    return std::nullopt;
  }
  if (hh > 23 || mm > 59 || ss > 60) return std::nullopt;
  seconds += static_cast<std::int64_t>(hh) * 3600 + mm * 60 + ss;
  std::int64_t frac = 0;
  std::size_t pos = 19;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    int digits = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      if (digits < 9) {
        frac = frac * 10 + (s[pos] - '0');
        ++digits;
      }
      ++pos;
    }
    if (digits == 0) return std::nullopt;
    for (int i = digits; i < 9; ++i) frac *= 10;
  }
  if (pos >= s.size()) return std::nullopt;
  if (s[pos] == 'Z' || s[pos] == 'z') {
    if (pos + 1 != s.size()) return std::nullopt;
    return Instant{seconds, frac};
  }
  if (s[pos] != '+' && s[pos] != '-') return std::nullopt;
  int oh, om;
  if (pos + 6 != s.size() || !read_digits(s, pos + 1, 2, oh) || s[pos + 3] != ':' ||
      !read_digits(s, pos + 4, 2, om)) {
    return std::nullopt;
  }
  if (oh > 23 || om > 59) return std::nullopt;  // RFC 3339's time-numoffset
  const std::int64_t offset = static_cast<std::int64_t>(oh) * 3600 + om * 60;
  return Instant{s[pos] == '+' ? seconds - offset : seconds + offset, frac};
}

}  // namespace

std::string format_iso8601(std::chrono::system_clock::time_point t) {
  const auto nanos =
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  // format_with_fraction truncates toward the past to whole milliseconds (no multiplication
  // that could overflow at the ends of the range).
  return format_with_fraction(nanos, 3);
}

std::string format_rfc3339_nanos(std::int64_t nanos) { return format_with_fraction(nanos, 9); }

bool is_rfc3339_form(std::string_view text) { return parse_instant(text).has_value(); }

std::optional<std::int64_t> parse_rfc3339_nanos(std::string_view text) {
  const auto instant = parse_instant(text);
  if (!instant) return std::nullopt;
  return to_nanos(instant->seconds, instant->nanos);
}

std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view text) {
  auto nanos = parse_rfc3339_nanos(text);
  if (!nanos) return std::nullopt;
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::nanoseconds(*nanos)));
}

}  // namespace falcon
