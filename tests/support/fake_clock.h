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
  // Does not advance time: returns once stop() is true (after a notify of `cv`) or once
  // advance() has moved the steady clock to `deadline` (checked every millisecond of real time).
  bool wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                  std::chrono::steady_clock::time_point deadline,
                  const std::function<bool()>& stop) const override;
  // How many wait_until calls are blocked now (tests wait for a loop to be waiting).
  int waiters() const;

  // Moves both clocks forward by `d` (negative values are ignored).
  void advance(std::chrono::nanoseconds d) const;
  // Total time slept through sleep_for().
  std::chrono::nanoseconds slept() const;

 private:
  mutable std::mutex mutex_;
  mutable std::chrono::system_clock::time_point wall_;
  mutable std::chrono::steady_clock::time_point steady_;
  mutable std::chrono::nanoseconds slept_{0};
  mutable int waiters_ = 0;
};

}  // namespace falcon::testing
