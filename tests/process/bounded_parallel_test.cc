// run_bounded_parallel: every task once, never more than N at a time.
#include "process/bounded_parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <vector>

namespace falcon {
namespace {

TEST(BoundedParallel, RunsEveryTaskExactlyOnce) {
  for (int max_parallel : {-1, 0, 1, 3, 64}) {
    std::vector<std::atomic<int>> seen(50);
    run_bounded_parallel(seen.size(), max_parallel, [&](std::size_t i) { ++seen[i]; });
    for (const auto& s : seen) EXPECT_EQ(s.load(), 1) << max_parallel;
  }
  run_bounded_parallel(0, 4, [](std::size_t) { FAIL() << "no task expected"; });
}

TEST(BoundedParallel, RunsUpToTheBoundAtOnceAndNoMore) {
  std::mutex mutex;
  std::condition_variable cv;
  int in_flight = 0;
  int max_in_flight = 0;
  int arrived = 0;  // in the current round
  long generation = 0;
  run_bounded_parallel(12, 4, [&](std::size_t) {
    std::unique_lock lock(mutex);
    ++in_flight;
    max_in_flight = std::max(max_in_flight, in_flight);
    const long mine = generation;
    if (++arrived == 4) {  // a round of 4 tasks all running at once
      arrived = 0;
      ++generation;
      cv.notify_all();
    } else {
      cv.wait_for(lock, std::chrono::seconds(10), [&] { return generation != mine; });
    }
    --in_flight;
  });
  EXPECT_EQ(max_in_flight, 4);
}

}  // namespace
}  // namespace falcon
