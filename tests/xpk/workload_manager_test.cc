// XpkWorkloadManager: the spec's acceptance rows (测试验收标准 4. XpkWorkloadManager), the
// validation and namespace rules of DESIGN D3, the submission record, and warm-up.
#include "falcon/workload_manager.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <nlohmann/json.hpp>

#include "falcon/errors.h"
#include "falcon/values.h"
#include "support/fake_clock.h"
#include "support/fake_command_runner.h"
#include "support/temp_dir.h"
#include "xpk/xpk_cli.h"
#include "xpk/xpk_outputs.h"

namespace falcon {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using testing::FakeClock;
using testing::FakeCommandRunner;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::SizeIs;

ClusterConfig tpu_cluster() {
  ClusterConfig c;
  c.name = "tpu-v4-prod";
  c.provider = "gke";
  c.project = "primatrix-tpu";
  c.zone = "us-central2-b";
  c.cluster_id = "tpu-v4-cluster";
  c.accelerator_slots = {{"tpu-v4-64", DeviceClass::kTpu, 1}, {"tpu-v4-128", DeviceClass::kTpu, 1}};
  c.default_namespace = "default";
  return c;
}

ClusterConfig gpu_cluster() {
  ClusterConfig c;
  c.name = "gpu-a100";
  c.provider = "gke";
  c.project = "primatrix-gpu";
  c.zone = "us-central1-a";
  c.cluster_id = "gpu-cluster";
  c.accelerator_slots = {{"a100-40gb-8", DeviceClass::kGpu, 1},
                         {"n2-standard-32-4", DeviceClass::kCpu, 2}};
  c.default_namespace = "benchmark";
  return c;
}

// The --help answer is remembered by the xpk adapter (XpkCli); the binary names below only
// make the tests' intent visible.
std::string unique_binary(const std::string& stem) { return stem; }

// The KUBECONFIG of an xpk call: a private file of that call in the runtime directory
// (<runtime>/<pid>-<n>/config), gone once the call returned.
void expect_private_kubeconfig(const CommandSpec& call, const std::filesystem::path& runtime) {
  const std::filesystem::path kubeconfig = call.env.at("KUBECONFIG");
  EXPECT_EQ(kubeconfig.filename(), "config");
  EXPECT_EQ(kubeconfig.parent_path().parent_path(), runtime);
  EXPECT_FALSE(std::filesystem::exists(kubeconfig.parent_path())) << kubeconfig;
}

WorkloadSpec tpu_spec() {
  WorkloadSpec s;
  s.name = "llama-8b-bench";
  s.docker_image = "gcr.io/primatrix/bench:1";
  s.command = {"python3", "train.py", "--steps=100"};
  s.accelerator_type = "tpu-v4-64";
  s.priority = "medium";
  return s;
}

class WorkloadManagerTest : public ::testing::Test {
 protected:
  WorkloadManagerTest() {
    settings_.state_dir = (tmp_.path() / "state").string();
    settings_.runtime_dir = (tmp_.path() / "run").string();
    runner_->attach_clock(clock_);
  }
  XpkWorkloadManager manager() { return XpkWorkloadManager(runner_, settings_, clock_); }
  std::vector<std::string> only_call_argv() {
    const auto calls = runner_->calls();
    EXPECT_EQ(calls.size(), 1u);
    return calls.empty() ? std::vector<std::string>{} : calls.back().argv;
  }
  WorkloadSubmitError submit_error(const ClusterConfig& c, const WorkloadSpec& s) {
    try {
      manager().submit(c, s);
    } catch (const WorkloadSubmitError& e) {
      return e;
    }
    ADD_FAILURE() << "expected WorkloadSubmitError";
    return WorkloadSubmitError("", "", "", std::nullopt, "");
  }

  testing::TempDir tmp_;
  XpkSettings settings_;
  std::shared_ptr<FakeCommandRunner> runner_ = std::make_shared<FakeCommandRunner>();
  std::shared_ptr<FakeClock> clock_ = std::make_shared<FakeClock>();
};

// 提交任务: the create command carries image, command, accelerator, env and extra_args.
TEST_F(WorkloadManagerTest, SubmitBuildsTheCreateCommand) {
  runner_->on({"workload", "create"}, FakeCommandRunner::ok(testing::kCreateOkStdout));
  settings_.extra_args = {"--skip-validation"};
  auto spec = tpu_spec();
  spec.command = {"python3", "train.py", "--name=it's a test", "$HOME"};
  spec.env = {{"JAX_PLATFORMS", "tpu"}, {"STEPS", "100 200"}};
  spec.extra_args = {"--num-slices=2", "--max-restarts", "3"};
  const auto handle = manager().submit(tpu_cluster(), spec);

  EXPECT_THAT(
      only_call_argv(),
      ElementsAre("xpk", "workload", "create", "--cluster=tpu-v4-cluster",
                  "--project=primatrix-tpu", "--zone=us-central2-b", "--workload=llama-8b-bench",
                  "--docker-image=gcr.io/primatrix/bench:1",
                  "--command=python3 train.py '--name=it'\\''s a test' '$HOME'", "--tpu-type=v4-64",
                  "--priority=medium", "--env=JAX_PLATFORMS=tpu", "--env=STEPS=100 200",
                  "--skip-validation", "--num-slices=2", "--max-restarts", "3"));
  const auto call = runner_->calls().back();
  EXPECT_EQ(call.timeout, std::chrono::seconds(900));
  expect_private_kubeconfig(call, tmp_.path() / "run");

  EXPECT_EQ(handle.workload_name, "llama-8b-bench");
  EXPECT_EQ(handle.cluster, "tpu-v4-prod");
  EXPECT_EQ(handle.namespace_, "default");
  EXPECT_EQ(handle.submitted_at, "2026-04-13T08:00:00.000Z");
}

TEST_F(WorkloadManagerTest, SubmitNeverPassesQuiet) {
  runner_->on({"workload", "create"}, FakeCommandRunner::ok(testing::kCreateOkStdout));
  manager().submit(tpu_cluster(), tpu_spec());
  EXPECT_THAT(only_call_argv(), Not(Contains("--quiet")));
}

// TPU vs GPU: device_class picks --tpu-type or --device-type (cpu too).
TEST_F(WorkloadManagerTest, DeviceClassPicksTheAcceleratorFlag) {
  settings_.namespace_flag = NamespaceFlag::kSupported;
  runner_->on({"workload", "create"}, FakeCommandRunner::ok(testing::kCreateOkStdout));
  manager().submit(tpu_cluster(), tpu_spec());
  auto gpu = tpu_spec();
  gpu.accelerator_type = "a100-40gb-8";
  manager().submit(gpu_cluster(), gpu);
  auto cpu = tpu_spec();
  cpu.accelerator_type = "n2-standard-32-4";
  manager().submit(gpu_cluster(), cpu);

  const auto calls = runner_->calls();
  ASSERT_THAT(calls, SizeIs(3));
  EXPECT_THAT(calls[0].argv, Contains("--tpu-type=v4-64"));
  EXPECT_THAT(calls[0].argv, Not(Contains(HasSubstr("--device-type"))));
  EXPECT_THAT(calls[1].argv, Contains("--device-type=a100-40gb-8"));
  EXPECT_THAT(calls[1].argv, Not(Contains(HasSubstr("--tpu-type"))));
  EXPECT_THAT(calls[2].argv, Contains("--device-type=n2-standard-32-4"));
}

// 提交失败: non-zero exit -> WorkloadSubmitError carrying stderr.
TEST_F(WorkloadManagerTest, FailedCreateRaisesWorkloadSubmitErrorWithStderr) {
  runner_->on({"workload", "create"},
              FakeCommandRunner::fails(1, testing::kCreateFailStderr, testing::kCreateFailStdout));
  const auto e = submit_error(tpu_cluster(), tpu_spec());
  EXPECT_EQ(e.exit_code(), 1);
  EXPECT_EQ(e.cluster(), "tpu-v4-prod");
  EXPECT_EQ(e.workload(), "llama-8b-bench");
  EXPECT_THAT(e.stderr_text(), HasSubstr("unknown field \"spec.ttlSecondsAfterFinished\""));
  EXPECT_THAT(e.stderr_text(), HasSubstr("[XPK] Create Workload request returned ERROR 1"));
  EXPECT_THAT(e.what(), HasSubstr("xpk workload create failed for workload 'llama-8b-bench' on "
                                  "cluster 'tpu-v4-prod': exit code 1"));
  EXPECT_THAT(e.what(), HasSubstr("strict decoding error"));
  // Nothing is recorded for a failed submit.
  EXPECT_EQ(manager().find_submission("tpu-v4-prod", "llama-8b-bench"), std::nullopt);
}

// xpk stopped at its existence check (the cluster does not answer): nothing was applied, and
// the error says so by its type; a failure in the apply itself, or output cut short, does not.
TEST_F(WorkloadManagerTest, ACreateThatFailedBeforeItsCreateStepIsKnownToHaveMadeNothing) {
  runner_->on({"workload", "create"},
              FakeCommandRunner::fails(1, "", testing::kCreateUnreachableStdout));
  try {
    manager().submit(tpu_cluster(), tpu_spec());
    ADD_FAILURE() << "expected WorkloadNotCreatedError";
  } catch (const WorkloadNotCreatedError& e) {
    EXPECT_EQ(e.exit_code(), 1);
    EXPECT_THAT(e.what(), HasSubstr("before its create step (nothing was created)"));
    EXPECT_THAT(e.what(), HasSubstr("i/o timeout"));
  }
}

TEST_F(WorkloadManagerTest, ACreateThatFailedInItsApplyMayHaveMadeTheWorkload) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {testing::kCreateApplyUnreachableStdout, testing::kCreateApplyUnreachableStderr},
      {testing::kCreateFailStdout, testing::kCreateFailStderr},
      // The existence check's failure without xpk's own end: not known how it ended.
      {std::string(testing::kCreateUnreachableStdout)
           .substr(0, std::string(testing::kCreateUnreachableStdout).find("[XPK] List Job")),
       ""},
  };
  for (const auto& [out, err] : cases) {
    runner_->on({"workload", "create"}, FakeCommandRunner::fails(1, err, out));
    try {
      manager().submit(tpu_cluster(), tpu_spec());
      ADD_FAILURE() << "expected WorkloadSubmitError";
    } catch (const WorkloadNotCreatedError&) {
      ADD_FAILURE() << "taken as not created: " << out;
    } catch (const WorkloadSubmitError& e) {
      EXPECT_THAT(e.what(), ::testing::Not(HasSubstr("nothing was created")));
    }
  }
}

TEST_F(WorkloadManagerTest, TimedOutCreateRaisesWorkloadSubmitErrorWithoutExitCode) {
  settings_.command_timeout_s = 60;
  runner_->on({"workload", "create"}, FakeCommandRunner::takes(std::chrono::minutes(5)));
  const auto e = submit_error(tpu_cluster(), tpu_spec());
  EXPECT_EQ(e.exit_code(), std::nullopt);
  EXPECT_THAT(e.what(), HasSubstr("timed out after 60.0s"));
}

TEST_F(WorkloadManagerTest, MissingBinaryRaisesWorkloadSubmitErrorNamingIt) {
  settings_.binary = "/nonexistent/xpk";
  runner_->on({"workload"}, FakeCommandRunner::cannot_start("No such file or directory"));
  const auto e = submit_error(tpu_cluster(), tpu_spec());
  EXPECT_THAT(e.what(), HasSubstr("/nonexistent/xpk"));
}

TEST_F(WorkloadManagerTest, ValidatesBeforeRunningXpk) {
  struct Case {
    std::function<void(WorkloadSpec&)> change;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](WorkloadSpec& s) { s.name = "Llama"; }, "must start with a lower-case letter"},
      {[](WorkloadSpec& s) { s.name = "llama-"; }, "end with a letter or digit"},
      {[](WorkloadSpec& s) { s.name = "9lives"; }, "is not a workload name"},
      {[](WorkloadSpec& s) { s.name = "llama_8b"; }, "is not a workload name"},
      {[](WorkloadSpec& s) { s.name = ""; }, "empty"},
      {[](WorkloadSpec& s) { s.name = std::string(41, 'a'); }, "at most 40"},
      {[](WorkloadSpec& s) { s.priority = "urgent"; }, "priority 'urgent' is not one of"},
      {[](WorkloadSpec& s) {
         s.env = {{"1BAD", "x"}};
       },
       "environment variable name '1BAD'"},
      {[](WorkloadSpec& s) {
         s.env = {{"A-B", "x"}};
       },
       "environment variable name 'A-B'"},
      {[](WorkloadSpec& s) {
         s.env = {{"Q", "say \"hi\""}};
       },
       "double quote"},
      {[](WorkloadSpec& s) { s.docker_image = ""; }, "docker_image is empty"},
      {[](WorkloadSpec& s) { s.command = {}; }, "command is empty"},
      // Nothing may alter the manifest xpk generates (issue 11).
      {[](WorkloadSpec& s) { s.docker_image = "img\n      securityContext: {privileged: true}"; },
       "docker_image 'img\\n      securityContext"},
      {[](WorkloadSpec& s) {
         s.command = {"python3", "train.py\n- evil"};
       },
       "contains a newline"},
      {[](WorkloadSpec& s) {
         s.env = {{"Q",
                   "a\xe2\x80\xa8"
                   "b"}};
       },
       "a Unicode line or paragraph separator"},
      // --xpk-arg may not override what falcon sets itself.
      {[](WorkloadSpec& s) { s.extra_args = {"--cluster=other"}; }, "would set xpk's --cluster"},
      {[](WorkloadSpec& s) {
         s.extra_args = {"--wor", "other"};
       },
       "would set xpk's --workload"},
      {[](WorkloadSpec& s) { s.accelerator_type = "nvidia-h100-80g"; },
       "does not offer accelerator 'nvidia-h100-80g' (it offers: tpu-v4-64, tpu-v4-128)"},
  };
  for (const auto& c : cases) {
    auto spec = tpu_spec();
    c.change(spec);
    try {
      manager().submit(tpu_cluster(), spec);
      ADD_FAILURE() << "expected InvalidWorkloadSpecError for: " << c.message;
    } catch (const InvalidWorkloadSpecError& e) {  // the CLI's exit 2, not an xpk failure
      EXPECT_THAT(e.what(), HasSubstr(c.message));
      EXPECT_THAT(e.what(), HasSubstr("cluster 'tpu-v4-prod'"));
      EXPECT_EQ(e.exit_code(), std::nullopt);
      EXPECT_STREQ(e.type_name(), "InvalidWorkloadSpecError");
    }
  }
  EXPECT_THAT(runner_->calls(), IsEmpty());
}

TEST_F(WorkloadManagerTest, GpuCommandsMayNotCarryQuotesXpkPastesIntoDoubleQuotes) {
  auto spec = tpu_spec();
  spec.accelerator_type = "nvidia-a100-80g";
  spec.command = {"python3", "-c", "print(\"hi\")"};
  EXPECT_THROW(manager().submit(gpu_cluster(), spec), InvalidWorkloadSpecError);
  EXPECT_THAT(runner_->calls(), IsEmpty());
  // On TPU the command sits in a block scalar, where quotes are plain text.
  runner_->on({"workload", "create"}, FakeCommandRunner::ok(testing::kCreateOkStdout));
  spec = tpu_spec();
  spec.command = {"python3", "-c", "print(\"hi\")"};
  EXPECT_NO_THROW(manager().submit(tpu_cluster(), spec));
}

// A SubmissionStore in memory that logs each call beside the runner's calls, and can refuse
// writes as a database that is down does.
class LoggingSubmissionStore final : public SubmissionStore {
 public:
  explicit LoggingSubmissionStore(std::shared_ptr<FakeCommandRunner> runner)
      : runner_(std::move(runner)) {}
  void record(const SubmissionRecord& r) override {
    log.push_back(fmt::format("record {} (xpk calls {})", r.workload, runner_->calls().size()));
    if (down) throw StateStoreError("postgresql", "postgresql://db/f", "record", "down");
    rows[r.cluster + "/" + r.workload] = r;
  }
  bool intend(const SubmissionRecord& r) override {
    log.push_back(fmt::format("intend {} (xpk calls {})", r.workload, runner_->calls().size()));
    if (down) {
      throw StateStoreError("postgresql", "postgresql://db/f", "record_submission_intent",
                            "the database system is shutting down");
    }
    return rows.emplace(r.cluster + "/" + r.workload, r).second;
  }
  void forget(const SubmissionRecord& r) override {
    log.push_back("forget " + r.workload);
    const auto it = rows.find(r.cluster + "/" + r.workload);
    if (it != rows.end() && it->second.submitted_at == r.submitted_at) rows.erase(it);
  }
  std::optional<SubmissionRecord> find(const std::string& c, const std::string& w) const override {
    const auto it = rows.find(c + "/" + w);
    return it == rows.end() ? std::nullopt : std::optional(it->second);
  }
  std::int64_t intend_delete(const std::string& c, const std::string& w) override {
    log.push_back(fmt::format("intend delete {}/{} (xpk calls {})", c, w, runner_->calls().size()));
    if (down) {
      throw StateStoreError("postgresql", "postgresql://db/f", "record_delete_intent",
                            "the database system is shutting down");
    }
    return static_cast<std::int64_t>(log.size());
  }
  void deleted(std::int64_t intent, const std::string& outcome,
               const std::string& detail) override {
    log.push_back(fmt::format("deleted {} {}{}", intent, outcome, detail.empty() ? "" : ": ..."));
    last_delete_detail = detail;
  }

  std::shared_ptr<FakeCommandRunner> runner_;
  std::string last_delete_detail;
  std::vector<std::string> log;
  std::map<std::string, SubmissionRecord> rows;
  bool down = false;
};

class SubmissionIntentTest : public WorkloadManagerTest {
 protected:
  XpkWorkloadManager manager_with_store() {
    return XpkWorkloadManager(make_xpk_cli(runner_, settings_), clock_, store_);
  }
  std::shared_ptr<LoggingSubmissionStore> store_ =
      std::make_shared<LoggingSubmissionStore>(runner_);
};

// 取消任务 (the spec's cancel row) with a state store, issue 27: a delete too is recorded before
// xpk runs, then its outcome.
TEST_F(SubmissionIntentTest, ADeleteIsRecordedBeforeXpkRunsAndItsOutcomeAfter) {
  const WorkloadHandle h{"train-a", "tpu-v4-prod", "default", ""};
  runner_->on({"workload", "delete"}, FakeCommandRunner::ok("[XPK] Exiting XPK cleanly\n"));
  EXPECT_TRUE(manager_with_store().cancel(tpu_cluster(), h));
  EXPECT_THAT(store_->log,
              ElementsAre("intend delete tpu-v4-prod/train-a (xpk calls 0)", "deleted 1 deleted"));
  store_->log.clear();
  runner_->on({"workload", "delete"}, FakeCommandRunner::fails(1, testing::kDeleteNotFoundStderr,
                                                               testing::kDeleteNotFoundStdout));
  EXPECT_THROW(manager_with_store().cancel(tpu_cluster(), h), WorkloadNotFoundError);
  EXPECT_THAT(store_->log, ElementsAre("intend delete tpu-v4-prod/train-a (xpk calls 1)",
                                       "deleted 1 not_found"));
  store_->log.clear();
  runner_->on({"workload", "delete"},
              FakeCommandRunner::fails(1, "Error from server (Forbidden): forbidden\n", ""));
  EXPECT_THROW(manager_with_store().cancel(tpu_cluster(), h), XpkCommandError);
  EXPECT_THAT(store_->log, ElementsAre("intend delete tpu-v4-prod/train-a (xpk calls 2)",
                                       "deleted 1 failed: ..."));
  EXPECT_THAT(store_->last_delete_detail, HasSubstr("Forbidden"));
}

TEST_F(SubmissionIntentTest, AStoreThatCannotTakeADeleteIntentFailsTheCancelWithNothingRun) {
  runner_->on({"workload", "delete"}, FakeCommandRunner::ok(""));
  store_->down = true;
  EXPECT_THROW(manager_with_store().cancel(tpu_cluster(),
                                           WorkloadHandle{"train-a", "tpu-v4-prod", "default", ""}),
               StateStoreError);
  EXPECT_THAT(runner_->calls(), IsEmpty());
}

TEST_F(SubmissionIntentTest, TheSubmissionIsRecordedBeforeXpkRuns) {
  runner_->on({"workload", "create"}, FakeCommandRunner::ok(testing::kCreateOkStdout));
  const auto handle = manager_with_store().submit(tpu_cluster(), tpu_spec());
  EXPECT_THAT(store_->log, ElementsAre("intend llama-8b-bench (xpk calls 0)"));
  const auto row = store_->find("tpu-v4-prod", "llama-8b-bench");
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->submitted_at, handle.submitted_at);
  EXPECT_EQ(row->namespace_, "default");
}

TEST_F(SubmissionIntentTest, AStoreThatCannotTakeTheIntentFailsTheSubmitWithNothingCreated) {
  runner_->on({"workload", "create"}, FakeCommandRunner::ok(testing::kCreateOkStdout));
  store_->down = true;
  try {
    manager_with_store().submit(tpu_cluster(), tpu_spec());
    ADD_FAILURE() << "expected StateStoreError";
  } catch (const StateStoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr("llama-8b-bench"));
    EXPECT_THAT(e.what(), HasSubstr("nothing was created"));
    EXPECT_EQ(e.db_message(), "the database system is shutting down");
  }
  EXPECT_TRUE(runner_->calls().empty());  // xpk never ran
}

TEST_F(SubmissionIntentTest, ACreateThatMadeNothingTakesItsIntentBack) {
  runner_->on({"workload", "create"},
              FakeCommandRunner::fails(1, "", testing::kCreateUnreachableStdout));
  EXPECT_THROW(manager_with_store().submit(tpu_cluster(), tpu_spec()), WorkloadNotCreatedError);
  EXPECT_EQ(store_->find("tpu-v4-prod", "llama-8b-bench"), std::nullopt);
  EXPECT_EQ(store_->log.back(), "forget llama-8b-bench");
}

TEST_F(SubmissionIntentTest, ACreateThatMayHaveMadeTheWorkloadKeepsItsRecord) {
  runner_->on({"workload", "create"},
              FakeCommandRunner::fails(1, testing::kCreateApplyUnreachableStderr,
                                       testing::kCreateApplyUnreachableStdout));
  EXPECT_THROW(manager_with_store().submit(tpu_cluster(), tpu_spec()), WorkloadSubmitError);
  EXPECT_TRUE(store_->find("tpu-v4-prod", "llama-8b-bench").has_value());
  EXPECT_THAT(store_->log, Not(Contains("forget llama-8b-bench")));
}

// A duplicate name leaves the record of the workload that has it as it was.
TEST_F(SubmissionIntentTest, ADuplicateNameLeavesTheExistingRecordAlone) {
  SubmissionRecord earlier{.cluster = "tpu-v4-prod",
                           .workload = "llama-8b-bench",
                           .namespace_ = "team-a",
                           .submitted_at = "2026-01-01T00:00:00.000Z"};
  store_->rows["tpu-v4-prod/llama-8b-bench"] = earlier;
  runner_->on({"workload", "create"}, FakeCommandRunner::fails(1, testing::kCreateDuplicateStderr,
                                                               testing::kCreateDuplicateStdout));
  EXPECT_THROW(manager_with_store().submit(tpu_cluster(), tpu_spec()), WorkloadExistsError);
  EXPECT_EQ(store_->find("tpu-v4-prod", "llama-8b-bench"), earlier);
  // The name free again (the earlier workload deleted): the new record replaces it after the
  // create succeeded.
  runner_->on({"workload", "create"}, FakeCommandRunner::ok(testing::kCreateOkStdout));
  const auto handle = manager_with_store().submit(tpu_cluster(), tpu_spec());
  EXPECT_EQ(store_->find("tpu-v4-prod", "llama-8b-bench")->submitted_at, handle.submitted_at);
  EXPECT_EQ(store_->log.back(), "record llama-8b-bench (xpk calls 2)");
}

TEST_F(WorkloadManagerTest, ADuplicateNameSaysSoFirstWithoutXpksNoise) {
  runner_->on({"workload", "create"}, FakeCommandRunner::fails(1, testing::kCreateDuplicateStderr,
                                                               testing::kCreateDuplicateStdout));
  EXPECT_THROW(manager().submit(tpu_cluster(), tpu_spec()), WorkloadExistsError);
  const auto e = submit_error(tpu_cluster(), tpu_spec());
  const std::string what = e.what();
  EXPECT_EQ(what.rfind("workload 'llama-8b-bench' already exists on cluster 'tpu-v4-prod'", 0), 0u)
      << what;
  EXPECT_THAT(what, HasSubstr("falcon job cancel --cluster tpu-v4-prod llama-8b-bench"));
  for (const char* noise : {"Skipping its creation", "Traceback", "EOFError", "(y/N)"}) {
    EXPECT_THAT(what, Not(HasSubstr(noise)));
  }
  EXPECT_EQ(e.stderr_text(),
            "[XPK] llama-8b-bench already exists, do you want to overwrite it? (y/N):");
  EXPECT_EQ(e.exit_code(), 1);
  EXPECT_EQ(manager().find_submission("tpu-v4-prod", "llama-8b-bench"), std::nullopt);
}

TEST_F(WorkloadManagerTest, AnotherWorkloadsNameInThePromptIsNotADuplicateOfThisOne) {
  std::string stdout_text = testing::kCreateDuplicateStdout;
  stdout_text.replace(stdout_text.find("[XPK] llama-8b-bench"), 20, "[XPK] xllama-8b-bench");
  runner_->on({"workload", "create"},
              FakeCommandRunner::fails(1, testing::kCreateDuplicateStderr, stdout_text));
  const auto e = submit_error(tpu_cluster(), tpu_spec());
  EXPECT_THAT(e.what(), HasSubstr("xpk workload create failed for workload 'llama-8b-bench'"));
}

TEST_F(WorkloadManagerTest, AcceptsTheLongestAndEdgeNames) {
  runner_->on({"workload", "create"}, FakeCommandRunner::ok(testing::kCreateOkStdout));
  for (std::string name : {std::string(40, 'a'), std::string("a"), std::string("a-1")}) {
    auto spec = tpu_spec();
    spec.name = name;
    spec.priority = "very-high";
    spec.env = {{"_under_score9", "v"}};
    EXPECT_EQ(manager().submit(tpu_cluster(), spec).workload_name, name);
  }
}

// namespace 默认值: namespace None -> the cluster's default_namespace.
TEST_F(WorkloadManagerTest, NamespaceDefaultsToTheClustersDefaultNamespace) {
  settings_.namespace_flag = NamespaceFlag::kSupported;
  runner_->on({"workload", "create"}, FakeCommandRunner::ok(testing::kCreateOkStdout));
  auto spec = tpu_spec();
  spec.accelerator_type = "a100-40gb-8";
  const auto handle = manager().submit(gpu_cluster(), spec);
  EXPECT_EQ(handle.namespace_, "benchmark");
  EXPECT_THAT(only_call_argv(), Contains("--namespace=benchmark"));

  spec.namespace_ = "team-x";
  EXPECT_EQ(manager().submit(gpu_cluster(), spec).namespace_, "team-x");
  EXPECT_THAT(runner_->calls().back().argv, Contains("--namespace=team-x"));
}

TEST_F(WorkloadManagerTest, UnsupportedNamespaceFlagRefusesANonDefaultNamespace) {
  settings_.namespace_flag = NamespaceFlag::kUnsupported;
  auto spec = tpu_spec();
  spec.accelerator_type = "a100-40gb-8";
  const auto e = submit_error(gpu_cluster(), spec);  // default_namespace: benchmark
  EXPECT_THAT(e.what(), HasSubstr("namespace 'benchmark'"));
  EXPECT_THAT(e.what(), HasSubstr("has no --namespace flag"));
  EXPECT_THAT(e.what(), HasSubstr("xpk.namespace_flag: supported"));
  EXPECT_THAT(runner_->calls(), IsEmpty());

  // The default namespace needs no flag.
  runner_->on({"workload", "create"}, FakeCommandRunner::ok(testing::kCreateOkStdout));
  EXPECT_EQ(manager().submit(tpu_cluster(), tpu_spec()).namespace_, "default");
  EXPECT_THAT(only_call_argv(), Not(Contains(HasSubstr("--namespace"))));
}

TEST_F(WorkloadManagerTest, AutoNamespaceSkipsTheHelpCallForTheDefaultNamespace) {
  settings_.binary = unique_binary("xpk-auto-default");
  runner_->on({"workload", "create"}, FakeCommandRunner::ok(testing::kCreateOkStdout));
  manager().submit(tpu_cluster(), tpu_spec());
  EXPECT_THAT(runner_->calls_matching({"--help"}), IsEmpty());
  EXPECT_THAT(only_call_argv(), Not(Contains(HasSubstr("--namespace"))));
}

TEST_F(WorkloadManagerTest, AutoNamespaceReadsTheHelpOncePerXpkAdapter) {
  settings_.binary = unique_binary("xpk-with-namespace");
  runner_->on({"--help"},
              FakeCommandRunner::ok("usage: xpk workload create [-h] --workload WORKLOAD\n"
                                    "  --namespace NAMESPACE  Kubernetes namespace\n"));
  runner_->on({"workload", "create", "--workload=llama-8b-bench"},
              FakeCommandRunner::ok(testing::kCreateOkStdout));
  auto spec = tpu_spec();
  spec.namespace_ = "team-x";
  // Two managers sharing one adapter (as the facade's do) ask once between them.
  const auto xpk = std::make_shared<const xpk::XpkCli>(runner_, settings_);
  XpkWorkloadManager first(xpk, clock_);
  XpkWorkloadManager second(xpk, clock_);
  EXPECT_EQ(first.submit(tpu_cluster(), spec).namespace_, "team-x");
  EXPECT_EQ(first.submit(tpu_cluster(), spec).namespace_, "team-x");
  EXPECT_EQ(second.submit(tpu_cluster(), spec).namespace_, "team-x");
  ASSERT_THAT(runner_->calls_matching({"--help"}), SizeIs(1));
  EXPECT_THAT(runner_->calls_matching({"--help"})[0].argv,
              ElementsAre(settings_.binary, "workload", "create", "--help"));
  ASSERT_THAT(runner_->calls_matching({"--workload=llama-8b-bench"}), SizeIs(3));
  EXPECT_THAT(runner_->calls_matching({"--workload=llama-8b-bench"})[0].argv,
              Contains("--namespace=team-x"));
  // The answer lives in the adapter, not in the process: a new adapter asks again.
  EXPECT_EQ(manager().submit(tpu_cluster(), spec).namespace_, "team-x");
  EXPECT_THAT(runner_->calls_matching({"--help"}), SizeIs(2));
}

TEST_F(WorkloadManagerTest, AFailedHelpCallIsNotRemembered) {
  settings_.binary = unique_binary("xpk-flaky-help");
  const auto xpk = std::make_shared<const xpk::XpkCli>(runner_, settings_);
  XpkWorkloadManager m(xpk, clock_);
  auto spec = tpu_spec();
  spec.namespace_ = "team-x";
  runner_->on({"--help"}, FakeCommandRunner::fails(1, "Traceback ...\nOSError: busy\n"));
  EXPECT_THROW(m.submit(tpu_cluster(), spec), WorkloadSubmitError);
  runner_->on({"--help"}, FakeCommandRunner::ok("  --namespace NAMESPACE\n"));
  runner_->on({"--workload=llama-8b-bench"}, FakeCommandRunner::ok(testing::kCreateOkStdout));
  EXPECT_EQ(m.submit(tpu_cluster(), spec).namespace_, "team-x");
  EXPECT_THAT(runner_->calls_matching({"--help"}), SizeIs(2));
}

TEST_F(WorkloadManagerTest, AutoNamespaceWithStockXpkRefusesANonDefaultNamespace) {
  settings_.binary = unique_binary("xpk-stock");
  runner_->on({"--help"}, FakeCommandRunner::ok("usage: xpk workload create [-h] --workload "
                                                "WORKLOAD --cluster CLUSTER\n"));
  auto spec = tpu_spec();
  spec.namespace_ = "team-x";
  const auto e = submit_error(tpu_cluster(), spec);
  EXPECT_THAT(e.what(), HasSubstr("namespace 'team-x' was requested (by the workload spec)"));
  EXPECT_THAT(runner_->calls_matching({"--workload=llama-8b-bench"}), IsEmpty());
}

TEST_F(WorkloadManagerTest, AutoNamespaceHelpFailureSaysHowToFixIt) {
  settings_.binary = unique_binary("xpk-broken-help");
  runner_->on({"--help"}, FakeCommandRunner::fails(1, "ModuleNotFoundError: No module named x"));
  auto spec = tpu_spec();
  spec.namespace_ = "team-x";
  const auto e = submit_error(tpu_cluster(), spec);
  EXPECT_THAT(e.what(), HasSubstr("set xpk.namespace_flag"));
  EXPECT_THAT(e.what(), HasSubstr("ModuleNotFoundError"));
}

// extra_args 透传: appended verbatim, last.
TEST_F(WorkloadManagerTest, ExtraArgsAreAppendedVerbatimAtTheEnd) {
  runner_->on({"workload", "create"}, FakeCommandRunner::ok(testing::kCreateOkStdout));
  auto spec = tpu_spec();
  spec.extra_args = {"--scheduler=gke.io/topology-aware-auto", "--max-restarts", "3",
                     "--num-slices=2"};
  manager().submit(tpu_cluster(), spec);
  const auto argv = only_call_argv();
  ASSERT_GE(argv.size(), 4u);
  EXPECT_THAT(std::vector<std::string>(argv.end() - 4, argv.end()),
              ElementsAre("--scheduler=gke.io/topology-aware-auto", "--max-restarts", "3",
                          "--num-slices=2"));
}

// 查询状态: list output parsed and mapped to WorkloadStatus.state.
TEST_F(WorkloadManagerTest, GetStatusParsesTheListAndMapsTheState) {
  runner_->on({"workload", "list"}, FakeCommandRunner::ok(testing::kListV113));
  auto m = manager();
  const auto cluster = tpu_cluster();
  auto status_of = [&](const std::string& name) {
    return m.get_status(cluster,
                        WorkloadHandle{name, cluster.name, "default", "2026-06-01T00:00:00.000Z"});
  };
  const auto running = status_of("train-a");
  EXPECT_EQ(running.workload_name, "train-a");
  EXPECT_EQ(running.state, kStateRunning);
  EXPECT_EQ(running.start_time, "2026-06-01T10:00:00.000Z");
  EXPECT_EQ(running.end_time, std::nullopt);
  EXPECT_EQ(running.exit_code, std::nullopt);

  EXPECT_EQ(status_of("train-b").state, kStateQueued);
  const auto done = status_of("train-c");
  EXPECT_EQ(done.state, kStateCompleted);
  EXPECT_EQ(done.end_time, "2026-06-01T09:30:00.000Z");
  EXPECT_EQ(status_of("train-d").state, kStateFailed);
  EXPECT_EQ(status_of("train-d").end_time, "2026-06-01T09:40:00.000Z");

  const auto call = runner_->calls().front();
  EXPECT_THAT(call.argv, Contains("--filter-by-job=train-a"));
  EXPECT_THAT(call.argv, Not(Contains(HasSubstr("--filter-by-status"))));
}

TEST_F(WorkloadManagerTest, GetStatusMatchesNamesExactlyAndReportsUnlistedAsNotFound) {
  // xpk's --filter-by-job is a substring match: asking for "train" lists train-a, train-b...
  runner_->on({"workload", "list"}, FakeCommandRunner::ok(testing::kListV113));
  try {
    manager().get_status(tpu_cluster(),
                         WorkloadHandle{"train", "tpu-v4-prod", "default", "2026-06-01T00:00:00Z"});
    FAIL() << "expected WorkloadNotFoundError";
  } catch (const WorkloadNotFoundError& e) {
    EXPECT_EQ(e.workload(), "train");
    EXPECT_EQ(e.cluster(), "tpu-v4-prod");
  }
}

// Issue 11: status validates the name as cancel does, before running xpk; issue 31: it is the
// caller's bad value (exit 2), not a failed xpk command.
TEST_F(WorkloadManagerTest, GetStatusRefusesANameXpkCannotHaveWithoutRunningXpk) {
  EXPECT_THROW(manager().get_status(tpu_cluster(),
                                    WorkloadHandle{"Bad Name;rm", "tpu-v4-prod", "default", ""}),
               InvalidValueError);
  EXPECT_TRUE(runner_->calls().empty());
}

TEST_F(WorkloadManagerTest, GetStatusFailureRaisesXpkCommandError) {
  runner_->on({"workload", "list"}, FakeCommandRunner::fails(1, "", testing::kListFailureStdout));
  try {
    manager().get_status(tpu_cluster(), WorkloadHandle{"train-a", "tpu-v4-prod", "default", ""});
    FAIL() << "expected XpkCommandError";
  } catch (const XpkCommandError& e) {
    EXPECT_EQ(e.exit_code(), 1);
    EXPECT_EQ(e.cluster(), "tpu-v4-prod");
    EXPECT_THAT(e.what(), HasSubstr("doesn't have a resource type \"workloads\""));
  }
}

// 取消任务: `xpk workload delete`, true on success.
TEST_F(WorkloadManagerTest, CancelRunsWorkloadDeleteAndReturnsTrue) {
  runner_->on({"workload", "delete"},
              FakeCommandRunner::ok("[XPK] Starting Workload delete\n"
                                    "jobset.jobset.x-k8s.io \"train-a\" deleted\n"
                                    "[XPK] Exiting XPK cleanly\n"));
  EXPECT_TRUE(
      manager().cancel(tpu_cluster(), WorkloadHandle{"train-a", "tpu-v4-prod", "default", ""}));
  EXPECT_THAT(only_call_argv(),
              ElementsAre("xpk", "workload", "delete", "--cluster=tpu-v4-cluster",
                          "--project=primatrix-tpu", "--zone=us-central2-b", "--workload=train-a"));
}

TEST_F(WorkloadManagerTest, CancelSucceedsDespiteThePathwaysPreStepNotFound) {
  runner_->on({"workload", "delete"},
              FakeCommandRunner::fails(0, testing::kDeleteWithPathwaysStepStderr,
                                       testing::kDeleteWithPathwaysStepStdout));
  EXPECT_TRUE(
      manager().cancel(tpu_cluster(), WorkloadHandle{"train-a", "tpu-v4-prod", "default", ""}));
}

// 取消不存在的任务: NotFound -> WorkloadNotFoundError.
TEST_F(WorkloadManagerTest, CancelOfAMissingWorkloadRaisesWorkloadNotFoundError) {
  runner_->on({"workload", "delete"}, FakeCommandRunner::fails(1, testing::kDeleteNotFoundStderr,
                                                               testing::kDeleteNotFoundStdout));
  try {
    manager().cancel(tpu_cluster(), WorkloadHandle{"ghost", "tpu-v4-prod", "default", ""});
    FAIL() << "expected WorkloadNotFoundError";
  } catch (const WorkloadNotFoundError& e) {
    EXPECT_EQ(e.cluster(), "tpu-v4-prod");
    EXPECT_EQ(e.workload(), "ghost");
  }
}

TEST_F(WorkloadManagerTest, CancelOtherFailuresRaiseXpkCommandError) {
  // A failed delete whose only NotFound is about a PathwaysJob is not "not found".
  runner_->on({"workload", "delete"},
              FakeCommandRunner::fails(1,
                                       std::string(testing::kDeleteWithPathwaysStepStderr) +
                                           "Error from server (Forbidden): jobsets.jobset.x-k8s.io "
                                           "\"train-a\" is forbidden\n",
                                       "[XPK] XPK failed, error code 1\n"));
  try {
    manager().cancel(tpu_cluster(), WorkloadHandle{"train-a", "tpu-v4-prod", "default", ""});
    FAIL() << "expected XpkCommandError";
  } catch (const WorkloadNotFoundError&) {
    FAIL() << "a Forbidden delete is not NotFound";
  } catch (const XpkCommandError& e) {
    EXPECT_EQ(e.exit_code(), 1);
    EXPECT_THAT(e.what(), HasSubstr("is forbidden"));
  }
  // Timeouts too, without an exit code.
  settings_.command_timeout_s = 30;
  runner_->on({"workload", "delete"}, FakeCommandRunner::takes(std::chrono::minutes(1)));
  try {
    manager().cancel(tpu_cluster(), WorkloadHandle{"train-a", "tpu-v4-prod", "default", ""});
    FAIL() << "expected XpkCommandError";
  } catch (const XpkCommandError& e) {
    EXPECT_EQ(e.exit_code(), std::nullopt);
    EXPECT_THAT(e.what(), HasSubstr("timed out"));
  }
}

TEST_F(WorkloadManagerTest, CancelRefusesANameXpkWouldRejectWithoutRunningIt) {
  EXPECT_THROW(manager().cancel(tpu_cluster(),
                                WorkloadHandle{std::string(41, 'a'), "tpu-v4-prod", "default", ""}),
               InvalidValueError);
  EXPECT_THAT(runner_->calls(), IsEmpty());
}

TEST_F(WorkloadManagerTest, ListWorkloadsMapsAndFiltersByOurState) {
  runner_->on({"workload", "list"}, FakeCommandRunner::ok(testing::kListV113));
  auto m = manager();
  const auto all = m.list_workloads(tpu_cluster(), std::nullopt);
  ASSERT_THAT(all, SizeIs(8));
  EXPECT_EQ(all[0].name, "train-a");
  EXPECT_EQ(all[0].state, kStateRunning);
  EXPECT_EQ(all[0].start_time, "2026-06-01T10:00:00.000Z");
  EXPECT_EQ(all[0].accelerator_type, "");  // not submitted by falcon

  std::vector<std::string> queued;
  for (const auto& w : m.list_workloads(tpu_cluster(), std::string(kStateQueued))) {
    queued.push_back(w.name);
  }
  EXPECT_THAT(queued, ElementsAre("train-b", "train-f", "train-g"));
  EXPECT_THAT(m.list_workloads(tpu_cluster(), std::string(kStateFailed)), SizeIs(1));
  EXPECT_THROW(m.list_workloads(tpu_cluster(), std::string("queued")), std::invalid_argument);
  for (const auto& call : runner_->calls()) {
    EXPECT_THAT(call.argv, Not(Contains(HasSubstr("--filter"))));
  }
}

// The record holds the registry's spelling of the type, whichever spelling the caller used.
TEST_F(WorkloadManagerTest, ListWorkloadsTakesTheAcceleratorFromTheSubmissionRecord) {
  runner_->on({"workload", "create"}, FakeCommandRunner::ok(testing::kCreateOkStdout));
  runner_->on({"workload", "list"}, FakeCommandRunner::ok(testing::kListV113));
  auto spec = tpu_spec();
  spec.name = "train-c";
  spec.accelerator_type = "v4-128";
  auto m = manager();
  m.submit(tpu_cluster(), spec);
  const auto all = m.list_workloads(tpu_cluster(), std::nullopt);
  EXPECT_EQ(all[2].name, "train-c");
  EXPECT_EQ(all[2].accelerator_type, "tpu-v4-128");
}

TEST_F(WorkloadManagerTest, SubmitRecordsTheSubmissionAndTheLatestRecordWins) {
  runner_->on({"workload", "create"}, FakeCommandRunner::ok(testing::kCreateOkStdout));
  auto m = manager();
  m.submit(tpu_cluster(), tpu_spec());
  clock_->advance(std::chrono::hours(1));
  auto again = tpu_spec();
  again.accelerator_type = "tpu-v4-128";
  m.submit(tpu_cluster(), again);

  const auto record = m.find_submission("tpu-v4-prod", "llama-8b-bench");
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->cluster, "tpu-v4-prod");
  EXPECT_EQ(record->workload, "llama-8b-bench");
  EXPECT_EQ(record->namespace_, "default");
  EXPECT_EQ(record->accelerator_type, "tpu-v4-128");
  EXPECT_EQ(record->device_class, "tpu");
  EXPECT_EQ(record->submitted_at, "2026-04-13T09:00:00.000Z");
  EXPECT_EQ(record->cluster_id, "tpu-v4-cluster");
  EXPECT_EQ(record->docker_image, "gcr.io/primatrix/bench:1");
  EXPECT_EQ(record->priority, "medium");
  EXPECT_EQ(m.find_submission("other-cluster", "llama-8b-bench"), std::nullopt);

  struct stat st {};
  ASSERT_EQ(::stat(m.submissions_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(m.submissions_path(), (tmp_.path() / "state" / "submissions.jsonl").string());
  const std::string text = testing::read_file(m.submissions_path());
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2);
}

TEST_F(WorkloadManagerTest, SubmissionRecordToleratesATornLastLine) {
  runner_->on({"workload", "create"}, FakeCommandRunner::ok(testing::kCreateOkStdout));
  auto m = manager();
  m.submit(tpu_cluster(), tpu_spec());
  {
    std::ofstream out(m.submissions_path(), std::ios::app);
    out << "{\"v\":1,\"cluster\":\"tpu-v4-prod\",\"workload\":\"torn";  // a crash mid-write
  }
  EXPECT_TRUE(m.find_submission("tpu-v4-prod", "llama-8b-bench").has_value());
  auto next = tpu_spec();
  next.name = "after-the-tear";
  m.submit(tpu_cluster(), next);
  EXPECT_TRUE(m.find_submission("tpu-v4-prod", "after-the-tear").has_value());
  EXPECT_TRUE(m.find_submission("tpu-v4-prod", "llama-8b-bench").has_value());
}

TEST_F(WorkloadManagerTest, ConcurrentSubmitsNeverInterleaveRecords) {
  runner_->on({"workload", "create"}, FakeCommandRunner::ok(testing::kCreateOkStdout));
  constexpr int kThreads = 8;
  constexpr int kEach = 20;
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        auto m = manager();  // one manager per thread, like separate falcon processes
        for (int i = 0; i < kEach; ++i) {
          auto spec = tpu_spec();
          spec.name = "w-" + std::to_string(t) + "-" + std::to_string(i);
          m.submit(tpu_cluster(), spec);
        }
      });
    }
  }
  // Every line is one whole record, and every submission is there.
  std::set<std::string> names;
  std::istringstream lines(testing::read_file(manager().submissions_path()));
  for (std::string line; std::getline(lines, line);) {
    // An empty line is possible and harmless: a writer that saw another's record half-written
    // starts its own on a fresh line.
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(j.is_object()) << line;
    names.insert(j.at("workload").get<std::string>());
  }
  EXPECT_EQ(names.size(), static_cast<std::size_t>(kThreads * kEach));
  EXPECT_TRUE(manager().find_submission("tpu-v4-prod", "w-7-19").has_value());
}

TEST_F(WorkloadManagerTest, AFailedRecordWriteDoesNotFailTheSubmit) {
  runner_->on({"workload", "create"}, FakeCommandRunner::ok(testing::kCreateOkStdout));
  auto m = manager();
  std::filesystem::create_directories(m.submissions_path());  // a directory in the way
  EXPECT_EQ(m.submit(tpu_cluster(), tpu_spec()).workload_name, "llama-8b-bench");
  EXPECT_EQ(m.find_submission("tpu-v4-prod", "llama-8b-bench"), std::nullopt);
}

}  // namespace
}  // namespace falcon
