#include "gcp_server/read_quota.h"

namespace falcon::fake {

void ReadQuota::set_limit(int per_minute) {
  std::lock_guard lock(mutex_);
  per_minute_ = per_minute;
}

int ReadQuota::limit() const {
  std::lock_guard lock(mutex_);
  return per_minute_;
}

std::optional<std::chrono::nanoseconds> ReadQuota::admit(const std::string& project,
                                                         TimePoint now) {
  std::lock_guard lock(mutex_);
  if (per_minute_ <= 0) return std::nullopt;
  std::deque<TimePoint>& window = windows_[project];
  // A read stamped `kWindow` or more before now has left the window.
  while (!window.empty() && window.front() + kWindow <= now) window.pop_front();
  if (window.size() < static_cast<std::size_t>(per_minute_)) {
    window.push_back(now);
    return std::nullopt;
  }
  ++rejected_;
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
      window[window.size() - static_cast<std::size_t>(per_minute_)] + kWindow - now);
}

std::int64_t ReadQuota::rejected() const {
  std::lock_guard lock(mutex_);
  return rejected_;
}

void ReadQuota::reset() {
  std::lock_guard lock(mutex_);
  windows_.clear();
  rejected_ = 0;
}

std::string quota_project(const std::string& resource_name) {
  static const std::string kPrefix = "projects/";
  if (resource_name.rfind(kPrefix, 0) != 0) return resource_name;
  const std::string rest = resource_name.substr(kPrefix.size());
  return rest.substr(0, rest.find('/'));
}

}  // namespace falcon::fake
