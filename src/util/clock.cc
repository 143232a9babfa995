#include <thread>

#include "falcon/clock.h"

namespace falcon {

bool Clock::wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                       std::chrono::steady_clock::time_point deadline,
                       const std::function<bool()>& stop) const {
  return cv.wait_until(lock, deadline, stop);
}

std::chrono::system_clock::time_point SystemClock::now() const {
  return std::chrono::system_clock::now();
}

std::chrono::steady_clock::time_point SystemClock::steady_now() const {
  return std::chrono::steady_clock::now();
}

void SystemClock::sleep_for(std::chrono::nanoseconds d) const { std::this_thread::sleep_for(d); }

std::shared_ptr<Clock> make_system_clock() { return std::make_shared<SystemClock>(); }

}  // namespace falcon
