// The fleet's simulated time: a wall clock (nanoseconds since the epoch, shown in xpk's table
// and in log timestamps) that starts at the real time and then runs `scale` times faster than
// real time. Scale 0 is the manual mode: time moves only through advance(). advance() also works
// in the scaled mode (it jumps ahead). Thread-safe.
//
//   SimClock clock(make_system_clock(), 60);   // one real second is a simulated minute
//   clock.advance(std::chrono::minutes(5));    // and jump five simulated minutes ahead
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>

#include "falcon/clock.h"

namespace falcon::fleet {

class SimClock {
 public:
  // `real` provides the starting wall time and, when scale > 0, the passing of real time.
  // Throws std::invalid_argument when scale is negative.
  SimClock(std::shared_ptr<const Clock> real, double scale);

  // Simulated wall time in nanoseconds since the epoch. Never goes backwards.
  std::int64_t now_ns() const;
  // Moves simulated time forward by `d` (negative values are ignored).
  void advance(std::chrono::nanoseconds d);
  double scale() const { return scale_; }
  bool manual() const { return scale_ == 0; }

 private:
  std::shared_ptr<const Clock> real_;
  double scale_;
  std::int64_t start_wall_ns_;
  std::chrono::steady_clock::time_point start_steady_;
  mutable std::mutex mu_;
  std::int64_t offset_ns_ = 0;
  mutable std::int64_t last_ns_ = 0;
};

}  // namespace falcon::fleet
