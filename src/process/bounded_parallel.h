// Runs a batch of independent tasks on at most N threads at once: the bounded pool behind
// parallel probes and warm-up. Deliberately small: threads are started per batch (a batch is a
// handful to a few hundred subprocess calls, each far costlier than a thread start).
#pragma once

#include <cstddef>
#include <functional>

namespace falcon {

// Calls task(i) for every i in [0, count), on min(max_parallel, count) threads (max_parallel
// below 1 counts as 1); tasks are taken in index order. Blocks until every task has returned.
// `task` must not throw: an exception escaping it terminates the process (catch inside).
void run_bounded_parallel(std::size_t count, int max_parallel,
                          const std::function<void(std::size_t)>& task);

}  // namespace falcon
