// CloudLogRetriever::follow_log against the local Logging server: every line once when timestamps
// tie and entries arrive late, tail-then-follow, stopping promptly, and a pace within the read
// quota. The fake clock makes every wait instant; the script below runs between polls.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include <nlohmann/json.hpp>

#include "falcon/log_retriever.h"
#include "logs/gke_log_env.h"

namespace falcon {
namespace {

using falcon::testing::gke_entry;
using falcon::testing::GkePlace;
using falcon::testing::kLogStartNanos;
using falcon::testing::LogServerEnv;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;

constexpr std::int64_t kMs = 1'000'000;

struct FollowLog : ::testing::Test {
  LogServerEnv env;
  GkePlace place;
  std::vector<std::string> printed;

  json line(std::int64_t offset_ns, const std::string& text, int worker = 0) {
    return gke_entry(
        place, {.worker = worker, .timestamp_nanos = kLogStartNanos + offset_ns, .text = text});
  }

  // Follows rank 0; after the n-th entries:list request `between_polls(n)` runs, and following
  // stops once `stop_after` requests were made.
  void follow(int stop_after, const std::function<void(int)>& between_polls, LogFilter filter = {},
              FollowOptions options = {}, int reads_per_minute = 6000) {
    std::int64_t seen = 0;
    options.should_stop = [&] {
      const std::int64_t polls = env.list_requests();
      if (polls != seen) {
        seen = polls;
        if (between_polls) between_polls(static_cast<int>(polls));
      }
      return polls >= stop_after;
    };
    CloudLogRetriever retriever = env.retriever(reads_per_minute);
    retriever.follow_log(env.cluster(place), place.workload, place.namespace_, 0, filter, {},
                         options, [&](const std::string& l) { printed.push_back(l); });
  }
};

TEST_F(FollowLog, PrintsEveryLineOnceWhenTimestampsTieAndEntriesArriveLate) {
  env.write({line(0, "a0"), line(1 * kMs, "a1"), line(2 * kMs, "a2"), line(4 * kMs, "a3"),
             line(4 * kMs, "a4"), line(3 * kMs, "other rank", 1)});
  follow(3, [&](int poll) {
    if (poll == 1) {
      env.write({line(4 * kMs, "b0 ties with the newest printed"), line(2 * kMs, "b1 arrives late"),
                 line(10 * kMs, "b2"), line(10 * kMs, "b3 ties with b2"),
                 line(11 * kMs, "other rank again", 1)});
    } else if (poll == 2) {
      env.write({line(10 * kMs, "c0 ties with the newest printed"),
                 line(10 * kMs - 3'000 * kMs, "c1 arrives 3 s late"), line(20 * kMs, "c2")});
    }
  });
  EXPECT_THAT(printed, UnorderedElementsAreArray(
                           {"a0", "a1", "a2", "a3", "a4", "b0 ties with the newest printed",
                            "b1 arrives late", "b2", "b3 ties with b2",
                            "c0 ties with the newest printed", "c1 arrives 3 s late", "c2"}));
  EXPECT_EQ(printed.size(), 12u);  // no duplicates
  // The first poll prints in time order (a3 and a4 tie: Logging orders them by insertId).
  EXPECT_THAT(std::vector<std::string>(printed.begin(), printed.begin() + 3),
              ElementsAre("a0", "a1", "a2"));
  EXPECT_THAT(std::vector<std::string>(printed.begin() + 3, printed.begin() + 5),
              UnorderedElementsAreArray({"a3", "a4"}));

  // Each later poll re-reads from the newest timestamp seen minus the 5 s lookback, in time order.
  const auto requests = env.http().list_requests();
  ASSERT_EQ(requests.size(), 3u);
  for (const json& r : requests) EXPECT_EQ(r["orderBy"], "timestamp asc");
  EXPECT_THAT(requests[0]["filter"].get<std::string>(),
              HasSubstr(R"(timestamp>="2026-04-12T08:00:00.000000000Z")"));
  EXPECT_THAT(requests[1]["filter"].get<std::string>(),
              HasSubstr(R"(timestamp>="2026-04-13T06:59:55.004000000Z")"));
  EXPECT_THAT(requests[2]["filter"].get<std::string>(),
              HasSubstr(R"(timestamp>="2026-04-13T06:59:55.010000000Z")"));
}

TEST_F(FollowLog, TailPrintsTheLastLinesThenOnlyNewOnes) {
  std::vector<json> entries;
  for (int i = 0; i < 10; ++i) entries.push_back(line(i * kMs, fmt::format("old {}", i)));
  env.write(entries);
  LogFilter filter;
  filter.tail_lines = 3;
  follow(
      2,
      [&](int poll) {
        if (poll == 1) env.write({line(20 * kMs, "new"), line(9 * kMs, "late tie with old 9")});
      },
      filter);
  // Older lines inside the lookback window are not printed after the tail.
  EXPECT_THAT(printed, ElementsAre("old 7", "old 8", "old 9", "late tie with old 9", "new"));
  EXPECT_EQ(env.http().list_requests()[0]["orderBy"], "timestamp desc");
}

TEST_F(FollowLog, TailZeroPrintsOnlyWhatComesAfterwards) {
  env.write({line(0, "old 0"), line(1 * kMs, "old 1")});
  LogFilter filter;
  filter.tail_lines = 0;
  follow(
      2,
      [&](int poll) {
        if (poll == 1) env.write({line(2 * kMs, "new")});
      },
      filter);
  EXPECT_THAT(printed, ElementsAre("new"));
}

TEST_F(FollowLog, StopsWithinAStepOfShouldStopTurningTrue) {
  env.write({line(0, "only")});
  FollowOptions options;
  options.poll_interval = seconds(60);
  options.should_stop = [&] { return env.clock().slept() >= milliseconds(1000); };
  CloudLogRetriever retriever = env.retriever();
  retriever.follow_log(env.cluster(place), place.workload, place.namespace_, 0, {}, {}, options,
                       [&](const std::string& l) { printed.push_back(l); });
  EXPECT_THAT(printed, ElementsAre("only"));
  EXPECT_EQ(env.list_requests(), 1);
  EXPECT_LE(env.clock().slept(), milliseconds(1000));  // stopped at the first check past 1 s
}

TEST_F(FollowLog, NeverPollsFasterThanTheReadQuota) {
  FollowOptions options;
  options.poll_interval = milliseconds(500);
  // 6 reads a minute: the limiter allows a burst of 1 and refills 5 a minute, one every 12 s.
  follow(3, {}, {}, options, /*reads_per_minute=*/6);
  EXPECT_GE(env.clock().slept(), seconds(24));
  // Only the follow loop waited (in interruptible steps); the limiter never had to block.
  EXPECT_LT(env.clock().slept(), milliseconds(24'100));
}

TEST_F(FollowLog, PollsAtTheRequestedIntervalWhenTheQuotaAllowsIt) {
  FollowOptions options;
  options.poll_interval = milliseconds(2500);
  follow(4, {}, {}, options);
  EXPECT_EQ(env.clock().slept(), milliseconds(7500));
}

// Issue 11: on a quiet dense log (3500 lines within the 5 s lookback) a poll that finds nothing
// new is one request, not a re-read of every page of the lookback.
TEST_F(FollowLog, AQuietPollOfADenseLogIsOneRequest) {
  std::vector<json> dense;
  for (int i = 0; i < 3'500; ++i) dense.push_back(line(i * kMs, "line " + std::to_string(i)));
  env.write(dense);
  env.clock().advance(seconds(10));  // the log has been quiet for longer than the delay
  FollowOptions options;
  options.poll_interval = milliseconds(2500);
  // The first poll reads the 4 pages; then 4 quiet polls of one request each.
  follow(8, {}, {}, options);
  EXPECT_EQ(printed.size(), 3'500u);
  EXPECT_EQ(env.clock().slept(), milliseconds(4 * 2500));
  const auto requests = env.http().list_requests();
  ASSERT_EQ(requests.size(), 8u);
  EXPECT_THAT(requests[7]["filter"].get<std::string>(),
              HasSubstr(R"(receiveTimestamp>="2026-04-13T08:00:15.000000000Z")"));
}

TEST_F(FollowLog, NeedsAStopCondition) {
  CloudLogRetriever retriever = env.retriever();
  EXPECT_THROW(retriever.follow_log(env.cluster(place), place.workload, place.namespace_, 0, {}, {},
                                    FollowOptions{}, [](const std::string&) {}),
               std::invalid_argument);
  EXPECT_EQ(env.list_requests(), 0);
}

}  // namespace
}  // namespace falcon
