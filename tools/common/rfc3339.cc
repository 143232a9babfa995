#include "common/rfc3339.h"

#include <algorithm>
#include <cstdio>

namespace falcon::tools {
namespace {

constexpr std::int64_t kNanosPerSecond = 1'000'000'000;
constexpr std::int64_t kSecondsPerDay = 86'400;

// Exactly `count` decimal digits at `pos`, as a number.
std::optional<int> read_digits(std::string_view s, std::size_t pos, std::size_t count) {
  if (pos > s.size() || s.size() - pos < count) return std::nullopt;
  int value = 0;
  for (std::size_t i = pos; i < pos + count; ++i) {
    if (s[i] < '0' || s[i] > '9') return std::nullopt;
    value = value * 10 + (s[i] - '0');
  }
  return value;
}

bool is_at(std::string_view s, std::size_t pos, char c) { return pos < s.size() && s[pos] == c; }

// seconds * 10^9 + nanos (0 <= nanos < 10^9), or nullopt when that leaves int64.
std::optional<std::int64_t> combine(std::int64_t seconds, std::int64_t nanos) {
  if (seconds < 0 && nanos > 0) {  // the earliest instants: -9223372037 s + 0.145224192 s
    seconds += 1;
    nanos -= kNanosPerSecond;
  }
  std::int64_t scaled = 0;
  std::int64_t total = 0;
  if (__builtin_mul_overflow(seconds, kNanosPerSecond, &scaled) ||
      __builtin_add_overflow(scaled, nanos, &total)) {
    return std::nullopt;
  }
  return total;
}

}  // namespace

std::optional<std::int64_t> parse_rfc3339_nanos(std::string_view text) {
  using namespace std::chrono;
  // YYYY-MM-DD
  const auto y = read_digits(text, 0, 4);
  const auto mo = read_digits(text, 5, 2);
  const auto d = read_digits(text, 8, 2);
  if (!y || !mo || !d || !is_at(text, 4, '-') || !is_at(text, 7, '-')) return std::nullopt;
  const year_month_day date{year{*y}, month{static_cast<unsigned>(*mo)},
                            day{static_cast<unsigned>(*d)}};
  if (!date.ok()) return std::nullopt;
  const std::int64_t day_seconds = sys_days(date).time_since_epoch().count() * kSecondsPerDay;
  if (text.size() == 10) return combine(day_seconds, 0);

  // THH:MM:SS
  if (!is_at(text, 10, 'T') && !is_at(text, 10, 't')) return std::nullopt;
  const auto h = read_digits(text, 11, 2);
  const auto mi = read_digits(text, 14, 2);
  const auto s = read_digits(text, 17, 2);
  if (!h || !mi || !s || !is_at(text, 13, ':') || !is_at(text, 16, ':')) return std::nullopt;
  if (*h > 23 || *mi > 59 || *s > 59) return std::nullopt;

  // [.F]: the first nine digits are nanoseconds; more are below what an instant holds.
  std::size_t pos = 19;
  std::int64_t fraction = 0;
  if (is_at(text, pos, '.')) {
    ++pos;
    int kept = 0;
    const std::size_t first = pos;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      if (kept < 9) {
        fraction = fraction * 10 + (text[pos] - '0');
        ++kept;
      }
      ++pos;
    }
    if (pos == first) return std::nullopt;
    for (; kept < 9; ++kept) fraction *= 10;
  }

  // Z | +hh:mm | -hh:mm
  std::int64_t offset_seconds = 0;
  if (is_at(text, pos, 'Z') || is_at(text, pos, 'z')) {
    ++pos;
  } else if (is_at(text, pos, '+') || is_at(text, pos, '-')) {
    const int sign = text[pos] == '-' ? -1 : 1;
    const auto oh = read_digits(text, pos + 1, 2);
    const auto om = read_digits(text, pos + 4, 2);
    if (!oh || !om || !is_at(text, pos + 3, ':') || *oh > 23 || *om > 59) return std::nullopt;
    offset_seconds = sign * (*oh * 3600 + *om * 60);
    pos += 6;
  } else {
    return std::nullopt;
  }
  if (pos != text.size()) return std::nullopt;

  // Local time minus its offset is UTC.
  const std::int64_t seconds = day_seconds + *h * 3600 + *mi * 60 + *s - offset_seconds;
  return combine(seconds, fraction);
}

std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view text) {
  const auto nanos = parse_rfc3339_nanos(text);
  if (!nanos) return std::nullopt;
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::nanoseconds(*nanos)));
}

std::string format_rfc3339(std::int64_t nanos, int fraction_digits) {
  using namespace std::chrono;
  fraction_digits = std::clamp(fraction_digits, 0, 9);
  // Floor division, so that instants before 1970 print the second they fall in.
  std::int64_t seconds = nanos / kNanosPerSecond;
  std::int64_t sub = nanos % kNanosPerSecond;
  if (sub < 0) {
    sub += kNanosPerSecond;
    --seconds;
  }
  std::int64_t days_since_epoch = seconds / kSecondsPerDay;
  std::int64_t second_of_day = seconds % kSecondsPerDay;
  if (second_of_day < 0) {
    second_of_day += kSecondsPerDay;
    --days_since_epoch;
  }
  const year_month_day date{sys_days{days{days_since_epoch}}};
  char out[48];
  int n = std::snprintf(
      out, sizeof out, "%04d-%02u-%02uT%02d:%02d:%02d", int(date.year()), unsigned(date.month()),
      unsigned(date.day()), static_cast<int>(second_of_day / 3600),
      static_cast<int>(second_of_day / 60 % 60), static_cast<int>(second_of_day % 60));
  if (fraction_digits > 0) {
    char nine[16];
    std::snprintf(nine, sizeof nine, "%09lld", static_cast<long long>(sub));
    n += std::snprintf(out + n, sizeof out - n, ".%.*s", fraction_digits, nine);
  }
  std::snprintf(out + n, sizeof out - n, "Z");
  return out;
}

std::string format_rfc3339_nanos(std::int64_t nanos) { return format_rfc3339(nanos, 9); }

std::int64_t to_nanos(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace falcon::tools
