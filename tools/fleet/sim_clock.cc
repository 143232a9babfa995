#include "fleet/sim_clock.h"

#include <algorithm>
#include <stdexcept>

namespace falcon::fleet {

SimClock::SimClock(std::shared_ptr<const Clock> real, double scale)
    : real_(std::move(real)), scale_(scale) {
  if (!real_) throw std::invalid_argument("SimClock needs a real clock");
  if (!(scale >= 0)) throw std::invalid_argument("SimClock scale must be >= 0");
  start_wall_ns_ =
      std::chrono::duration_cast<std::chrono::nanoseconds>(real_->now().time_since_epoch()).count();
  start_steady_ = real_->steady_now();
  last_ns_ = start_wall_ns_;
}

std::int64_t SimClock::now_ns() const {
  std::int64_t scaled = 0;
  if (scale_ > 0) {
    const auto elapsed =
        std::chrono::duration_cast<std::chrono::nanoseconds>(real_->steady_now() - start_steady_)
            .count();
    scaled = static_cast<std::int64_t>(static_cast<double>(elapsed) * scale_);
  }
  std::lock_guard lock(mu_);
  last_ns_ = std::max(last_ns_, start_wall_ns_ + scaled + offset_ns_);
  return last_ns_;
}

void SimClock::advance(std::chrono::nanoseconds d) {
  if (d.count() <= 0) return;
  std::lock_guard lock(mu_);
  offset_ns_ += d.count();
}

}  // namespace falcon::fleet
