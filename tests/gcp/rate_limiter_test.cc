// The read limiters of issue 11: SharedReadLimiter keeps one token bucket per project in a file
// of the state directory, so that every falcon process using it together keeps to the rate.
// Reservations never sleep; the fake clock stands still, so every wait is exact.
#include "gcp/rate_limiter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "support/fake_clock.h"
#include "support/temp_dir.h"

namespace falcon::gcp {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;
using testing::FakeClock;
using ::testing::HasSubstr;
using testing::TempDir;

// 60 reads a minute: a burst of 5, then one read every 60 / 55 s.
constexpr int kRate = 60;
constexpr int kBurst = 5;

nanoseconds nth_wait(int k) {  // the wait of the k-th read past the burst
  return std::chrono::duration_cast<nanoseconds>(std::chrono::duration<double>(k * 60.0 / 55.0));
}

TEST(BucketShape, KeepsTheRateInEveryMinute) {
  EXPECT_EQ(bucket_shape(60).burst, 5);
  EXPECT_EQ(bucket_shape(60).refill_per_minute, 55);
  EXPECT_EQ(bucket_shape(1).burst, 1);
  EXPECT_EQ(bucket_shape(1).refill_per_minute, 1);
}

TEST(SharedReadLimiter, TwoLimitersOnOneDirectoryDrawFromOneBucket) {
  TempDir dir;
  auto clock = std::make_shared<FakeClock>();
  SharedReadLimiter a(dir.path() / "quota", clock);
  SharedReadLimiter b(dir.path() / "quota", clock);
  for (int i = 0; i < kBurst; ++i) EXPECT_EQ(a.reserve("p", kRate).wait, nanoseconds(0));
  // b is another limiter (another process) but the same project: the burst is spent.
  EXPECT_NEAR(b.reserve("p", kRate).wait.count(), nth_wait(1).count(), 1'000);
  EXPECT_NEAR(a.reserve("p", kRate).wait.count(), nth_wait(2).count(), 1'000);
  // Another project has a bucket (a file) of its own.
  EXPECT_EQ(b.reserve("q/../x", kRate).wait, nanoseconds(0));
  EXPECT_TRUE(std::filesystem::exists(a.file_for("p")));
  EXPECT_EQ(a.file_for("q/../x").filename(), "logging-reads-q%2F..%2Fx");
  // Time refills the bucket for everyone.
  clock->advance(seconds(60));
  EXPECT_EQ(b.reserve("p", kRate).wait, nanoseconds(0));
  struct stat st {};
  ASSERT_EQ(::stat((dir.path() / "quota").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

// Three processes reserve 40 reads each at the same time. Together they get one burst and then
// one read every 60/55 s, as one process would: every wait differs, and the last is that of the
// 115th read past the burst. (Limiters of their own would give each process a burst and waits
// up to the 35th.)
TEST(SharedReadLimiter, ProcessesTogetherKeepToTheRate) {
  TempDir dir;
  auto clock = std::make_shared<FakeClock>();  // each child has a copy, standing still
  constexpr int kProcesses = 3;
  constexpr int kReads = 40;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      SharedReadLimiter limiter(dir.path() / "quota", clock);
      std::FILE* out = std::fopen((dir.path() / ("waits-" + std::to_string(p))).c_str(), "w");
      for (int i = 0; i < kReads && out != nullptr; ++i) {
        const Reservation r = limiter.reserve("p", kRate);
        std::fprintf(out, "%lld %d\n", static_cast<long long>(r.wait.count()),
                     r.warning.empty() ? 0 : 1);
      }
      ::_exit(out != nullptr && std::fclose(out) == 0 ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (const pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::vector<long long> waits;
  for (int p = 0; p < kProcesses; ++p) {
    std::FILE* in = std::fopen((dir.path() / ("waits-" + std::to_string(p))).c_str(), "r");
    ASSERT_NE(in, nullptr);
    long long wait = 0;
    int warned = 0;
    while (std::fscanf(in, "%lld %d", &wait, &warned) == 2) {
      EXPECT_EQ(warned, 0);
      waits.push_back(wait);
    }
    std::fclose(in);
  }
  ASSERT_EQ(waits.size(), static_cast<std::size_t>(kProcesses * kReads));
  std::sort(waits.begin(), waits.end());
  for (int i = 0; i < kProcesses * kReads; ++i) {
    const long long expected = i < kBurst ? 0 : nth_wait(i - kBurst + 1).count();
    ASSERT_NEAR(waits[i], expected, 1'000) << "read " << i;
  }
}

TEST(SharedReadLimiter, AnUnusableDirectoryLimitsThisProcessAloneAndSaysWhyOnce) {
  TempDir dir;
  const auto not_a_dir = dir.write("quota", "a file, not a directory");
  auto clock = std::make_shared<FakeClock>();
  SharedReadLimiter limiter(not_a_dir, clock);
  const Reservation first = limiter.reserve("p", kRate);
  EXPECT_EQ(first.wait, nanoseconds(0));
  EXPECT_THAT(first.warning, HasSubstr(not_a_dir.string()));
  EXPECT_THAT(first.warning, HasSubstr("this process keeps to gcp.logging_reads_per_minute"));
  for (int i = 1; i < kBurst; ++i) {
    const Reservation r = limiter.reserve("p", kRate);
    EXPECT_EQ(r.wait, nanoseconds(0));
    EXPECT_TRUE(r.warning.empty());
  }
  EXPECT_NEAR(limiter.reserve("p", kRate).wait.count(), nth_wait(1).count(), 1'000);
}

TEST(SharedReadLimiter, AStateFileFromBeforeAReBootStartsAFullBucket) {
  TempDir dir;
  auto clock = std::make_shared<FakeClock>();
  {
    SharedReadLimiter limiter(dir.path(), clock);
    for (int i = 0; i < 20; ++i) limiter.reserve("p", kRate);
  }
  // A record stamped far in the future of this clock (steady time restarts at boot).
  auto later = std::make_shared<FakeClock>();
  SharedReadLimiter limiter(dir.path(), later);
  std::FILE* f = std::fopen(limiter.file_for("p").c_str(), "r+");
  ASSERT_NE(f, nullptr);
  std::fprintf(f, "falcon logging read bucket v1 tokens=-50.0 updated_ns=%lld",
               static_cast<long long>(std::numeric_limits<std::int64_t>::max() / 2));
  std::fclose(f);
  EXPECT_EQ(limiter.reserve("p", kRate).wait, nanoseconds(0));
}

}  // namespace
}  // namespace falcon::gcp
