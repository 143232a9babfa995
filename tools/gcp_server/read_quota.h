// Cloud Logging's per-project read quota ("Read requests per minute per project"), as the local
// server enforces it when asked to: at most `per_minute` entries:list calls of a project in any
// sliding 60-second window; a call over the limit is refused (HTTP 429 RESOURCE_EXHAUSTED) and
// does not use up the quota.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace falcon::fake {

class ReadQuota {
 public:
  using TimePoint = std::chrono::system_clock::time_point;
  static constexpr std::chrono::seconds kWindow{60};

  explicit ReadQuota(int per_minute = 0) : per_minute_(per_minute) {}

  // 0 (or less): no limit.
  void set_limit(int per_minute);
  int limit() const;

  // Admits one read of `project` at `now` (recorded in the window) and returns nullopt, or refuses
  // it and returns how long until the oldest read in the window leaves it (the earliest time a
  // read may succeed). Refusals are counted.
  std::optional<std::chrono::nanoseconds> admit(const std::string& project, TimePoint now);

  std::int64_t rejected() const;  // reads refused so far
  void reset();                   // forgets the windows and the refusal count (keeps the limit)

 private:
  mutable std::mutex mutex_;
  int per_minute_;
  std::map<std::string, std::deque<TimePoint>> windows_;
  std::int64_t rejected_ = 0;
};

// The project a Logging resource name charges: "projects/p/..." -> "p"; any other resource name
// (organizations/o, billingAccounts/b, folders/f) charges itself.
std::string quota_project(const std::string& resource_name);

}  // namespace falcon::fake
