// Rate limiting of Cloud Logging reads (DESIGN D5). entries:list is limited to about 60 reads
// per minute per project; every caller in the process shares one limiter per project, so that an
// export of many ranks queues politely instead of drawing a storm of 429s.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "falcon/clock.h"

namespace falcon::gcp {

// A token bucket: `burst` permits at most at once, refilled continuously at `refill_per_minute`.
// Permits are handed out in the order they are asked for. Thread-safe.
class TokenBucket {
 public:
  TokenBucket(double refill_per_minute, double burst, std::shared_ptr<Clock> clock);

  // Takes one permit, sleeping on the clock until it is available. Returns how long it slept.
  std::chrono::nanoseconds acquire();

  // Changes the rates; permits already reserved keep their times.
  void set_rate(double refill_per_minute, double burst);

 private:
  std::shared_ptr<Clock> clock_;
  std::mutex mutex_;
  double per_second_;
  double burst_;
  double tokens_;  // may go negative: permits reserved by callers still sleeping
  std::chrono::steady_clock::time_point updated_;
};

// One TokenBucket per project, sized so that no 60-second window sees more than
// `reads_per_minute` reads: a burst of reads_per_minute / 12 (at least 1), refilled at the rest.
// Thread-safe.
class ProjectRateLimiters {
 public:
  explicit ProjectRateLimiters(std::shared_ptr<Clock> clock);

  // The limiter for `project`, made on first use; a later call with another rate changes it.
  std::shared_ptr<TokenBucket> for_project(const std::string& project, int reads_per_minute);

  // The process-wide instance (real clock) that LoggingClient uses unless given another.
  static std::shared_ptr<ProjectRateLimiters> process_wide();

 private:
  std::shared_ptr<Clock> clock_;
  std::mutex mutex_;
  std::map<std::string, std::pair<int, std::shared_ptr<TokenBucket>>> buckets_;
};

}  // namespace falcon::gcp
