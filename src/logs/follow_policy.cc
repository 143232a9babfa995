// The library side of `falcon job logs --follow` and `--since`: the stop rule and the age
// parser, so that the CLI needs nothing from src/ and a test can drive both on a fake clock.
#include <chrono>
#include <cstdint>
#include <limits>
#include <mutex>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "falcon/log_retriever.h"
#include "util/time_format.h"

namespace falcon {

std::function<bool()> follow_until_finished(std::shared_ptr<Clock> clock,
                                            std::function<bool()> is_finished,
                                            std::function<bool()> interrupted,
                                            std::chrono::milliseconds linger,
                                            std::chrono::milliseconds check_every) {
  if (!clock || !is_finished) {
    throw std::invalid_argument("follow_until_finished needs a clock and a finished check");
  }
  struct State {
    std::mutex mutex;
    std::optional<std::chrono::steady_clock::time_point> last_check;
    std::optional<std::chrono::steady_clock::time_point> finished_at;
  };
  auto state = std::make_shared<State>();
  return [=]() {
    if (interrupted && interrupted()) return true;
    std::lock_guard lock(state->mutex);
    const auto now = clock->steady_now();
    if (state->finished_at) return now - *state->finished_at >= linger;
    if (!state->last_check || now - *state->last_check >= check_every) {
      state->last_check = now;
      if (is_finished()) state->finished_at = now;
    }
    return false;
  };
}

std::chrono::milliseconds follow_linger(const FollowOptions& options) {
  return options.poll_interval + std::chrono::seconds(5);
}

std::string resolve_since(const std::string& text, std::chrono::system_clock::time_point now) {
  if (parse_rfc3339_nanos(text)) return text;
  const auto fail = [&]() -> std::invalid_argument {
    return std::invalid_argument(fmt::format(
        "'{}' is neither an RFC 3339 time (2026-04-13T08:00:00Z) nor an age like 30m, 6h, 2d",
        text.size() > 64 ? text.substr(0, 64) + "..." : text));
  };
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits + 1 != text.size()) throw fail();
  std::int64_t unit = 0;
  switch (text.back()) {
    case 's':
      unit = 1;
      break;
    case 'm':
      unit = 60;
      break;
    case 'h':
      unit = 3600;
      break;
    case 'd':
      unit = 86400;
      break;
    default:
      throw fail();
  }
  const std::int64_t since_epoch =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  // No log is older than 1970; checking the digits first keeps the product from overflowing.
  std::int64_t amount = 0;
  for (std::size_t i = 0; i < digits; ++i) {
    amount = amount * 10 + (text[i] - '0');
    if (amount > since_epoch / unit) {
      throw std::invalid_argument(fmt::format(
          "the age '{}' reaches back before 1970; give a smaller age or an RFC 3339 time",
          text.size() > 64 ? text.substr(0, 64) + "..." : text));
    }
  }
  return format_iso8601(now - std::chrono::seconds(amount * unit));
}

}  // namespace falcon
