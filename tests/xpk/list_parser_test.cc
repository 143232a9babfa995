// Reading `xpk workload list` in every format reference/xpk.md documents (DESIGN D4).
#include "xpk/list_parser.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "falcon/model.h"
#include "xpk/xpk_outputs.h"

namespace falcon::xpk {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::SizeIs;

std::map<std::string, std::string> states_by_name(const WorkloadList& list) {
  std::map<std::string, std::string> out;
  for (const auto& row : list.rows) out[row.jobset_name] = map_row_state(row);
  return out;
}

TEST(ListParser, ReadsTheV113TableWithRealKueueMessages) {
  const auto list = parse_workload_list(falcon::testing::kListV113);
  ASSERT_TRUE(list.has_value());
  EXPECT_TRUE(list->saw_header);
  EXPECT_EQ(list->xpk_version, "1.13.1");
  ASSERT_THAT(list->rows, SizeIs(8));

  const ListRow& b = list->rows[1];
  EXPECT_EQ(b.jobset_name, "train-b");
  EXPECT_EQ(b.created_time, "2026-06-01T10:05:00Z");
  EXPECT_EQ(b.priority, "low");
  EXPECT_EQ(b.vms_needed, "8");
  EXPECT_EQ(b.vms_running, "<none>");
  EXPECT_EQ(b.vms_done, "<none>");
  EXPECT_EQ(b.status, "QuotaReserved");
  EXPECT_EQ(b.status_message,
            "couldn't assign flavors to pod set slice-job: insufficient unused quota for "
            "google.com/tpu in flavor v5p, 4 more needed");
  EXPECT_EQ(b.status_time, "2026-06-01T10:05:01Z");

  // The last column of the last row is padded in v1.8+; padding is not part of the value.
  EXPECT_EQ(list->rows[7].status_time, "<none>");
  EXPECT_EQ(list->rows[7].status, "<none>");
}

TEST(ListParser, MapsV113RowsToStatesAsReferenceSection15) {
  const auto list = parse_workload_list(falcon::testing::kListV113);
  ASSERT_TRUE(list.has_value());
  EXPECT_EQ(states_by_name(*list), (std::map<std::string, std::string>{
                                       {"train-a", kStateRunning},    // QuotaReserved, VMs 4
                                       {"train-b", kStateQueued},     // pending
                                       {"train-c", kStateCompleted},  // completed successfully
                                       {"train-d", kStateFailed},     // failed ... restarts
                                       {"train-e", kStateRunning},    // Admitted, VMs 4
                                       {"cpu-job", kStateRunning},    // CPU shows 0
                                       {"train-f", kStateQueued},     // Evicted, no VMs
                                       {"train-g", kStateQueued},     // no conditions yet
                                   }));
}

TEST(ListParser, ReadsTheV17TabwriterTableWithTpuVmsHeaders) {
  const auto list = parse_workload_list(falcon::testing::kListV17);
  ASSERT_TRUE(list.has_value());
  EXPECT_EQ(list->xpk_version, "0.14.3");
  ASSERT_THAT(list->rows, SizeIs(5));
  const ListRow& b = list->rows[1];
  EXPECT_EQ(b.jobset_name, "old-b");
  EXPECT_EQ(b.priority, "very-high");
  EXPECT_EQ(b.vms_needed, "4");
  EXPECT_EQ(b.vms_running, "<none>");
  EXPECT_EQ(b.status, "QuotaReserved");
  EXPECT_EQ(b.status_time, "2025-03-01T10:01:00Z");  // last column, unpadded
  EXPECT_EQ(states_by_name(*list), (std::map<std::string, std::string>{
                                       {"old-a", kStateRunning},
                                       {"old-b", kStateQueued},
                                       {"old-c", kStateCompleted},  // JobSet finished successfully
                                       {"old-d", kStateFailed},     // JobSet failed
                                       {"old-e", kStateUnknown},    // PodsReady, no VMs
                                   }));
}

TEST(ListParser, HeaderOnlyMeansNoWorkloads) {
  const auto list = parse_workload_list(falcon::testing::kListHeaderOnly);
  ASSERT_TRUE(list.has_value());
  EXPECT_TRUE(list->saw_header);
  EXPECT_THAT(list->rows, IsEmpty());
}

TEST(ListParser, NoHeaderAfterTheMarkerMeansNoWorkloadsOnOldXpk) {
  const auto list = parse_workload_list(falcon::testing::kListV17Empty);
  ASSERT_TRUE(list.has_value());
  EXPECT_FALSE(list->saw_header);
  EXPECT_THAT(list->rows, IsEmpty());
}

TEST(ListParser, OutputWithNeitherMarkerNorHeaderIsNotAList) {
  EXPECT_FALSE(parse_workload_list("").has_value());
  EXPECT_FALSE(
      parse_workload_list("[XPK] Starting xpk v1.13.1\n[XPK] Exiting XPK cleanly\n").has_value());
  EXPECT_FALSE(parse_workload_list("usage: xpk [-h] {workload,cluster} ...\n").has_value());
}

TEST(ListParser, ReadsATableWithNothingAfterItAndANoneName) {
  const auto list = parse_workload_list(falcon::testing::kListNothingAfter);
  ASSERT_TRUE(list.has_value());
  ASSERT_THAT(list->rows, SizeIs(1));
  EXPECT_EQ(list->rows[0].jobset_name, "<none>");
  EXPECT_EQ(list->rows[0].status_message, "Quota reserved in ClusterQueue cluster-queue");
  EXPECT_EQ(list->rows[0].status_time, "2026-06-01T10:00:02Z");
  EXPECT_EQ(map_row_state(list->rows[0]), kStateQueued);
}

TEST(ListParser, SplitsOnCarriageReturnsAndIgnoresProgressLines) {
  const auto list = parse_workload_list(falcon::testing::kListWithCarriageReturns);
  ASSERT_TRUE(list.has_value());
  ASSERT_THAT(list->rows, SizeIs(1));
  EXPECT_EQ(list->rows[0].jobset_name, "train-x");
  EXPECT_EQ(list->rows[0].status_time, "2026-06-01T10:00:01Z");  // no trailing \r
  EXPECT_EQ(map_row_state(list->rows[0]), kStateRunning);
}

TEST(ListParser, TheTableEndsAtTheNextXpkLine) {
  const std::string out =
      "[XPK] Workload List Output:\n"
      "Jobset Name   Status\n"
      "a             Admitted\n"
      "[XPK] See your workloads in Cloud Console: https://example.invalid\n"
      "b             Admitted\n";
  const auto list = parse_workload_list(out);
  ASSERT_TRUE(list.has_value());
  ASSERT_THAT(list->rows, SizeIs(1));
  EXPECT_EQ(list->rows[0].jobset_name, "a");
  // Columns absent from the header read as <none>.
  EXPECT_EQ(list->rows[0].vms_running, "<none>");
}

TEST(ListParser, IgnoresBytesReprAndStarFramesBeforeTheTable) {
  const std::string out = std::string(falcon::testing::kListFailureStdout) +
                          "[XPK] Workload List Output:\n"
                          "Jobset Name   Status   Status Message   Status Time\n";
  const auto list = parse_workload_list(out);
  ASSERT_TRUE(list.has_value());
  EXPECT_TRUE(list->saw_header);
  EXPECT_THAT(list->rows, IsEmpty());
}

TEST(ListParser, SlicesByCodePointsWhenAMessageHasNonAsciiText) {
  // Both renderers pad by code points; "é" is two bytes.
  const std::string out =
      "[XPK] Workload List Output:\n"
      "Jobset Name   Status     Status Message   Status Time\n"
      "job-1         Finished   réussi           2026-06-01T10:00:00Z\n";
  const auto list = parse_workload_list(out);
  ASSERT_TRUE(list.has_value());
  ASSERT_THAT(list->rows, SizeIs(1));
  EXPECT_EQ(list->rows[0].status_message, "réussi");
  EXPECT_EQ(list->rows[0].status_time, "2026-06-01T10:00:00Z");
}

TEST(ListParser, FallsBackToWideGapsWhenARowDoesNotLineUp) {
  const std::string out =
      "[XPK] Workload List Output:\n"
      "Jobset Name   Status     Status Message   Status Time\n"
      "a-much-longer-name   Finished   jobset completed successfully   2026-06-01T10:00:00Z\n";
  const auto list = parse_workload_list(out);
  ASSERT_TRUE(list.has_value());
  ASSERT_THAT(list->rows, SizeIs(1));
  EXPECT_EQ(list->rows[0].jobset_name, "a-much-longer-name");
  EXPECT_EQ(list->rows[0].status, "Finished");
  EXPECT_EQ(list->rows[0].status_message, "jobset completed successfully");
  EXPECT_EQ(map_row_state(list->rows[0]), kStateCompleted);
}

ListRow row(std::string status, std::string running, std::string message = "") {
  return ListRow{.jobset_name = "w",
                 .vms_running = std::move(running),
                 .status = std::move(status),
                 .status_message = std::move(message)};
}

TEST(StateMapping, FollowsTheReferenceTableFirstMatchWins) {
  EXPECT_EQ(map_row_state(row("Finished", "4",
                              "jobset failed due to one or more job failures "
                              "(first failed job: w-slice-job-1)")),
            kStateFailed);
  EXPECT_EQ(map_row_state(row("Finished", "4",
                              "applying FailJobSet failure policy action (first failed job: "
                              "w-slice-job-0)")),
            kStateFailed);
  EXPECT_EQ(map_row_state(row("Finished", "<none>", "JobSet Failed")), kStateFailed);
  EXPECT_EQ(map_row_state(row("Finished", "4", "jobset completed successfully")), kStateCompleted);
  EXPECT_EQ(map_row_state(row("Finished", "4", "JobSet finished successfully")), kStateCompleted);
  for (const char* status : {"QuotaReserved", "Admitted", "Unknown", "PodsReady", "Evicted"}) {
    EXPECT_EQ(map_row_state(row(status, "2")), kStateRunning) << status;
    EXPECT_EQ(map_row_state(row(status, "0")), kStateRunning) << status;
  }
  for (const char* status :
       {"QuotaReserved", "Admitted", "Evicted", "Unknown", "Requeued", "Preempted", "<none>"}) {
    EXPECT_EQ(map_row_state(row(status, "<none>")), kStateQueued) << status;
  }
  EXPECT_EQ(map_row_state(row("PodsReady", "<none>")), kStateUnknown);
  EXPECT_EQ(map_row_state(row("DeactivationTarget", "<none>")), kStateUnknown);
  EXPECT_EQ(map_row_state(row("Admitted", "n/a")), kStateUnknown);
}

TEST(SplitOutputLines, SplitsOnNewlinesAndCarriageReturnsDroppingEmptyLines) {
  EXPECT_THAT(split_output_lines("a\r\nb\rc\n\nd"), ElementsAre("a", "b", "c", "d"));
  EXPECT_THAT(split_output_lines(""), IsEmpty());
}

}  // namespace
}  // namespace falcon::xpk
