// The text a failed xpk run turns into: exit code, stderr and xpk's own error lines.
#include "xpk/failure_text.h"

#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "xpk/xpk_outputs.h"

namespace falcon::xpk {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

CommandResult failed(int code, std::string out, std::string err) {
  CommandResult r;
  r.exit_code = code;
  r.stdout_text = std::move(out);
  r.stderr_text = std::move(err);
  return r;
}

TEST(FailureText, ListFailureCarriesExitCodeXpkErrorLinesAndTheDecodedBytesRepr) {
  const auto text = describe_failure(failed(1, falcon::testing::kListFailureStdout, ""));
  EXPECT_EQ(text.summary, "exit code 1");
  EXPECT_THAT(text.details,
              HasSubstr("error: the server doesn't have a resource type \"workloads\""));
  EXPECT_THAT(text.details, HasSubstr("[XPK] List Job request returned ERROR 1"));
  EXPECT_THAT(text.details, HasSubstr("[XPK] XPK failed, error code 1"));
  EXPECT_THAT(text.details,
              HasSubstr("[XPK] Task List Jobs with filter-by-status=EVERYTHING failed with 1"));
  // Progress and command-echo lines are noise.
  EXPECT_THAT(text.details, Not(HasSubstr("Starting xpk")));
  EXPECT_THAT(text.details, Not(HasSubstr("is implemented by")));
  EXPECT_THAT(text.full(), StartsWith("exit code 1: "));
}

TEST(FailureText, DeleteNotFoundCarriesKubectlStderrFirst) {
  const auto text = describe_failure(
      failed(1, falcon::testing::kDeleteNotFoundStdout, falcon::testing::kDeleteNotFoundStderr));
  EXPECT_THAT(
      text.details,
      StartsWith("Error from server (NotFound): jobsets.jobset.x-k8s.io \"ghost\" not found"));
  EXPECT_THAT(text.details, HasSubstr("[XPK] Task: `Delete Workload` terminated with code `1`"));
  EXPECT_THAT(text.details, HasSubstr("[XPK] Delete Workload request returned ERROR 1"));
}

TEST(FailureText, KeepsOnlyTheTailOfALongTraceback) {
  std::string err = "Traceback (most recent call last):\n";
  for (int i = 0; i < 200; ++i)
    err += "  File \"/usr/lib/python3/xpk/x.py\", line " + std::to_string(i) + "\n";
  err += "EOFError: EOF when reading a line\n";
  const auto text = describe_failure(failed(1, "", err));
  EXPECT_THAT(text.details, HasSubstr("EOFError: EOF when reading a line"));
  EXPECT_THAT(text.details, Not(HasSubstr("Traceback")));
  EXPECT_LE(text.details.size(), 2100u);
}

TEST(FailureText, SummarisesTimeoutsAndSignals) {
  CommandResult timeout;
  timeout.timed_out = true;
  timeout.term_signal = SIGTERM;
  timeout.elapsed = std::chrono::milliseconds(15'000);
  EXPECT_EQ(describe_failure(timeout).summary, "timed out after 15.0s");

  CommandResult killed;
  killed.term_signal = SIGKILL;
  EXPECT_EQ(describe_failure(killed).summary, "killed by signal 9 (SIGKILL)");
  EXPECT_EQ(describe_failure(killed).full(), "killed by signal 9 (SIGKILL)");
}

TEST(FailureText, NotesTruncatedOutput) {
  auto r = failed(2, "", "usage: xpk ...\n");
  r.stdout_truncated = true;
  EXPECT_THAT(describe_failure(r).details, HasSubstr("(stdout truncated)"));
}

TEST(FailureText, ArgparseErrorsComeFromStderr) {
  const auto text = describe_failure(failed(
      2, "",
      "usage: xpk workload create [-h] ...\nxpk workload create: error: argument --workload: Name "
      "must be less than 40 characters and match the pattern `[a-z]([-a-z0-9]*[a-z0-9])?`\n"));
  EXPECT_EQ(text.summary, "exit code 2");
  EXPECT_THAT(text.details, HasSubstr("argument --workload: Name must be less than 40"));
}

TEST(DecodeBytesRepr, DecodesPythonEscapes) {
  EXPECT_EQ(decode_bytes_repr(R"(b'it\'s\n\tdone \\ \x41')"), "it's\n\tdone \\ A");
  EXPECT_EQ(decode_bytes_repr(R"(b"say \"hi\"")"), "say \"hi\"");
  EXPECT_EQ(decode_bytes_repr("not a repr"), "not a repr");
}

}  // namespace
}  // namespace falcon::xpk
