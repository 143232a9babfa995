// The fleet's time (nanoseconds since the epoch): every time the fleet reports (xpk's table,
// log timestamps, the state dump) is a reading of this clock, and a run's simulated durations
// (a workload's run time, admission delay, TTL) are turned into spans of it by span_ns().
//
// Scaled mode (scale > 0): the clock IS the wall clock, and simulated durations shrink by
// `scale`: at scale 60 a 240-second run takes 4 s, and starts and ends at the wall-clock instants
// at which it does, so nothing the fleet reports lies in the future. Manual mode (scale 0):
// time starts at the wall clock and then moves only through advance(), and a simulated second
// is a second of this clock (tests and benchmarks step it). Thread-safe.
//
//   SimClock clock(make_system_clock(), 60);            // the wall clock; durations / 60
//   clock.span_ns(240'000'000'000);                     // 4'000'000'000: a 240 s run takes 4 s
//   SimClock manual(make_system_clock(), 0);
//   manual.advance(std::chrono::minutes(5));            // jumps five minutes ahead
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>

#include "falcon/clock.h"

namespace falcon::fleet {

class SimClock {
 public:
  // `real` provides the wall time: the starting time, and in scaled mode every reading.
  // Throws std::invalid_argument when scale is negative or not a number.
  SimClock(std::shared_ptr<const Clock> real, double scale);

  // The fleet's now in nanoseconds since the epoch. Never goes backwards; in scaled mode never
  // ahead of the wall clock.
  std::int64_t now_ns() const;
  // How long a simulated duration lasts on this clock: `simulated_ns / scale` in scaled mode
  // (rounded to the nanosecond), `simulated_ns` in manual mode.
  std::int64_t span_ns(std::int64_t simulated_ns) const;
  // Manual mode: moves time forward by `d` (negative values are ignored). Throws
  // std::logic_error in scaled mode, where the clock is the wall clock and cannot jump.
  void advance(std::chrono::nanoseconds d);
  double scale() const { return scale_; }
  bool manual() const { return scale_ == 0; }

 private:
  std::int64_t wall_ns() const;

  std::shared_ptr<const Clock> real_;
  double scale_;
  std::int64_t start_wall_ns_;
  mutable std::mutex mu_;
  std::int64_t offset_ns_ = 0;
  mutable std::int64_t last_ns_ = 0;
};

}  // namespace falcon::fleet
