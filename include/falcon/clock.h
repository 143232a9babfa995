// Time as an input. Logic never calls now() or sleeps directly; it asks a Clock, so tests can
// step time and retries can be checked without waiting.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>

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
  // An interruptible wait: blocks until `stop()` is true or steady_now() reaches `deadline`,
  // whichever comes first, and returns stop()'s last value. As with
  // std::condition_variable::wait_until, `lock` holds the mutex guarding what stop() reads, and
  // whoever changes that notifies `cv`. The default waits on `cv` against
  // std::chrono::steady_clock, which is right for a clock whose steady_now() is that clock; a
  // clock with time of its own overrides it (the tests' fake clock returns once its time has been
  // moved past the deadline).
  virtual bool wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                          std::chrono::steady_clock::time_point deadline,
                          const std::function<bool()>& stop) const;
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
