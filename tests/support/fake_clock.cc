#include "support/fake_clock.h"

namespace falcon::testing {

namespace {
// 2026-04-13T08:00:00Z
constexpr std::chrono::seconds kDefaultStart{1776067200};
}  // namespace

FakeClock::FakeClock()
    : FakeClock(std::chrono::system_clock::time_point(
          std::chrono::duration_cast<std::chrono::system_clock::duration>(kDefaultStart))) {}

FakeClock::FakeClock(std::chrono::system_clock::time_point start)
    : wall_(start), steady_(std::chrono::steady_clock::time_point(std::chrono::hours(1))) {}

std::chrono::system_clock::time_point FakeClock::now() const {
  std::lock_guard lock(mutex_);
  return wall_;
}

std::chrono::steady_clock::time_point FakeClock::steady_now() const {
  std::lock_guard lock(mutex_);
  return steady_;
}

void FakeClock::sleep_for(std::chrono::nanoseconds d) const {
  advance(d);
  std::lock_guard lock(mutex_);
  if (d > std::chrono::nanoseconds::zero()) slept_ += d;
}

void FakeClock::advance(std::chrono::nanoseconds d) const {
  if (d <= std::chrono::nanoseconds::zero()) return;
  std::lock_guard lock(mutex_);
  wall_ += std::chrono::duration_cast<std::chrono::system_clock::duration>(d);
  steady_ += std::chrono::duration_cast<std::chrono::steady_clock::duration>(d);
}

bool FakeClock::wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                           std::chrono::steady_clock::time_point deadline,
                           const std::function<bool()>& stop) const {
  {
    std::lock_guard guard(mutex_);
    ++waiters_;
  }
  // advance() cannot reach `cv` (it belongs to the waiter), so the waiter re-checks the fake
  // time on a short real-time tick; stop() is seen at once through `cv`.
  bool stopped = false;
  for (;;) {
    if (stop()) {
      stopped = true;
      break;
    }
    if (steady_now() >= deadline) break;
    cv.wait_for(lock, std::chrono::milliseconds(1));
  }
  std::lock_guard guard(mutex_);
  --waiters_;
  return stopped;
}

int FakeClock::waiters() const {
  std::lock_guard lock(mutex_);
  return waiters_;
}

std::chrono::nanoseconds FakeClock::slept() const {
  std::lock_guard lock(mutex_);
  return slept_;
}

}  // namespace falcon::testing
