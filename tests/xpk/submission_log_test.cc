// The submission record file (workload/submission_log.h), read and written directly.
#include "workload/submission_log.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "falcon/errors.h"
#include "support/temp_dir.h"

namespace falcon {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

SubmissionRecord record(const std::string& workload, const std::string& accelerator) {
  return SubmissionRecord{.cluster = "tpu-v4-prod",
                          .workload = workload,
                          .namespace_ = "default",
                          .accelerator_type = accelerator,
                          .device_class = "tpu",
                          .submitted_at = "2026-04-13T08:00:00.000Z",
                          .cluster_id = "tpu-v4-cluster",
                          .project = "primatrix-tpu",
                          .zone = "us-central2-b",
                          .docker_image = "gcr.io/p/img:1",
                          .priority = "medium"};
}

TEST(SubmissionLog, RoundTripsEveryFieldAsOneJsonLine) {
  const auto r = record("llama", "tpu-v4-64");
  const std::string line = submission_to_json_line(r);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_THAT(line, HasSubstr("\"v\":1"));
  EXPECT_EQ(submission_from_json_line(line), r);
  EXPECT_EQ(submission_from_json_line("{\"cluster\":\"c\"}"), std::nullopt);  // incomplete
  EXPECT_EQ(submission_from_json_line("not json"), std::nullopt);
}

TEST(SubmissionLog, AppendsCreatesPrivateFilesAndTheLastRecordWins) {
  falcon::testing::TempDir tmp;
  const SubmissionLog log(tmp.path() / "state" / "submissions.jsonl");
  EXPECT_THAT(log.read_all(), IsEmpty());  // no file yet
  log.append(record("llama", "tpu-v4-64"));
  log.append(record("other", "tpu-v4-64"));
  log.append(record("llama", "tpu-v4-128"));
  EXPECT_THAT(log.read_all(), SizeIs(3));
  EXPECT_EQ(log.find("tpu-v4-prod", "llama")->accelerator_type, "tpu-v4-128");
  EXPECT_EQ(log.find("elsewhere", "llama"), std::nullopt);
  EXPECT_EQ(std::filesystem::status(log.path()).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}

TEST(SubmissionLog, ReadsLinesLongerThanItsReadBufferAndSkipsDamagedOnes) {
  falcon::testing::TempDir tmp;
  const SubmissionLog log(tmp.path() / "submissions.jsonl");
  auto big = record("big", "tpu-v4-64");
  big.docker_image = "gcr.io/p/" + std::string(200'000, 'x');
  log.append(big);
  {
    std::ofstream out(log.path(), std::ios::app);
    out << "\n{\"v\":1,\"cluster\":\"tpu-v4-prod\",\"workl\n";  // damaged, then an empty line
  }
  log.append(record("after", "tpu-v4-64"));
  const auto all = log.read_all();
  ASSERT_THAT(all, SizeIs(2));
  EXPECT_EQ(all[0].docker_image, big.docker_image);
  EXPECT_EQ(all[1].workload, "after");
}

TEST(SubmissionLog, AnUnreadableFileThrowsFromReadAllButNotFromFind) {
  falcon::testing::TempDir tmp;
  const SubmissionLog log(tmp.path() / "submissions.jsonl");
  std::filesystem::create_directories(log.path());  // a directory in the way
  EXPECT_THROW(log.read_all(), FalconError);
  EXPECT_EQ(log.find("tpu-v4-prod", "llama"), std::nullopt);
  try {
    log.append(record("llama", "tpu-v4-64"));
    FAIL() << "expected FalconError";
  } catch (const FalconError& e) {
    EXPECT_THAT(e.what(), HasSubstr(log.path().string()));
  }
}

}  // namespace
}  // namespace falcon
