#include "gcp/rate_limiter.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include <fmt/format.h>

namespace falcon::gcp {
namespace {

// The state file holds one fixed-size text record, rewritten in place:
//   falcon logging read bucket v1 tokens=<double> updated_ns=<steady ns>\n   (space padded)
constexpr std::size_t kRecordSize = 128;
constexpr const char* kRecordFormat =
    "falcon logging read bucket v1 tokens=%.9f updated_ns=%" PRId64;
constexpr const char* kRecordScan = "falcon logging read bucket v1 tokens=%lf updated_ns=%" SCNd64;

std::int64_t steady_ns(const Clock& clock) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock.steady_now().time_since_epoch())
      .count();
}

// Creates `dir` and its missing parents with mode 0700. Returns "" or what went wrong.
std::string make_private_dir(const std::filesystem::path& dir) {
  std::filesystem::path current;
  for (const auto& part : dir) {
    current /= part;
    if (part.empty() || part == "/") continue;
    if (::mkdir(current.c_str(), 0700) == 0 || errno == EEXIST) continue;
    return fmt::format("cannot create {}: {}", current.string(), ::strerror(errno));
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return fmt::format("{} is not a directory", dir.string());
  }
  return "";
}

// Holds flock(LOCK_EX) on a descriptor for its lifetime.
class FileLock {
 public:
  explicit FileLock(int fd) : fd_(fd) {
    while ((locked_ = ::flock(fd_, LOCK_EX) == 0) == false && errno == EINTR) {
    }
  }
  ~FileLock() {
    if (locked_) ::flock(fd_, LOCK_UN);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  bool locked() const { return locked_; }

 private:
  int fd_;
  bool locked_ = false;
};

}  // namespace

BucketShape bucket_shape(int reads_per_minute) {
  const int rate = std::max(reads_per_minute, 1);
  const int burst = std::max(1, rate / 12);
  return {static_cast<double>(burst), std::max(1.0, static_cast<double>(rate - burst))};
}

// ---------------------------------------------------------------------------------------------
// TokenBucket

TokenBucket::TokenBucket(double refill_per_minute, double burst, std::shared_ptr<Clock> clock)
    : clock_(std::move(clock)),
      per_second_(std::max(refill_per_minute, 1e-9) / 60.0),
      burst_(std::max(burst, 1.0)),
      tokens_(burst_),
      updated_(clock_->steady_now()) {}

std::chrono::nanoseconds TokenBucket::reserve() {
  std::lock_guard lock(mutex_);
  const auto now = clock_->steady_now();
  if (now > updated_) {
    const double elapsed = std::chrono::duration<double>(now - updated_).count();
    tokens_ = std::min(burst_, tokens_ + elapsed * per_second_);
    updated_ = now;
  }
  tokens_ -= 1.0;
  if (tokens_ >= 0) return std::chrono::nanoseconds(0);
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(-tokens_ / per_second_));
}

std::chrono::nanoseconds TokenBucket::acquire() {
  const std::chrono::nanoseconds wait = reserve();
  if (wait.count() > 0) clock_->sleep_for(wait);
  return wait;
}

void TokenBucket::set_rate(double refill_per_minute, double burst) {
  std::lock_guard lock(mutex_);
  per_second_ = std::max(refill_per_minute, 1e-9) / 60.0;
  burst_ = std::max(burst, 1.0);
  tokens_ = std::min(tokens_, burst_);
}

// ---------------------------------------------------------------------------------------------
// ProjectRateLimiters

ProjectRateLimiters::ProjectRateLimiters(std::shared_ptr<Clock> clock) : clock_(std::move(clock)) {}

std::shared_ptr<TokenBucket> ProjectRateLimiters::for_project(const std::string& project,
                                                              int reads_per_minute) {
  const int rate = std::max(reads_per_minute, 1);
  const BucketShape shape = bucket_shape(rate);
  std::lock_guard lock(mutex_);
  auto& [known_rate, bucket] = buckets_[project];
  if (!bucket) {
    bucket = std::make_shared<TokenBucket>(shape.refill_per_minute, shape.burst, clock_);
  } else if (known_rate != rate) {
    bucket->set_rate(shape.refill_per_minute, shape.burst);
  }
  known_rate = rate;
  return bucket;
}

Reservation ProjectRateLimiters::reserve(const std::string& project, int reads_per_minute) {
  return {for_project(project, reads_per_minute)->reserve(), {}};
}

// ---------------------------------------------------------------------------------------------
// SharedReadLimiter

SharedReadLimiter::SharedReadLimiter(std::filesystem::path dir, std::shared_ptr<Clock> clock)
    : dir_(std::move(dir)), clock_(clock), fallback_(std::move(clock)) {}

SharedReadLimiter::~SharedReadLimiter() {
  for (const auto& [project, fd] : files_) ::close(fd);
}

std::string SharedReadLimiter::sharing() const {
  return fmt::format("this machine's falcon processes (state in {})", dir_.string());
}

std::filesystem::path SharedReadLimiter::file_for(const std::string& project) const {
  std::string safe;
  for (const char c : project) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '.' || c == '_' || c == '-';
    safe += plain ? std::string(1, c) : fmt::format("%{:02X}", static_cast<unsigned char>(c));
  }
  if (safe.empty() || safe == "." || safe == "..") safe = fmt::format("%{:02X}", safe.size());
  return dir_ / ("logging-reads-" + safe);
}

int SharedReadLimiter::open_file(const std::string& project) {
  if (const auto it = files_.find(project); it != files_.end()) return it->second;
  if (const std::string problem = make_private_dir(dir_); !problem.empty()) {
    fallback_reason_ = problem;
    return -1;
  }
  const std::filesystem::path path = file_for(project);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    fallback_reason_ = fmt::format("cannot open {}: {}", path.string(), ::strerror(errno));
    return -1;
  }
  files_.emplace(project, fd);
  return fd;
}

Reservation SharedReadLimiter::reserve(const std::string& project, int reads_per_minute) {
  std::unique_lock lock(mutex_);
  const int fd = fallback_reason_.empty() ? open_file(project) : -1;
  if (fd >= 0) {
    FileLock file_lock(fd);
    if (file_lock.locked()) {
      const BucketShape shape = bucket_shape(reads_per_minute);
      const double per_ns = shape.refill_per_minute / 60e9;
      const std::int64_t now = steady_ns(*clock_);

      char record[kRecordSize + 1] = {};
      const ssize_t got = ::pread(fd, record, kRecordSize, 0);
      double tokens = 0;
      std::int64_t updated = 0;
      const bool known =
          got > 0 && std::sscanf(record, kRecordScan, &tokens, &updated) == 2 && updated <= now;
      if (!known) {  // new, unreadable, or written before a reboot: a full bucket
        tokens = shape.burst;
        updated = now;
      }
      tokens = std::min(shape.burst, tokens + static_cast<double>(now - updated) * per_ns);
      tokens -= 1.0;
      std::snprintf(record, sizeof record, kRecordFormat, tokens, now);
      const std::size_t used = std::strlen(record);
      std::fill(record + used, record + kRecordSize - 1, ' ');
      record[kRecordSize - 1] = '\n';
      if (::pwrite(fd, record, kRecordSize, 0) == static_cast<ssize_t>(kRecordSize)) {
        const std::chrono::nanoseconds wait(
            tokens >= 0 ? 0 : static_cast<std::int64_t>(-tokens / per_ns));
        return {wait, {}};
      }
      fallback_reason_ =
          fmt::format("cannot write {}: {}", file_for(project).string(), ::strerror(errno));
    } else {
      fallback_reason_ =
          fmt::format("cannot lock {}: {}", file_for(project).string(), ::strerror(errno));
    }
  }
  Reservation reservation = fallback_.reserve(project, reads_per_minute);
  if (!warned_) {
    warned_ = true;
    reservation.warning = fmt::format(
        "the Cloud Logging read quota cannot be shared with other falcon processes ({}); this "
        "process keeps to gcp.logging_reads_per_minute on its own",
        fallback_reason_);
  }
  return reservation;
}

}  // namespace falcon::gcp
