#include "process/bounded_parallel.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace falcon {

void run_bounded_parallel(std::size_t count, int max_parallel,
                          const std::function<void(std::size_t)>& task) {
  if (count == 0) return;
  const std::size_t threads = std::min(count, static_cast<std::size_t>(std::max(max_parallel, 1)));
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) task(i);
  };
  if (threads == 1) {
    worker();
    return;
  }
  std::vector<std::jthread> pool;
  pool.reserve(threads - 1);
  for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();  // the calling thread takes its share too
}

}  // namespace falcon
