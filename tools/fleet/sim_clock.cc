#include "fleet/sim_clock.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace falcon::fleet {

SimClock::SimClock(std::shared_ptr<const Clock> real, double scale)
    : real_(std::move(real)), scale_(scale) {
  if (!real_) throw std::invalid_argument("SimClock needs a real clock");
  if (!(scale >= 0)) throw std::invalid_argument("SimClock scale must be >= 0");
  start_wall_ns_ = wall_ns();
  last_ns_ = start_wall_ns_;
}

std::int64_t SimClock::wall_ns() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(real_->now().time_since_epoch())
      .count();
}

std::int64_t SimClock::now_ns() const {
  const std::int64_t wall = manual() ? 0 : wall_ns();
  std::lock_guard lock(mu_);
  // A wall clock stepped back (NTP) holds the fleet's time still until it catches up.
  last_ns_ = std::max(last_ns_, manual() ? start_wall_ns_ + offset_ns_ : wall);
  return last_ns_;
}

std::int64_t SimClock::span_ns(std::int64_t simulated_ns) const {
  if (manual()) return simulated_ns;
  return static_cast<std::int64_t>(std::llround(static_cast<double>(simulated_ns) / scale_));
}

void SimClock::advance(std::chrono::nanoseconds d) {
  if (!manual()) {
    throw std::logic_error(fmt::format(
        "the fleet's clock follows the wall clock at time_scale {}; only a manual clock "
        "(time_scale 0) can be advanced",
        scale_));
  }
  if (d.count() <= 0) return;
  std::lock_guard lock(mu_);
  offset_ns_ += d.count();
}

}  // namespace falcon::fleet
