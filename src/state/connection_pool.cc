#include "state/connection_pool.h"

#include <algorithm>

namespace falcon::state {

ConnectionPool::ConnectionPool(Opener open, int max)
    : open_(std::move(open)), max_(std::max(1, max)) {}

ConnectionPool::Lent::~Lent() {
  if (conn_) pool_->give_back(std::move(conn_));
}

ConnectionPool::Lent ConnectionPool::borrow() {
  {
    std::unique_lock lock(mutex_);
    returned_.wait(lock, [&] { return !idle_.empty() || existing_ < max_; });
    if (!idle_.empty()) {
      auto conn = std::move(idle_.back());
      idle_.pop_back();
      return Lent(*this, std::move(conn));
    }
    ++existing_;  // reserve the slot, then open outside the lock
  }
  try {
    return Lent(*this, open_());
  } catch (...) {
    std::lock_guard lock(mutex_);
    --existing_;
    returned_.notify_one();
    throw;
  }
}

void ConnectionPool::adopt(std::unique_ptr<SqlConnection> conn) {
  std::lock_guard lock(mutex_);
  if (existing_ >= max_) return;  // full: let it close
  ++existing_;
  idle_.push_back(std::move(conn));
  returned_.notify_one();
}

void ConnectionPool::give_back(std::unique_ptr<SqlConnection> conn) {
  const bool keep = !conn->broken();
  if (!keep) conn.reset();  // close outside the lock
  std::lock_guard lock(mutex_);
  if (keep) {
    idle_.push_back(std::move(conn));
  } else {
    --existing_;
  }
  returned_.notify_one();
}

}  // namespace falcon::state
