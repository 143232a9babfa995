// The pieces of xpk's output fleet-xpk reproduces: the list table in the v1.9+ and <= v1.7
// styles, xpk's own status filters with their quirks, and Python's bytes repr.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "fleet/xpk_output.h"

namespace falcon::fleet {
namespace {

using ::testing::HasSubstr;

WorkloadRow row(std::string name, std::string created, std::string priority,
                std::optional<int> needed, std::optional<int> running, std::optional<int> done,
                std::string status, std::string message, std::string time) {
  WorkloadRow r;
  r.name = std::move(name);
  r.created = std::move(created);
  r.priority = std::move(priority);
  r.vms_needed = needed;
  r.vms_running = running;
  r.vms_done = done;
  r.status = std::move(status);
  r.message = std::move(message);
  r.status_time = std::move(time);
  return r;
}

// The four rows of reference/xpk.md §1.3.
std::vector<WorkloadRow> reference_rows() {
  return {
      row("train-a", "2026-06-01T10:00:00Z", "medium", 4, 4, std::nullopt, "QuotaReserved",
          "Quota reserved in ClusterQueue cluster-queue", "2026-06-01T10:00:02Z"),
      row("train-b", "2026-06-01T10:05:00Z", "low", 8, std::nullopt, std::nullopt, "QuotaReserved",
          "couldn't assign flavors to pod set slice-job: insufficient unused quota ...",
          "2026-06-01T10:05:01Z"),
      row("train-c", "2026-06-01T09:00:00Z", "high", 4, 4, 4, "Finished",
          "jobset completed successfully", "2026-06-01T09:30:00Z"),
      row("train-d", "2026-06-01T09:10:00Z", "medium", 4, 4, std::nullopt, "Finished",
          "jobset failed due to reaching max number of restarts (first failed job: "
          "train-d-slice-job-0)",
          "2026-06-01T09:40:00Z"),
  };
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string rstrip(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

TEST(XpkTable, V19MatchesXpksRenderingOfTheReferenceExample) {
  const std::string table = render_workload_table(reference_rows(), TableStyle::kV19);
  // Verbatim from reference/xpk.md (whose editor dropped the trailing padding).
  const std::vector<std::string> expected = {
      "Jobset Name   Created Time           Priority   TPU/GPU VMs Needed   TPU/GPU VMs "
      "Running/Ran   TPU/GPU VMs Done   Status          Status Message                          "
      "                                                       Status Time",
      "train-a       2026-06-01T10:00:00Z   medium     4                    4                   "
      "      <none>             QuotaReserved   Quota reserved in ClusterQueue cluster-queue    "
      "                                               2026-06-01T10:00:02Z",
      "train-b       2026-06-01T10:05:00Z   low        8                    <none>              "
      "      <none>             QuotaReserved   couldn't assign flavors to pod set slice-job: "
      "insufficient unused quota ...                    2026-06-01T10:05:01Z",
      "train-c       2026-06-01T09:00:00Z   high       4                    4                   "
      "      4                  Finished        jobset completed successfully                   "
      "                                               2026-06-01T09:30:00Z",
      "train-d       2026-06-01T09:10:00Z   medium     4                    4                   "
      "      <none>             Finished        jobset failed due to reaching max number of "
      "restarts (first failed job: train-d-slice-job-0)   2026-06-01T09:40:00Z",
  };
  const auto lines = split_lines(table);
  ASSERT_EQ(lines.size(), expected.size());
  for (std::size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(rstrip(lines[i]), expected[i]) << i;
  // '{:<w}' pads the last column too (the header's "Status Time" is narrower than the
  // times), so every line is as long as the widest; the table has no trailing newline.
  for (const auto& line : lines) EXPECT_EQ(line.size(), lines[4].size());
  EXPECT_EQ(lines[0].substr(lines[0].size() - 9), "         ");
  EXPECT_EQ(table.back(), 'Z');
}

TEST(XpkTable, V19EmptyListIsTheHeaderOnly) {
  EXPECT_EQ(
      render_workload_table({}, TableStyle::kV19),
      "Jobset Name   Created Time   Priority   TPU/GPU VMs Needed   TPU/GPU VMs Running/Ran   "
      "TPU/GPU VMs Done   Status   Status Message   Status Time");
}

TEST(XpkTable, V17IsKubectlsTabwriter) {
  const std::vector<WorkloadRow> rows = {reference_rows()[0], reference_rows()[1]};
  const std::string table = render_workload_table(rows, TableStyle::kV17);
  const auto lines = split_lines(table);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(table.back(), '\n');
  EXPECT_EQ(lines[0],
            "Jobset Name   Created Time           Priority   TPU VMs Needed   TPU VMs Running"
            "/Ran   TPU VMs Done   Status          Status Message                                  "
            "                              Status Time");
  // Narrow columns are at least tabwriter's minwidth (10) wide; the last column is unpadded.
  EXPECT_EQ(lines[1].substr(0, 14), "train-a       ");
  EXPECT_EQ(lines[1].substr(37, 11), "medium     ");
  EXPECT_EQ(lines[2].substr(lines[2].size() - 20), "2026-06-01T10:05:01Z");
  EXPECT_EQ(render_workload_table({}, TableStyle::kV17), "");  // kubectl prints nothing at all

  WorkloadRow tiny = row("a", "t", "low", 1, 1, 1, "Done", "m", "x");
  EXPECT_EQ(split_lines(render_workload_table({tiny}, TableStyle::kV17))[1],
            "a             t              low        1                1            "
            "         1              Done      m                x");
}

TEST(XpkFilters, StatusFiltersKeepXpksQuirks) {
  const auto rows = reference_rows();
  WorkloadRow admitted = rows[0];
  admitted.status = "Admitted";
  EXPECT_FALSE(matches_status_filter(rows[0], "RUNNING"));  // QuotaReserved with a count
  EXPECT_TRUE(matches_status_filter(admitted, "RUNNING"));
  EXPECT_TRUE(matches_status_filter(rows[1], "QUEUED"));
  EXPECT_FALSE(matches_status_filter(rows[0], "QUEUED"));
  EXPECT_TRUE(matches_status_filter(rows[2], "FINISHED"));
  EXPECT_FALSE(matches_status_filter(rows[2], "SUCCESSFUL"));  // "completed", not "finished"
  EXPECT_TRUE(matches_status_filter(rows[3], "FAILED"));
  EXPECT_FALSE(matches_status_filter(rows[2], "FAILED"));
  for (const auto& r : rows) EXPECT_TRUE(matches_status_filter(r, "EVERYTHING"));
}

TEST(XpkFilters, JobFilterIsASubstringFromV18AndARegexBefore) {
  const WorkloadRow r = reference_rows()[0];  // train-a
  EXPECT_TRUE(matches_job_filter(r, "rain", true));
  EXPECT_FALSE(matches_job_filter(r, "^train", true));
  EXPECT_TRUE(matches_job_filter(r, "^train-[a-z]$", false));
  EXPECT_FALSE(matches_job_filter(r, "^rain", false));
  EXPECT_FALSE(matches_job_filter(r, "(", false));  // invalid regex: nothing
}

TEST(PythonBytesRepr, EscapesLikePython) {
  EXPECT_EQ(python_bytes_repr("error: x\n"), "b'error: x\\n'");
  EXPECT_EQ(python_bytes_repr("doesn't\n"), "b\"doesn't\\n\"");
  EXPECT_EQ(python_bytes_repr("both ' and \"\n"), "b'both \\' and \"\\n'");
  EXPECT_EQ(python_bytes_repr("tab\tcr\r\\ \x01\xff"), "b'tab\\tcr\\r\\\\ \\x01\\xff'");
  EXPECT_THAT(captured_failure("List Jobs", 1, "boom\n"),
              HasSubstr("[XPK] Task List Jobs failed with 1\n[XPK] " + std::string(80, '*') +
                        "\n[XPK] b'boom\\n'\n"));
}

}  // namespace
}  // namespace falcon::fleet
