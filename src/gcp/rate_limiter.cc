#include "gcp/rate_limiter.h"

#include <algorithm>

namespace falcon::gcp {

TokenBucket::TokenBucket(double refill_per_minute, double burst, std::shared_ptr<Clock> clock)
    : clock_(std::move(clock)),
      per_second_(std::max(refill_per_minute, 1e-9) / 60.0),
      burst_(std::max(burst, 1.0)),
      tokens_(burst_),
      updated_(clock_->steady_now()) {}

std::chrono::nanoseconds TokenBucket::acquire() {
  std::chrono::nanoseconds wait{0};
  {
    std::lock_guard lock(mutex_);
    const auto now = clock_->steady_now();
    if (now > updated_) {
      const double elapsed = std::chrono::duration<double>(now - updated_).count();
      tokens_ = std::min(burst_, tokens_ + elapsed * per_second_);
      updated_ = now;
    }
    tokens_ -= 1.0;
    if (tokens_ < 0) {
      wait = std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::duration<double>(-tokens_ / per_second_));
    }
  }
  if (wait.count() > 0) clock_->sleep_for(wait);
  return wait;
}

void TokenBucket::set_rate(double refill_per_minute, double burst) {
  std::lock_guard lock(mutex_);
  per_second_ = std::max(refill_per_minute, 1e-9) / 60.0;
  burst_ = std::max(burst, 1.0);
  tokens_ = std::min(tokens_, burst_);
}

ProjectRateLimiters::ProjectRateLimiters(std::shared_ptr<Clock> clock) : clock_(std::move(clock)) {}

std::shared_ptr<TokenBucket> ProjectRateLimiters::for_project(const std::string& project,
                                                              int reads_per_minute) {
  const int rate = std::max(reads_per_minute, 1);
  const double burst = std::max(1, rate / 12);
  const double refill = std::max(1.0, rate - burst);
  std::lock_guard lock(mutex_);
  auto& [known_rate, bucket] = buckets_[project];
  if (!bucket) {
    bucket = std::make_shared<TokenBucket>(refill, burst, clock_);
  } else if (known_rate != rate) {
    bucket->set_rate(refill, burst);
  }
  known_rate = rate;
  return bucket;
}

std::shared_ptr<ProjectRateLimiters> ProjectRateLimiters::process_wide() {
  static const auto instance = std::make_shared<ProjectRateLimiters>(make_system_clock());
  return instance;
}

}  // namespace falcon::gcp
