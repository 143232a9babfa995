// Time as an input. Logic never calls now() or sleeps directly; it asks a Clock, so tests can
// step time and retries can be checked without waiting.
#pragma once

#include <chrono>
#include <memory>

namespace falcon {

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock time, only for timestamps shown to people and sent to Google.
  virtual std::chrono::system_clock::time_point now() const = 0;
  // Monotonic time, for deadlines and elapsed times.
  virtual std::chrono::steady_clock::time_point steady_now() const = 0;
  // Blocks the calling thread for `d` (a fake clock advances instead).
  virtual void sleep_for(std::chrono::nanoseconds d) const = 0;
};

// The real clock.
class SystemClock final : public Clock {
 public:
  std::chrono::system_clock::time_point now() const override;
  std::chrono::steady_clock::time_point steady_now() const override;
  void sleep_for(std::chrono::nanoseconds d) const override;
};

std::shared_ptr<Clock> make_system_clock();

}  // namespace falcon
