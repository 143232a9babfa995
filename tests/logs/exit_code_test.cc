// CloudLogRetriever::failure_exit_code against the local Cloud Logging server: the EXIT_CODE line
// that xpk's container script prints (reference xpk.md section 4.2), found in one request over
// every slice and worker, the failure's own code preferred to the 143 of the workers JobSet
// stopped, other workloads' lines ignored. Spec acceptance: XpkWorkloadManager / 查询状态 (the
// exit_code of WorkloadStatus).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "falcon/errors.h"
#include "falcon/log_retriever.h"
#include "logs/gke_log_env.h"

namespace falcon {
namespace {

using falcon::testing::gke_entry;
using falcon::testing::GkePlace;
using falcon::testing::kLogStartNanos;
using falcon::testing::LogServerEnv;
using falcon::testing::PodLabels;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::int64_t kMs = 1'000'000;

struct FailureExitCode : ::testing::Test {
  LogServerEnv env;
  GkePlace place;
  CloudLogRetriever retriever = env.retriever();

  json line(int slice, int worker, std::int64_t ms, const std::string& text,
            PodLabels labels = PodLabels::kGke, const GkePlace* at = nullptr) {
    return gke_entry(at ? *at : place, {.slice = slice,
                                        .worker = worker,
                                        .timestamp_nanos = kLogStartNanos + ms * kMs,
                                        .text = text,
                                        .labels = labels});
  }
  std::optional<int> code() {
    return retriever.failure_exit_code(env.cluster(place), place.workload, place.namespace_);
  }
};

TEST_F(FailureExitCode, TheFailingWorkersCodeOfAnySliceNotThe143OfTheStoppedOnes) {
  GkePlace other = place;
  other.workload = "llama-bench-2";  // its pods' names start with "llama-bench-2-slice-job-"
  env.write({
      line(0, 0, 0, "XPK Start: Mon Apr 13 07:00:00 UTC 2026\n"),
      line(0, 0, 10, "EXIT_CODE=143\n"),  // stopped first, before the failure's line arrived
      line(0, 1, 11, "EXIT_CODE=0\n"),
      line(1, 2, 20, "RuntimeError: out of HBM\n"),
      line(1, 2, 21, "EXIT_CODE=3\n", PodLabels::kNone),  // only the pod name says whose
      line(1, 3, 22, "EXIT_CODE=143\n"),
      line(0, 0, 5, "EXIT_CODE=9\n", PodLabels::kGke, &other),
      line(0, 1, 30, "the script printed EXIT_CODE=4 in a sentence\n"),
  });
  EXPECT_EQ(code(), 3);
  EXPECT_EQ(env.list_requests(), 1);
  const json request = env.http().list_requests().back();
  EXPECT_EQ(request["orderBy"], "timestamp asc");
  EXPECT_THAT(request["filter"].get<std::string>(),
              HasSubstr(R"(textPayload=~"^EXIT_CODE=[1-9]")"));
  EXPECT_THAT(request["filter"].get<std::string>(), Not(HasSubstr("job-index\"=")));
}

TEST_F(FailureExitCode, OnlyTerminationsGiveTheFirstOfThem) {
  env.write({line(0, 1, 1, "EXIT_CODE=137"), line(0, 0, 2, "EXIT_CODE=143")});
  EXPECT_EQ(code(), 137);
}

TEST_F(FailureExitCode, NoNonZeroLineIsNullopt) {
  env.write({line(0, 0, 1, "EXIT_CODE=0\n"), line(0, 1, 2, "step 3 loss=1.0\n")});
  EXPECT_EQ(code(), std::nullopt);
}

TEST_F(FailureExitCode, LinesBeforeTheWindowDoNotCount) {
  env.write({line(0, 0, 0, "EXIT_CODE=2\n")});
  LogQueryOptions later;
  later.not_before = "2026-04-13T07:00:01Z";
  EXPECT_EQ(
      retriever.failure_exit_code(env.cluster(place), place.workload, place.namespace_, later),
      std::nullopt);
}

TEST_F(FailureExitCode, ARefusedReadIsALogRetrievalErrorAfterTwoAttemptsAtMost) {
  env.server().faults().add({.route = "logging.list", .times = 5, .status = 503});
  EXPECT_THROW(code(), LogRetrievalError);
  EXPECT_EQ(env.list_requests(), 2);
}

}  // namespace
}  // namespace falcon
