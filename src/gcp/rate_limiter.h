// Rate limiting of Cloud Logging reads (DESIGN D5). entries:list is limited to about 60 reads per
// minute per project, shared by every reader of the project. A ReadLimiter paces reads so that no
// 60-second window sees more than the configured rate: ProjectRateLimiters within one process,
// SharedReadLimiter across every falcon process that uses the same state directory (a small
// token-bucket file per project, updated under flock), so that N processes together still keep to
// the rate instead of spending N times it.
//
// Limiters never sleep themselves: reserve() says how long the caller must wait, and the caller
// waits on its Clock (and may tell its user first).
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "falcon/clock.h"

namespace falcon::gcp {

// The bucket that keeps `reads_per_minute` in every 60-second window: a burst of a twelfth of the
// rate (at least 1), refilled continuously at the rest (at least 1 a minute).
struct BucketShape {
  double burst = 1;
  double refill_per_minute = 1;
};
BucketShape bucket_shape(int reads_per_minute);

// One reservation: how long to wait before the read, and (once) why the limit is not shared as
// configured.
struct Reservation {
  std::chrono::nanoseconds wait{0};
  std::string warning;  // non-empty at most once: e.g. the shared state file cannot be used
};

class ReadLimiter {
 public:
  virtual ~ReadLimiter() = default;
  // Reserves the next read of `project` at `reads_per_minute` and returns how long the caller
  // must wait before making it. Reservations are granted in the order they are asked for. Never
  // sleeps; thread-safe.
  virtual Reservation reserve(const std::string& project, int reads_per_minute) = 0;
  // Who shares the rate, for messages: "this process", "this machine's falcon processes".
  virtual std::string sharing() const = 0;
};

// A token bucket: `burst` permits at most at once, refilled continuously at `refill_per_minute`.
// Permits are handed out in the order they are asked for. Thread-safe.
class TokenBucket {
 public:
  TokenBucket(double refill_per_minute, double burst, std::shared_ptr<Clock> clock);

  // Takes one permit and returns how long the caller must wait before using it.
  std::chrono::nanoseconds reserve();
  // reserve(), then sleeps on the clock for that long. Returns how long it slept.
  std::chrono::nanoseconds acquire();

  // Changes the rates; permits already reserved keep their times.
  void set_rate(double refill_per_minute, double burst);

 private:
  std::shared_ptr<Clock> clock_;
  std::mutex mutex_;
  double per_second_;
  double burst_;
  double tokens_;  // may go negative: permits reserved by callers still waiting
  std::chrono::steady_clock::time_point updated_;
};

// One TokenBucket (bucket_shape) per project, in this process only. Thread-safe.
class ProjectRateLimiters final : public ReadLimiter {
 public:
  explicit ProjectRateLimiters(std::shared_ptr<Clock> clock);

  // The limiter for `project`, made on first use; a later call with another rate changes it.
  std::shared_ptr<TokenBucket> for_project(const std::string& project, int reads_per_minute);

  Reservation reserve(const std::string& project, int reads_per_minute) override;
  std::string sharing() const override { return "this process"; }

 private:
  std::shared_ptr<Clock> clock_;
  std::mutex mutex_;
  std::map<std::string, std::pair<int, std::shared_ptr<TokenBucket>>> buckets_;
};

// The bucket of each project in a file of `dir` (`logging-reads-<project>`, mode 0600; `dir` is
// made with mode 0700 on first use), so that every process using the same directory draws from
// one bucket. Each reservation locks the file (flock), refills the bucket from the time it
// records, takes a permit and writes it back: a few microseconds, never held while waiting.
//
// Time is the clock's steady time, which for the system clock is CLOCK_MONOTONIC, the same in
// every process of the machine. A file written before a reboot (its time is ahead of now) or
// unreadable starts a full bucket again. Processes configured with different rates each refill
// at their own rate when they reserve. If the file cannot be made or locked, reads are limited
// within this process instead and the first reservation carries a warning saying why.
// Thread-safe.
class SharedReadLimiter final : public ReadLimiter {
 public:
  SharedReadLimiter(std::filesystem::path dir, std::shared_ptr<Clock> clock);
  ~SharedReadLimiter() override;

  Reservation reserve(const std::string& project, int reads_per_minute) override;
  std::string sharing() const override;

  // The state file of `project` (characters outside [A-Za-z0-9._-] written as %XX).
  std::filesystem::path file_for(const std::string& project) const;

 private:
  int open_file(const std::string& project);  // under mutex_; -1 and fallback_reason_ on failure

  std::filesystem::path dir_;
  std::shared_ptr<Clock> clock_;
  std::mutex mutex_;
  std::map<std::string, int> files_;  // project -> open descriptor
  ProjectRateLimiters fallback_;
  std::string fallback_reason_;  // why the files cannot be used; empty while they can
  bool warned_ = false;
};

}  // namespace falcon::gcp
