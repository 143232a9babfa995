// A Clock that only moves when told to. sleep_for() advances it instead of blocking, so code
// that waits or retries runs instantly in tests. Thread-safe.
#pragma once

#include <chrono>
#include <mutex>

#include "falcon/clock.h"

namespace falcon::testing {

class FakeClock final : public Clock {
 public:
  // Starts at 2026-04-13T08:00:00Z (wall) and at an arbitrary steady epoch.
  FakeClock();
  explicit FakeClock(std::chrono::system_clock::time_point start);

  std::chrono::system_clock::time_point now() const override;
  std::chrono::steady_clock::time_point steady_now() const override;
  void sleep_for(std::chrono::nanoseconds d) const override;  // advances both clocks by d

  // Moves both clocks forward by `d` (negative values are ignored).
  void advance(std::chrono::nanoseconds d) const;
  // Total time slept through sleep_for().
  std::chrono::nanoseconds slept() const;

 private:
  mutable std::mutex mutex_;
  mutable std::chrono::system_clock::time_point wall_;
  mutable std::chrono::steady_clock::time_point steady_;
  mutable std::chrono::nanoseconds slept_{0};
};

}  // namespace falcon::testing
