// CloudLogRetriever::stream_log against the local Cloud Logging server with realistic GKE
// entries: the spec's acceptance rows (rank 0, grep, tail, since, pod/rank discovery, API
// failure) and DESIGN D5 (one-request tails, lazy paging, quoting, multi-slice, the window).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "falcon/errors.h"
#include "falcon/log_retriever.h"
#include "logs/gke_log_env.h"

namespace falcon {
namespace {

using falcon::testing::EntrySpec;
using falcon::testing::gke_entry;
using falcon::testing::GkePlace;
using falcon::testing::kLogStartNanos;
using falcon::testing::LogServerEnv;
using falcon::testing::PodLabels;
using falcon::testing::read_all;
using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr std::int64_t kMs = 1'000'000;

struct StreamLog : ::testing::Test {
  LogServerEnv env;
  GkePlace place;
  CloudLogRetriever retriever = env.retriever();

  // `count` lines of (slice, worker), one every millisecond from `start`.
  std::vector<json> lines_of(int slice, int worker, int count, std::int64_t start = kLogStartNanos,
                             PodLabels labels = PodLabels::kGke, const GkePlace* at = nullptr) {
    std::vector<json> out;
    for (int i = 0; i < count; ++i) {
      out.push_back(
          gke_entry(at ? *at : place, {.slice = slice,
                                       .worker = worker,
                                       .timestamp_nanos = start + i * kMs,
                                       .text = fmt::format("s{}w{} line {}\n", slice, worker, i),
                                       .labels = labels,
                                       .stderr_stream = i % 7 == 3}));
    }
    return out;
  }

  // The same lines as lines_of(slice, worker, count), all on stdout, written in bulk.
  void write_many(int slice, int worker, int count) {
    std::vector<fake::LogLine> lines;
    lines.reserve(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) {
      lines.push_back(
          {kLogStartNanos + i * kMs, fmt::format("s{}w{} line {}\n", slice, worker, i)});
    }
    env.write_text_lines(place, slice, worker, std::move(lines));
  }

  static std::vector<std::string> expected_lines(int slice, int worker, int from, int to) {
    std::vector<std::string> out;
    for (int i = from; i < to; ++i) out.push_back(fmt::format("s{}w{} line {}", slice, worker, i));
    return out;
  }

  std::vector<std::string> stream(int rank, const LogFilter& filter = {},
                                  const LogQueryOptions& options = {}) {
    return read_all(retriever.stream_log(env.cluster(place), place.workload, place.namespace_, rank,
                                         filter, options));
  }
};

TEST_F(StreamLog, YieldsOnlyRankZerosLinesInOrder) {
  for (int worker = 0; worker < 4; ++worker)
    env.write(lines_of(0, worker, 50, kLogStartNanos + worker));
  // Neighbours that must not leak in: another workload, namespace, cluster, slice.
  GkePlace other = place;
  other.workload = "mistral-bench";
  env.write(lines_of(0, 0, 10, kLogStartNanos, PodLabels::kGke, &other));
  other = place;
  other.namespace_ = "team-b";
  env.write(lines_of(0, 0, 10, kLogStartNanos, PodLabels::kGke, &other));
  other = place;
  other.cluster_id = "gpu-cluster";
  env.write(lines_of(0, 0, 10, kLogStartNanos, PodLabels::kGke, &other));
  env.write(lines_of(1, 0, 10));

  EXPECT_EQ(stream(0), expected_lines(0, 0, 0, 50));
  EXPECT_EQ(env.list_requests(), 1);
  const auto requests = env.http().list_requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0]["resourceNames"], json({"projects/falcon-bench"}));
  EXPECT_EQ(requests[0]["orderBy"], "timestamp asc");
  EXPECT_EQ(requests[0]["pageSize"], 1000);
}

TEST_F(StreamLog, LinesComeFromTextOrJsonPayloads) {
  env.write({gke_entry(place, {.timestamp_nanos = kLogStartNanos, .text = "plain\n"}),
             gke_entry(place, {.timestamp_nanos = kLogStartNanos + kMs,
                               .text = "structured",
                               .json_payload = true})});
  EXPECT_THAT(stream(0), ElementsAre("plain", "structured"));
}

TEST_F(StreamLog, GrepIsAppliedByTheServer) {
  std::vector<json> entries;
  for (int i = 0; i < 300; ++i) {
    const std::string text = i % 10 == 0 ? fmt::format("step {} step_time=0.{}s", i, i)
                                         : fmt::format("step {} loss=1.{}", i, i);
    entries.push_back(
        gke_entry(place, {.timestamp_nanos = kLogStartNanos + i * kMs, .text = text}));
  }
  env.write(entries);
  LogFilter filter;
  filter.grep = "step_time";
  const auto lines = stream(0, filter);
  ASSERT_EQ(lines.size(), 30u);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i], fmt::format("step {} step_time=0.{}s", i * 10, i * 10));
  }
  // The server got the expression and sent back only matching entries.
  const auto requests = env.http().list_requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_THAT(requests[0]["filter"].get<std::string>(), HasSubstr("\nAND (\nstep_time\n)"));
  EXPECT_EQ(env.http().entries_received(), 30u);
}

TEST_F(StreamLog, TailOf100From50000LinesIsOneRequest) {
  write_many(0, 0, 50'000);
  write_many(0, 1, 500);
  LogFilter filter;
  filter.tail_lines = 100;
  EXPECT_EQ(stream(0, filter), expected_lines(0, 0, 49'900, 50'000));
  EXPECT_EQ(env.list_requests(), 1);
  const auto requests = env.http().list_requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0]["orderBy"], "timestamp desc");
  EXPECT_EQ(requests[0]["pageSize"], 100);
  EXPECT_EQ(env.http().entries_received(), 100u);
}

TEST_F(StreamLog, TailLongerThanAPageReadsNewestPagesOnly) {
  write_many(0, 0, 5'000);
  LogFilter filter;
  filter.tail_lines = 2'500;
  EXPECT_EQ(stream(0, filter), expected_lines(0, 0, 2'500, 5'000));
  EXPECT_EQ(env.list_requests(), 3);
  filter.tail_lines = 0;
  EXPECT_TRUE(stream(0, filter).empty());
  EXPECT_EQ(env.list_requests(), 3);
  filter.tail_lines = 9'000;  // more than there is
  EXPECT_EQ(stream(0, filter), expected_lines(0, 0, 0, 5'000));
}

TEST_F(StreamLog, SinceDropsEarlierLines) {
  // 2026-04-12T23:59:59.998Z onwards, a line every millisecond.
  const std::int64_t midnight = 1776038400LL * 1'000'000'000;
  env.write(lines_of(0, 0, 6, midnight - 2 * kMs));
  LogFilter filter;
  filter.since = "2026-04-13T00:00:00Z";
  EXPECT_EQ(stream(0, filter), expected_lines(0, 0, 2, 6));
  filter.since = "2026-04-13T02:00:00.002+02:00";  // the same instant as midnight + 2 ms
  EXPECT_EQ(stream(0, filter), expected_lines(0, 0, 4, 6));
  EXPECT_THAT(env.http().list_requests()[0]["filter"].get<std::string>(),
              HasSubstr(R"(timestamp>="2026-04-13T00:00:00.000000000Z")"));
}

TEST_F(StreamLog, WithoutSinceTheWindowIsNotBeforeElseTheLast24Hours) {
  const std::int64_t now = 1776067200LL * 1'000'000'000;  // the fake clock
  const std::int64_t day = 86'400LL * 1'000'000'000;
  env.write({gke_entry(place, {.timestamp_nanos = now - day - kMs, .text = "too old"}),
             gke_entry(place, {.timestamp_nanos = now - day + kMs, .text = "yesterday"}),
             gke_entry(place, {.timestamp_nanos = now - 5 * kMs, .text = "just now"})});
  EXPECT_THAT(stream(0), ElementsAre("yesterday", "just now"));
  LogQueryOptions options;
  options.not_before = format_rfc3339_nanos(now - 10 * kMs);
  EXPECT_THAT(stream(0, {}, options), ElementsAre("just now"));
}

TEST_F(StreamLog, PagesAreFetchedOnlyAsTheCallerReads) {
  write_many(0, 0, 10'000);
  {
    LogLines lines =
        retriever.stream_log(env.cluster(place), place.workload, place.namespace_, 0, {});
    EXPECT_EQ(env.list_requests(), 0);  // nothing before the first read
    int read = 0;
    for (const std::string& line : lines) {
      EXPECT_EQ(line, fmt::format("s0w0 line {}", read));
      if (++read == 5) break;
    }
    EXPECT_EQ(env.list_requests(), 1);
  }
  EXPECT_EQ(env.list_requests(), 1);  // and nothing after the caller stopped

  LogLines lines =
      retriever.stream_log(env.cluster(place), place.workload, place.namespace_, 0, {});
  for (int i = 0; i < 1'000; ++i) ASSERT_TRUE(lines.next());
  EXPECT_EQ(env.list_requests(), 2);
  EXPECT_EQ(lines.next(), "s0w0 line 1000");
  EXPECT_EQ(env.list_requests(), 3);
}

TEST_F(StreamLog, FindsRanksByPodNameWhenPodLabelsAreMissing) {
  env.write(lines_of(0, 1, 3, kLogStartNanos, PodLabels::kNone));
  env.write(lines_of(0, 1, 3, kLogStartNanos + 3 * kMs, PodLabels::kDotted));
  env.write(lines_of(0, 1, 3, kLogStartNanos + 6 * kMs, PodLabels::kNoJobset));
  env.write(lines_of(0, 1, 3, kLogStartNanos + 9 * kMs, PodLabels::kGke));
  env.write(lines_of(0, 0, 3, kLogStartNanos, PodLabels::kNone));
  env.write(lines_of(0, 11, 3, kLogStartNanos, PodLabels::kNone));
  // A workload whose name ends with ours: the server's pod-name test is a substring match.
  GkePlace bigger = place;
  bigger.workload = "big-" + place.workload;
  env.write(lines_of(0, 1, 3, kLogStartNanos, PodLabels::kNone, &bigger));
  env.write(lines_of(0, 1, 3, kLogStartNanos, PodLabels::kGke, &bigger));

  const auto lines = stream(1);
  ASSERT_EQ(lines.size(), 12u);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(lines[i], fmt::format("s0w1 line {}", i % 3));
}

TEST_F(StreamLog, RankIsTheWorkerOfTheNamedSlice) {
  for (int slice = 0; slice < 2; ++slice) {
    for (int worker = 0; worker < 2; ++worker) {
      env.write(lines_of(slice, worker, 5, kLogStartNanos + slice * 10 + worker,
                         worker == 1 ? PodLabels::kNone : PodLabels::kGke));
    }
  }
  EXPECT_EQ(stream(1), expected_lines(0, 1, 0, 5));
  LogQueryOptions options;
  options.slice = 1;
  EXPECT_EQ(stream(0, {}, options), expected_lines(1, 0, 0, 5));
  EXPECT_EQ(stream(1, {}, options), expected_lines(1, 1, 0, 5));
}

TEST_F(StreamLog, TransientFailuresAreRetried) {
  env.write(lines_of(0, 0, 1'500));
  env.server().faults().fail_next("logging.list", 503);
  env.server().faults().add(
      {.route = "logging.list", .times = 1, .status = 429, .retry_delay = "7s"});
  EXPECT_EQ(stream(0), expected_lines(0, 0, 0, 1'500));
  EXPECT_EQ(env.list_requests(), 4);
  EXPECT_GE(env.clock().slept(), std::chrono::seconds(7));  // RetryInfo honoured, on the fake clock
}

TEST_F(StreamLog, ApiFailureRaisesLogRetrievalErrorWithStatusAndMessage) {
  env.write(lines_of(0, 0, 10));
  env.server().faults().add(
      {.route = "logging.list",
       .times = 1,
       .status = 403,
       .message =
           "Permission 'logging.logEntries.list' denied on resource (or it may not exist)."});
  try {
    stream(0);
    FAIL() << "expected LogRetrievalError";
  } catch (const LogRetrievalError& e) {
    EXPECT_EQ(e.http_status(), 403);
    EXPECT_EQ(e.status(), "PERMISSION_DENIED");
    EXPECT_THAT(e.what(), HasSubstr("Permission 'logging.logEntries.list' denied"));
  }
  // A grep the server cannot parse is the server's 400, message included.
  LogFilter filter;
  filter.grep = "severity>=";
  try {
    stream(0, filter);
    FAIL() << "expected LogRetrievalError";
  } catch (const LogRetrievalError& e) {
    EXPECT_EQ(e.http_status(), 400);
    EXPECT_EQ(e.status(), "INVALID_ARGUMENT");
    EXPECT_THAT(e.what(), HasSubstr("entries:list"));
  }
}

TEST_F(StreamLog, HostileWorkloadNamesDoNotAlterTheQuery) {
  env.write(lines_of(0, 0, 20));
  GkePlace other = place;
  other.workload = "mistral-bench";
  env.write(lines_of(0, 0, 20, kLogStartNanos, PodLabels::kNone, &other));
  for (const std::string& name :
       {std::string(R"(llama-bench" OR "x)"), std::string(R"(" OR resource.type:* OR ")"),
        std::string(R"(llama-bench\)"), std::string(R"(x") OR (resource.type="k8s_container)"),
        std::string(R"(\" OR labels.x:* OR \")")}) {
    const auto before = env.list_requests();
    LogLines lines = retriever.stream_log(env.cluster(place), name, place.namespace_, 0, {});
    EXPECT_FALSE(lines.next()) << name;
    EXPECT_EQ(env.list_requests(), before + 1) << name;  // the server accepted the filter
    LogLines in_namespace = retriever.stream_log(env.cluster(place), place.workload, name, 0, {});
    EXPECT_FALSE(in_namespace.next()) << name;
  }
  // The hostile name's own entries are still found: the value reached the server intact.
  GkePlace hostile = place;
  hostile.workload = R"(q" OR "x\)";
  env.write(lines_of(0, 0, 2, kLogStartNanos, PodLabels::kGke, &hostile));
  EXPECT_EQ(
      read_all(retriever.stream_log(env.cluster(place), hostile.workload, place.namespace_, 0, {})),
      expected_lines(0, 0, 0, 2));
}

TEST_F(StreamLog, ArgumentsThatCannotMakeAQueryFailBeforeAnyRequest) {
  const auto expect_invalid = [&](auto&& call) {
    try {
      call();
      ADD_FAILURE() << "expected LogRetrievalError";
    } catch (const LogRetrievalError& e) {
      EXPECT_EQ(e.status(), "INVALID_ARGUMENT") << e.what();
    }
  };
  const ClusterConfig cluster = env.cluster(place);
  expect_invalid([&] { retriever.stream_log(cluster, place.workload, "ns\nx", 0, {}); });
  expect_invalid([&] { retriever.stream_log(cluster, place.workload, place.namespace_, -1, {}); });
  expect_invalid([&] { retriever.stream_log(cluster, "", place.namespace_, 0, {}); });
  LogFilter filter;
  filter.since = "last tuesday";
  expect_invalid(
      [&] { retriever.stream_log(cluster, place.workload, place.namespace_, 0, filter); });
  filter = {};
  filter.grep = "a) OR (b";
  expect_invalid(
      [&] { retriever.stream_log(cluster, place.workload, place.namespace_, 0, filter); });
  filter = {};
  filter.tail_lines = -5;
  expect_invalid(
      [&] { retriever.stream_log(cluster, place.workload, place.namespace_, 0, filter); });
  filter.tail_lines = kMaxTailLines + 1;  // issue 11: the documented cap
  expect_invalid(
      [&] { retriever.stream_log(cluster, place.workload, place.namespace_, 0, filter); });
  EXPECT_EQ(env.list_requests(), 0);
}

}  // namespace
}  // namespace falcon
