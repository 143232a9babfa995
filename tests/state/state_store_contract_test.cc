// The StateStore contract, run on both backends (store_fixture.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "falcon/errors.h"
#include "falcon/state_store.h"
#include "state/store_fixture.h"
#include "util/time_format.h"

namespace falcon::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using namespace std::chrono_literals;

std::string iso_at(std::int64_t ms) { return format_iso8601(at_ms(ms)); }

SubmissionRow submission(const std::string& cluster, const std::string& workload,
                         std::int64_t submitted_ms) {
  SubmissionRow r;
  r.handle = WorkloadHandle{.workload_name = workload,
                            .cluster = cluster,
                            .namespace_ = "default",
                            .submitted_at = iso_at(submitted_ms)};
  r.accelerator_type = "tpu-v4-64";
  r.device_class = "tpu";
  r.cluster_id = cluster + "-gke";
  r.project = "proj";
  r.zone = "us-central2-b";
  r.docker_image = "gcr.io/p/img:1";
  r.priority = "medium";
  return r;
}

ProbeRecord probe(const std::string& cluster, std::int64_t ms, int queue = 1) {
  ProbeRecord p;
  p.result = ClusterProbeResult{.cluster = cluster,
                                .reachable = true,
                                .queue_depth = queue,
                                .running_count = 2,
                                .error = std::nullopt,
                                .probed_at = iso_at(ms)};
  p.backend = "xpk";
  p.duration_ms = 120;
  return p;
}

ClusterSelection selection(const std::string& accelerator, const std::string& chosen,
                           std::int64_t ms) {
  ClusterSelection s;
  s.selected_cluster = chosen;
  s.accelerator = accelerator;
  s.candidates = {"tpu-a", "tpu-b"};
  s.probe_results = {
      ClusterProbeResult{.cluster = "tpu-a",
                         .reachable = false,
                         .error = "timed out after 15 s",
                         .probed_at = iso_at(ms - 20)},
      ClusterProbeResult{.cluster = "tpu-b",
                         .reachable = true,
                         .queue_depth = 1,
                         .running_count = 3,
                         .probed_at = iso_at(ms - 10)},
  };
  s.reason = "selected " + chosen + ": reachable, queue_depth=1 <= max=5";
  s.decided_at = iso_at(ms);
  return s;
}

class StateStoreContract : public StoreTest {};
FALCON_BOTH_BACKENDS(StateStoreContract);

// --- Opening.

TEST_P(StateStoreContract, OpensAtTheNewestSchemaVersionAndSaysWhichBackend) {
  EXPECT_EQ(store_->schema_version(), kStateSchemaVersion);
  EXPECT_EQ(store_->backend(), GetParam());
  EXPECT_EQ(store_->location(), url_);
}

TEST_P(StateStoreContract, ReopeningFindsEverythingWritten) {
  const auto id = store_->record_submission(submission("tpu-a", "w1", 0));
  store_->record_probes({probe("tpu-a", 5)});
  store_.reset();
  auto again = open();
  EXPECT_EQ(again->schema_version(), kStateSchemaVersion);
  ASSERT_TRUE(again->find_submission("tpu-a", "w1"));
  EXPECT_EQ(again->find_submission("tpu-a", "w1")->id, id);
  ASSERT_TRUE(again->latest_probe("tpu-a"));
}

// A failing xpk prints kilobytes; stored with every candidate of every failed decision they
// filled a freed disk within seconds. Stored errors keep their first kilobyte, cut between
// characters, and say how much was cut.
TEST_P(StateStoreContract, StoredErrorTextsAreBounded) {
  std::string long_error = "xpk failed: ";
  while (long_error.size() < 8000) long_error += "Unable to connect to the server ";
  long_error += "\xc3\xa9";  // a two-byte character near the end
  ProbeRecord p = probe("tpu-a", 5);
  p.result.reachable = false;
  p.result.error = std::string(1023, 'x') + "\xc3\xa9" + long_error;  // cut inside the é
  store_->record_probes({p});
  const auto stored = store_->latest_probe("tpu-a");
  ASSERT_TRUE(stored && stored->result.error);
  EXPECT_EQ(stored->result.error->rfind(std::string(1023, 'x') + "... (", 0), 0u)
      << stored->result.error->substr(0, 1100);
  EXPECT_THAT(*stored->result.error, HasSubstr(" more bytes)"));

  ClusterSelection s = selection("v4-64", "tpu-b", 1000);
  s.probe_results[0].error = long_error;
  s.probe_results[1].capacity_error = long_error;  // why capacity was not read: the same bound
  const auto id = store_->record_selection(s);
  const auto got = store_->get_selection(id);
  ASSERT_TRUE(got);
  const auto& error = got->selection.probe_results.at(0).error;
  ASSERT_TRUE(error);
  EXPECT_LT(error->size(), 1100u);
  EXPECT_EQ(error->substr(0, 100), long_error.substr(0, 100));
  // Short errors are kept as they are.
  EXPECT_EQ(got->selection.probe_results.at(1).error, s.probe_results.at(1).error);
  const auto& capacity_error = got->selection.probe_results.at(1).capacity_error;
  ASSERT_TRUE(capacity_error);
  EXPECT_LT(capacity_error->size(), 1100u);
  EXPECT_EQ(capacity_error->substr(0, 100), long_error.substr(0, 100));
  // And in a probe's extra_json: capacity, why it was not read, the admission delay.
  ClusterProbeResult kube = s.probe_results[1];
  kube.admission_delay_s = 30;
  const auto extra = nlohmann::json::parse(probe_extra_json(kube));
  EXPECT_LT(extra.at("capacity_error").get<std::string>().size(), 1100u);
  EXPECT_EQ(extra.at("admission_delay_s"), 30);
  EXPECT_EQ(probe_extra_json(ClusterProbeResult{}), "{}");
}

// --- Submissions.

TEST_P(StateStoreContract, SubmissionRoundTripsEveryFieldWithItsSpec) {
  SubmissionRow row = submission("tpu-a", "llama-8b", 123);
  row.spec = WorkloadSpec{.name = "llama-8b",
                          .docker_image = "gcr.io/p/img:1",
                          .command = {"python3", "train.py", "--steps=100"},
                          .accelerator_type = "tpu-v4-64",
                          .priority = "high",
                          .env = {{"A", "1"}},
                          .namespace_ = "team",
                          .extra_args = {"--x"}};
  row.selection_id = 42;
  const auto id = store_->record_submission(row);
  EXPECT_GT(id, 0);
  const auto found = store_->find_submission("tpu-a", "llama-8b");
  ASSERT_TRUE(found);
  SubmissionRow expected = row;
  expected.id = id;
  EXPECT_EQ(*found, expected);
  EXPECT_FALSE(store_->find_submission("tpu-a", "other"));
  EXPECT_FALSE(store_->find_submission("tpu-b", "llama-8b"));
}

TEST_P(StateStoreContract, ResubmissionOfTheSameNameReplacesTheRowWithANewId) {
  const auto first = store_->record_submission(submission("tpu-a", "w", 0));
  SubmissionRow again = submission("tpu-a", "w", 60000);
  again.docker_image = "gcr.io/p/img:2";
  const auto second = store_->record_submission(again);
  EXPECT_NE(first, second);
  const auto found = store_->find_submission("tpu-a", "w");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->id, second);
  EXPECT_EQ(found->docker_image, "gcr.io/p/img:2");
  EXPECT_EQ(store_->list_submissions({}).rows.size(), 1u);
}

// The intent written before xpk runs: stored only when the name is free, so that a duplicate
// create leaves the record (and the observed states) of the workload that has the name.
TEST_P(StateStoreContract, AnIntentIsStoredOnlyForAFreeNameAndCanBeTakenBack) {
  EXPECT_TRUE(store_->record_submission_intent(submission("tpu-a", "w", 0)));
  const auto first = store_->find_submission("tpu-a", "w");
  ASSERT_TRUE(first);
  store_->record_workload_event(WorkloadEvent{.cluster = "tpu-a",
                                              .workload = "w",
                                              .state = "RUNNING",
                                              .observed_at = at_ms(1000),
                                              .detail = "xpk workload list"});
  SubmissionRow again = submission("tpu-a", "w", 60000);
  again.docker_image = "gcr.io/p/other:1";
  EXPECT_FALSE(store_->record_submission_intent(again));
  const auto kept = store_->find_submission("tpu-a", "w");
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->id, first->id);
  EXPECT_EQ(kept->docker_image, first->docker_image);
  EXPECT_EQ(kept->state, "RUNNING");
  // Taken back only by the submission that wrote it (its submitted_at).
  EXPECT_FALSE(store_->forget_submission("tpu-a", "w", again.handle.submitted_at));
  EXPECT_TRUE(store_->find_submission("tpu-a", "w"));
  EXPECT_TRUE(store_->forget_submission("tpu-a", "w", first->handle.submitted_at));
  EXPECT_FALSE(store_->find_submission("tpu-a", "w"));
  EXPECT_FALSE(store_->forget_submission("tpu-a", "w", first->handle.submitted_at));
  EXPECT_THROW(store_->forget_submission("tpu-a", "w", "yesterday"), std::invalid_argument);
}

// Issue 27: a delete is recorded before xpk runs, then its outcome; one whose end nobody saw
// stays recorded as asked for.
TEST_P(StateStoreContract, ADeleteIsRecordedBeforeItRunsThenItsOutcomeOnce) {
  const std::int64_t first = store_->record_delete_intent("tpu-a", "w", at_ms(1000));
  const std::int64_t second = store_->record_delete_intent("tpu-a", "w", at_ms(2000));
  store_->record_delete_intent("tpu-b", "w", at_ms(3000));
  EXPECT_NE(first, second);
  auto deletes = store_->list_deletes("tpu-a", "w", 100);
  ASSERT_EQ(deletes.size(), 2u);
  EXPECT_EQ(deletes[0].id, second);  // newest first
  EXPECT_EQ(deletes[1].requested_at, at_ms(1000));
  EXPECT_EQ(deletes[1].outcome, std::nullopt);
  EXPECT_EQ(deletes[1].finished_at, std::nullopt);

  EXPECT_TRUE(store_->finish_delete(first, kDeleteFailed, std::string(5000, 'e'), at_ms(1500)));
  EXPECT_FALSE(store_->finish_delete(first, kDeleteDeleted, "", at_ms(1600)));  // finished once
  EXPECT_FALSE(store_->finish_delete(first + 1000, kDeleteDeleted, "", at_ms(1600)));
  EXPECT_THROW(store_->finish_delete(second, "gone", "", at_ms(1600)), std::invalid_argument);
  EXPECT_TRUE(store_->finish_delete(second, kDeleteDeleted, "", at_ms(2500)));
  deletes = store_->list_deletes("tpu-a", "w", 100);
  EXPECT_EQ(deletes[0].outcome, kDeleteDeleted);
  EXPECT_EQ(deletes[0].finished_at, at_ms(2500));
  EXPECT_EQ(deletes[1].outcome, kDeleteFailed);
  EXPECT_LE(deletes[1].detail.size(), 1100u);  // bounded, as every stored failure
  EXPECT_EQ(store_->list_deletes("tpu-a", "w", 1).size(), 1u);
  EXPECT_THROW(store_->record_delete_intent("", "w", at_ms(1)), std::invalid_argument);
  EXPECT_THROW(store_->list_deletes("tpu-a", "w", 0), std::invalid_argument);
}

// Issue 29: the dispatcher's nomination is recorded before the manager is patched, then its
// outcome, once; listed per Workload or all, newest first.
TEST_P(StateStoreContract, ANominationIsRecordedBeforeThePatchThenItsOutcomeOnce) {
  NominationRecord r;
  r.manager = "https://manager";
  r.workload_uid = "uid-1";
  r.namespace_ = "team";
  r.workload = "train";
  r.accelerator = "v4-32";
  r.clusters = {"w-a", "w-b"};
  r.selection_id = 0;
  r.requested_at = at_ms(1000);
  const std::int64_t first = store_->record_nomination(r);
  r.clusters = {"w-c"};
  r.requested_at = at_ms(2000);
  const std::int64_t second = store_->record_nomination(r);
  r.workload_uid = "uid-2";
  store_->record_nomination(r);
  auto rows = store_->list_nominations("uid-1", 100);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].id, second);  // newest first
  EXPECT_EQ(rows[1].clusters, (std::vector<std::string>{"w-a", "w-b"}));
  EXPECT_EQ(rows[1].selection_id, 0);
  EXPECT_EQ(rows[1].requested_at, at_ms(1000));
  EXPECT_EQ(rows[1].outcome, std::nullopt);
  EXPECT_EQ(store_->list_nominations("", 100).size(), 3u);

  EXPECT_TRUE(
      store_->finish_nomination(first, kNominationConflict, std::string(5000, 'c'), at_ms(1500)));
  EXPECT_FALSE(store_->finish_nomination(first, kNominationPatched, "", at_ms(1600)));
  EXPECT_THROW(store_->finish_nomination(second, "maybe", "", at_ms(1600)), std::invalid_argument);
  EXPECT_TRUE(store_->finish_nomination(second, kNominationPatched, "", at_ms(2500)));
  rows = store_->list_nominations("uid-1", 100);
  EXPECT_EQ(rows[0].outcome, kNominationPatched);
  EXPECT_EQ(rows[0].finished_at, at_ms(2500));
  EXPECT_EQ(rows[1].outcome, kNominationConflict);
  EXPECT_LE(rows[1].detail.size(), 1100u);
  NominationRecord nameless = r;
  nameless.workload_uid.clear();
  EXPECT_THROW(store_->record_nomination(nameless), std::invalid_argument);
  EXPECT_THROW(store_->list_nominations("uid-1", 0), std::invalid_argument);
}

TEST_P(StateStoreContract, SubmissionWithABadTimeOrNoNameIsRejectedBeforeWriting) {
  SubmissionRow bad = submission("tpu-a", "w", 0);
  bad.handle.submitted_at = "yesterday";
  EXPECT_THROW(store_->record_submission(bad), std::invalid_argument);
  EXPECT_THROW(store_->record_submission(submission("tpu-a", "", 0)), std::invalid_argument);
  EXPECT_THROW(store_->record_submission(submission("", "w", 0)), std::invalid_argument);
  EXPECT_TRUE(store_->list_submissions({}).rows.empty());
}

TEST_P(StateStoreContract, ListFiltersByClusterStateNameAndTime) {
  store_->record_submission(submission("tpu-a", "llama-1", 1000));
  store_->record_submission(submission("tpu-a", "gemma-2", 2000));
  store_->record_submission(submission("tpu-b", "llama-3", 3000));
  store_->record_workload_event(
      {.cluster = "tpu-a", .workload = "llama-1", .state = "RUNNING", .observed_at = at_ms(1500)});
  store_->record_workload_event(
      {.cluster = "tpu-b", .workload = "llama-3", .state = "QUEUED", .observed_at = at_ms(3500)});

  auto names = [&](const SubmissionQuery& q) {
    std::vector<std::string> out;
    for (const auto& r : store_->list_submissions(q).rows) out.push_back(r.handle.workload_name);
    return out;
  };
  EXPECT_THAT(names({}), ElementsAre("llama-3", "gemma-2", "llama-1"));
  EXPECT_THAT(names({.cluster = "tpu-a"}), ElementsAre("gemma-2", "llama-1"));
  EXPECT_THAT(names({.state = "RUNNING"}), ElementsAre("llama-1"));
  EXPECT_THAT(names({.name_contains = "llama"}), ElementsAre("llama-3", "llama-1"));
  EXPECT_THAT(names({.name_contains = "LLAMA"}), IsEmpty());  // case-sensitive everywhere
  EXPECT_THAT(names({.name_contains = "a_"}), IsEmpty());     // no LIKE wildcards
  EXPECT_THAT(names({.submitted_from = at_ms(2000), .submitted_before = at_ms(3000)}),
              ElementsAre("gemma-2"));
  EXPECT_THAT(names({.cluster = "tpu-a", .name_contains = "llama"}), ElementsAre("llama-1"));

  const auto llama1 = store_->find_submission("tpu-a", "llama-1");
  ASSERT_TRUE(llama1);
  EXPECT_EQ(llama1->state, "RUNNING");
  EXPECT_EQ(llama1->state_observed_at, at_ms(1500));
  EXPECT_EQ(store_->find_submission("tpu-a", "gemma-2")->state, std::nullopt);

  // Not seen to end: no state recorded (gemma-2) or one that is not terminal; the finished
  // ones are left out, from the rows and from the total.
  store_->record_submission(submission("tpu-b", "done-4", 4000));
  store_->record_workload_event(
      {.cluster = "tpu-b", .workload = "done-4", .state = "COMPLETED", .observed_at = at_ms(4500)});
  store_->record_submission(submission("tpu-b", "failed-5", 5000));
  store_->record_workload_event(
      {.cluster = "tpu-b", .workload = "failed-5", .state = "FAILED", .observed_at = at_ms(5500)});
  EXPECT_THAT(names({}), ElementsAre("failed-5", "done-4", "llama-3", "gemma-2", "llama-1"));
  EXPECT_THAT(names({.unfinished = true}), ElementsAre("llama-3", "gemma-2", "llama-1"));
  const SubmissionPage b = store_->list_submissions(
      {.cluster = "tpu-b", .unfinished = true, .limit = 1, .with_total = true});
  ASSERT_EQ(b.rows.size(), 1u);
  EXPECT_EQ(b.rows[0].handle.workload_name, "llama-3");
  EXPECT_EQ(b.total, 1);
}

TEST_P(StateStoreContract, PagesCoverEverySubmissionOnceNewestFirst) {
  // 25 submissions, several sharing a timestamp: the cursor must break ties by id.
  for (int i = 0; i < 25; ++i) {
    store_->record_submission(submission("tpu-a", "w-" + std::to_string(i), (i / 3) * 1000));
  }
  std::vector<std::int64_t> ids;
  std::set<std::string> names;
  SubmissionQuery q{.limit = 10};
  int pages = 0;
  for (;;) {
    const SubmissionPage page = store_->list_submissions(q);
    ++pages;
    for (const auto& r : page.rows) {
      ids.push_back(r.id);
      names.insert(r.handle.workload_name);
    }
    if (page.next_cursor.empty()) break;
    q.cursor = page.next_cursor;
  }
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(ids.size(), 25u);
  // The total counts every matching row, on every page; without with_total it is not counted.
  EXPECT_EQ(store_->list_submissions({.limit = 10}).total, -1);
  EXPECT_EQ(store_->list_submissions({.limit = 10, .with_total = true}).total, 25);
  const SubmissionPage second =
      store_->list_submissions({.limit = 10,
                                .cursor = store_->list_submissions({.limit = 10}).next_cursor,
                                .with_total = true});
  EXPECT_EQ(second.total, 25);
  EXPECT_EQ(second.rows.size(), 10u);
  EXPECT_EQ(
      store_->list_submissions({.name_contains = "w-1", .limit = 3, .with_total = true}).total,
      11);  // w-1, w-10 .. w-19
  EXPECT_EQ(names.size(), 25u);
  // Newest first: submitted_at descending, then id descending.
  std::vector<std::string> times;
  for (const auto& r : store_->list_submissions({.limit = 1000}).rows) {
    times.push_back(r.handle.submitted_at);
  }
  EXPECT_TRUE(std::is_sorted(times.rbegin(), times.rend()));
}

TEST_P(StateStoreContract, ListRejectsALimitOutOfRangeAndACursorItDidNotMake) {
  EXPECT_THROW(store_->list_submissions({.limit = 0}), std::invalid_argument);
  EXPECT_THROW(store_->list_submissions({.limit = 1001}), std::invalid_argument);
  for (const char* cursor : {"garbage", "s1.", "s1.12", "s1.x.3", "s1.5.-1", "s1.5.3junk"}) {
    EXPECT_THROW(store_->list_submissions({.cursor = cursor}), std::invalid_argument) << cursor;
  }
}

TEST_P(StateStoreContract, AResubmissionDoesNotInheritTheStateOfTheEarlierWorkload) {
  store_->record_submission(submission("tpu-a", "w", 0));
  store_->record_workload_event(
      {.cluster = "tpu-a", .workload = "w", .state = "COMPLETED", .observed_at = at_ms(10)});
  store_->record_submission(submission("tpu-a", "w", 100));
  EXPECT_EQ(store_->find_submission("tpu-a", "w")->state, std::nullopt);
  // For the new workload COMPLETED is a change, though the earlier one ended so too.
  EXPECT_TRUE(store_->record_workload_event(
      {.cluster = "tpu-a", .workload = "w", .state = "COMPLETED", .observed_at = at_ms(200)}));
  EXPECT_EQ(store_->find_submission("tpu-a", "w")->state, "COMPLETED");
}

// --- The one-time import of submissions.jsonl.

constexpr const char* kOldRecords =
    R"({"v":1,"cluster":"tpu-a","workload":"w1","namespace":"default","accelerator_type":"tpu-v4-64","device_class":"tpu","submitted_at":"2026-04-13T08:00:00.123Z","cluster_id":"c-a","project":"p","zone":"z","docker_image":"img:1","priority":"medium"}
{"v":1,"cluster":"tpu-a","workload":"w2","namespace":"ml","submitted_at":"2026-04-13T08:01:00.000Z"}

{"v":1,"cluster":"tpu-a","workload":"w1","namespace":"default","accelerator_type":"tpu-v4-64","device_class":"tpu","submitted_at":"2026-04-13T09:00:00.000Z","cluster_id":"c-a","project":"p","zone":"z","docker_image":"img:2","priority":"high"}
not json at all
{"v":1,"cluster":"tpu-b","workload":"w3"}
{"v":1,"cluster":"tpu-b","workload":"w4","namespace":"default","submitted_at":"2026-04-1)";

TEST_P(StateStoreContract, ImportTakesTheLastRecordOfEachPairAndSkipsTornLines) {
  const auto file = dir_.write("state/submissions.jsonl", kOldRecords);
  const auto result = store_->import_submissions_jsonl(file);
  EXPECT_TRUE(result.file_found);
  EXPECT_FALSE(result.already_imported);
  EXPECT_EQ(result.imported, 2);
  EXPECT_EQ(result.superseded, 1);
  EXPECT_EQ(result.skipped_lines, 3);
  EXPECT_EQ(result.kept_existing, 0);

  const auto w1 = store_->find_submission("tpu-a", "w1");
  ASSERT_TRUE(w1);
  EXPECT_EQ(w1->docker_image, "img:2");
  EXPECT_EQ(w1->priority, "high");
  EXPECT_EQ(w1->handle.submitted_at, "2026-04-13T09:00:00.000Z");
  EXPECT_EQ(w1->cluster_id, "c-a");
  const auto w2 = store_->find_submission("tpu-a", "w2");
  ASSERT_TRUE(w2);
  EXPECT_EQ(w2->handle.namespace_, "ml");
  EXPECT_EQ(w2->accelerator_type, "");
  EXPECT_EQ(w2->spec, std::nullopt);
}

TEST_P(StateStoreContract, ImportRunsOnceAndLeavesTheFileInPlaceReadOnly) {
  const auto file = dir_.write("state/submissions.jsonl", kOldRecords);
  const auto before = read_file(file);
  const auto first = store_->import_submissions_jsonl(file);
  EXPECT_TRUE(first.made_read_only) << first.note;
  EXPECT_EQ(read_file(file), before);
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0222, 0u);

  // Even a second store object (another process) finds it imported and reads nothing.
  store_->record_submission(submission("tpu-a", "w1", 999999));
  const auto second = open()->import_submissions_jsonl(file);
  EXPECT_TRUE(second.file_found);
  EXPECT_TRUE(second.already_imported);
  EXPECT_EQ(second.imported, 0);
  EXPECT_EQ(store_->find_submission("tpu-a", "w1")->handle.submitted_at, iso_at(999999));
}

TEST_P(StateStoreContract, ImportLeavesPairsTheStoreAlreadyHas) {
  store_->record_submission(submission("tpu-a", "w1", 5000000));
  const auto file = dir_.write("state/submissions.jsonl", kOldRecords);
  const auto result = store_->import_submissions_jsonl(file);
  EXPECT_EQ(result.imported, 1);
  EXPECT_EQ(result.kept_existing, 1);
  EXPECT_EQ(store_->find_submission("tpu-a", "w1")->docker_image, "gcr.io/p/img:1");
}

TEST_P(StateStoreContract, ImportOfAMissingFileDoesNothingAndCanRunLater) {
  const auto file = dir_.path() / "state" / "submissions.jsonl";
  const auto none = store_->import_submissions_jsonl(file);
  EXPECT_FALSE(none.file_found);
  EXPECT_FALSE(none.already_imported);
  dir_.write("state/submissions.jsonl", kOldRecords);
  EXPECT_EQ(store_->import_submissions_jsonl(file).imported, 2);
}

// --- Selections.

TEST_P(StateStoreContract, ASelectionReadsBackWithEveryCandidatesProbe) {
  ClusterSelection s = selection("tpu-v4-64", "tpu-b", 1000);
  s.selection_id = 99;  // ignored: reads give the stored id
  const auto id = store_->record_selection(s);
  const auto back = store_->get_selection(id);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->id, id);
  EXPECT_EQ(back->selection.selection_id, id);
  s.selection_id = id;
  EXPECT_EQ(back->selection, s);
  EXPECT_FALSE(store_->get_selection(id + 1000));
}

// What list_selection_summaries must answer: the fields of list_selections' records.
std::vector<SelectionSummary> summaries_of(const std::vector<SelectionRecord>& records) {
  std::vector<SelectionSummary> out;
  for (const SelectionRecord& r : records) {
    out.push_back({.id = r.id,
                   .same_as = r.same_as,
                   .accelerator = r.selection.accelerator,
                   .selected_cluster = r.selection.selected_cluster,
                   .decided_at = r.selection.decided_at,
                   .policy = r.selection.policy,
                   .reason = r.selection.reason});
  }
  return out;
}

TEST_P(StateStoreContract, SelectionsListNewestFirstAndByAccelerator) {
  const auto a = store_->record_selection(selection("tpu-v4-64", "tpu-b", 1000));
  const auto b = store_->record_selection(selection("a100", "gpu-x", 2000));
  ClusterSelection third = selection("tpu-v4-64", "tpu-a", 3000);
  third.policy = "score";
  // Text the database's JSON reader must unescape: quotes, a backslash, a newline, UTF-8.
  third.reason = "selected \"tpu-a\": score 0.91 \\ naïve\nsecond line";
  const auto c = store_->record_selection(third);
  std::vector<std::int64_t> ids;
  for (const auto& r : store_->list_selections(10)) ids.push_back(r.id);
  EXPECT_THAT(ids, ElementsAre(c, b, a));
  ids.clear();
  for (const auto& r : store_->list_selections(10, "tpu-v4-64")) ids.push_back(r.id);
  EXPECT_THAT(ids, ElementsAre(c, a));
  EXPECT_EQ(store_->list_selections(1).size(), 1u);
  EXPECT_THROW(store_->list_selections(0), std::invalid_argument);

  // Summaries: the same decisions, the same fields, without the explanations.
  const auto summaries = store_->list_selection_summaries(10);
  EXPECT_EQ(summaries, summaries_of(store_->list_selections(10)));
  ASSERT_EQ(summaries.size(), 3u);
  EXPECT_EQ(summaries[0].reason, third.reason);
  EXPECT_EQ(summaries[0].policy, "score");
  EXPECT_EQ(summaries[0].decided_at, iso_at(3000));
  EXPECT_EQ(summaries[1].policy, "");
  EXPECT_EQ(store_->list_selection_summaries(10, "tpu-v4-64"),
            summaries_of(store_->list_selections(10, "tpu-v4-64")));
  EXPECT_EQ(store_->list_selection_summaries(1).size(), 1u);
  EXPECT_TRUE(store_->list_selection_summaries(10, "h100").empty());
  EXPECT_THROW(store_->list_selection_summaries(0), std::invalid_argument);
  EXPECT_THROW(store_->list_selection_summaries(1001), std::invalid_argument);
}

TEST_P(StateStoreContract, ARepeatedDecisionSharesTheExplanationWithItsOwnIdAndTime) {
  ClusterSelection s = selection("tpu-v4-64", "tpu-b", 1000);
  s.reason = "selected tpu-b: the one with room";
  const auto base = store_->record_selection(s);
  store_->record_selection(selection("a100", "gpu-x", 1500));
  const auto again = store_->record_repeated_selection(base, iso_at(2000));
  const auto third = store_->record_repeated_selection(base, iso_at(3000));
  EXPECT_GT(again, base);
  EXPECT_GT(third, again);

  const auto read = store_->get_selection(again);
  ASSERT_TRUE(read);
  EXPECT_EQ(read->same_as, base);
  ClusterSelection expected = s;
  expected.selection_id = again;
  expected.decided_at = iso_at(2000);
  EXPECT_EQ(read->selection, expected);
  EXPECT_EQ(store_->get_selection(base)->same_as, 0);
  EXPECT_EQ(store_->get_selection(base)->selection.decided_at, s.decided_at);

  std::vector<std::pair<std::int64_t, std::int64_t>> listed;  // id, same_as
  for (const auto& r : store_->list_selections(10, "tpu-v4-64"))
    listed.emplace_back(r.id, r.same_as);
  EXPECT_THAT(listed,
              ElementsAre(std::pair(third, base), std::pair(again, base), std::pair(base, 0)));
  EXPECT_EQ(store_->list_selections(1).front().selection.decided_at, iso_at(3000));
  // A repeat's summary: its own id, time and same_as, the reason of the one it repeats.
  const auto summaries = store_->list_selection_summaries(10, "tpu-v4-64");
  EXPECT_EQ(summaries, summaries_of(store_->list_selections(10, "tpu-v4-64")));
  ASSERT_EQ(summaries.size(), 3u);
  EXPECT_EQ(summaries[0].same_as, base);
  EXPECT_EQ(summaries[0].reason, s.reason);
  EXPECT_EQ(summaries[0].decided_at, iso_at(3000));

  // Only a decision made afresh can be repeated; the failed call stores nothing.
  EXPECT_THROW(store_->record_repeated_selection(again, iso_at(4000)), std::invalid_argument);
  EXPECT_THROW(store_->record_repeated_selection(987654, iso_at(4000)), std::invalid_argument);
  EXPECT_THROW(store_->record_repeated_selection(0, iso_at(4000)), std::invalid_argument);
  EXPECT_THROW(store_->record_repeated_selection(base, "yesterday"), std::invalid_argument);
  EXPECT_EQ(store_->list_selections(10).size(), 4u);
}

TEST_P(StateStoreContract, PruningDeletesOldDecisionsNoSubmissionNamesAndKeepsWhatIsRepeated) {
  const auto old_unnamed = store_->record_selection(selection("tpu-v4-64", "tpu-a", 1000));
  const auto old_named = store_->record_selection(selection("tpu-v4-64", "tpu-b", 1100));
  const auto old_repeated = store_->record_selection(selection("a100", "gpu-x", 1200));
  const auto old_repeat = store_->record_repeated_selection(old_repeated, iso_at(1300));
  const auto kept_repeat = store_->record_repeated_selection(old_repeated, iso_at(5000));
  const auto old_base = store_->record_selection(selection("a100", "gpu-y", 1400));
  const auto named_repeat = store_->record_repeated_selection(old_base, iso_at(1500));
  const auto young = store_->record_selection(selection("tpu-v4-64", "tpu-a", 6000));
  SubmissionRow row = submission("tpu-b", "w-named", 1100);
  row.selection_id = old_named;
  store_->record_submission(row);
  row = submission("gpu-y", "w-named-repeat", 1500);
  row.selection_id = named_repeat;
  store_->record_submission(row);

  // Before 4000: the old unnamed decision and the old repeat go; the decision kept_repeat and
  // named_repeat read their explanation from stays, as do the named ones and the young one.
  EXPECT_EQ(store_->prune_selections(at_ms(4000), 100000), 2);
  std::vector<std::int64_t> ids;
  for (const auto& r : store_->list_selections(100)) ids.push_back(r.id);
  EXPECT_THAT(ids,
              ElementsAre(young, named_repeat, old_base, kept_repeat, old_repeated, old_named));
  EXPECT_FALSE(store_->get_selection(old_unnamed));
  EXPECT_FALSE(store_->get_selection(old_repeat));
  EXPECT_EQ(store_->get_selection(kept_repeat)->selection.selected_cluster, "gpu-x");
  EXPECT_EQ(store_->get_selection(named_repeat)->selection.selected_cluster, "gpu-y");
  EXPECT_EQ(store_->prune_selections(at_ms(4000), 100000), 0);  // nothing more is due

  // Once the repeat that shared it is gone, the decision goes too.
  EXPECT_EQ(store_->prune_selections(at_ms(5500), 100000), 2);
  ids.clear();
  for (const auto& r : store_->list_selections(100)) ids.push_back(r.id);
  EXPECT_THAT(ids, ElementsAre(young, named_repeat, old_base, old_named));
}

TEST_P(StateStoreContract, PruningGoesOnPastOneTransactionsWorth) {
  // More than one batch of each kind: 300 decisions, each repeated once, all old; one young.
  for (int i = 0; i < 300; ++i) {
    const auto id = store_->record_selection(selection("tpu-v4-64", "tpu-a", 1000 + i));
    store_->record_repeated_selection(id, iso_at(2000 + i));
  }
  const auto young = store_->record_selection(selection("tpu-v4-64", "tpu-a", 9000));
  // At most max_rows a call: the repeats (300) first, then the decisions they freed.
  EXPECT_EQ(store_->prune_selections(at_ms(5000), 250), 250);
  EXPECT_EQ(store_->prune_selections(at_ms(5000), 250), 250);
  EXPECT_EQ(store_->prune_selections(at_ms(5000), 250), 100);
  EXPECT_EQ(store_->prune_selections(at_ms(5000), 250), 0);
  EXPECT_THROW(store_->prune_selections(at_ms(5000), 0), std::invalid_argument);
  const auto left = store_->list_selections(1000);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left.front().id, young);
}

TEST_P(StateStoreContract, RepeatedDecisionsAreRecordedTogetherWithAZeroForAMissingOne) {
  const auto base = store_->record_selection(selection("tpu-v4-64", "tpu-b", 1000));
  const auto other = store_->record_selection(selection("a100", "gpu-x", 1500));
  EXPECT_TRUE(store_->record_repeated_selections({}).empty());
  const auto ids = store_->record_repeated_selections(
      {{base, iso_at(2000)}, {987654, iso_at(2001)}, {other, iso_at(2002)}, {base, iso_at(2003)}});
  ASSERT_EQ(ids.size(), 4u);
  EXPECT_GT(ids[0], other);
  EXPECT_EQ(ids[1], 0);  // not a stored decision: no row, the others recorded
  EXPECT_GT(ids[2], ids[0]);
  EXPECT_GT(ids[3], ids[2]);
  EXPECT_EQ(store_->get_selection(ids[0])->same_as, base);
  EXPECT_EQ(store_->get_selection(ids[0])->selection.decided_at, iso_at(2000));
  EXPECT_EQ(store_->get_selection(ids[2])->selection.selected_cluster, "gpu-x");
  EXPECT_EQ(store_->get_selection(ids[3])->selection.decided_at, iso_at(2003));
  EXPECT_EQ(store_->list_selections(10).size(), 5u);
  // A repeat of a repeat is missing too.
  EXPECT_EQ(store_->record_repeated_selections({{ids[0], iso_at(3000)}}).front(), 0);
  // Bad arguments fail the whole call before anything is written.
  EXPECT_THROW(store_->record_repeated_selections({{base, iso_at(3000)}, {0, iso_at(3001)}}),
               std::invalid_argument);
  EXPECT_THROW(store_->record_repeated_selections({{base, iso_at(3000)}, {base, "yesterday"}}),
               std::invalid_argument);
  EXPECT_EQ(store_->list_selections(10).size(), 5u);

  // Without waiting for the disk: the same rows and answers; later writes wait again.
  const auto quick = store_->record_repeated_selections(
      {{base, iso_at(4000)}, {987654, iso_at(4001)}}, StateStore::Sync::kNoWait);
  ASSERT_EQ(quick.size(), 2u);
  EXPECT_GT(quick[0], ids[3]);
  EXPECT_EQ(quick[1], 0);
  EXPECT_EQ(store_->get_selection(quick[0])->same_as, base);
  EXPECT_EQ(store_->get_selection(quick[0])->selection.decided_at, iso_at(4000));
  EXPECT_GT(store_->record_selection(selection("a100", "gpu-y", 5000)), quick[0]);
  EXPECT_EQ(store_->list_selections(10).size(), 7u);
}

TEST_P(StateStoreContract, AFailedDecisionWithNoClusterIsKeptToo) {
  ClusterSelection s = selection("tpu-v4-64", "", 1000);
  s.reason = "no cluster available: every candidate is full or unreachable";
  const auto id = store_->record_selection(s);
  s.selection_id = id;
  EXPECT_EQ(store_->get_selection(id)->selection, s);
}

// --- Probes.

TEST_P(StateStoreContract, ProbesRoundTripWithHowTheyWereObtained) {
  ProbeRecord p = probe("tpu-a", 100);
  p.backend = "kube";
  p.duration_ms = 7;
  p.extra_json = R"({"free_chips":{"v4":64}})";
  ProbeRecord down = probe("tpu-b", 100);
  down.result.reachable = false;
  down.result.queue_depth = std::nullopt;
  down.result.running_count = std::nullopt;
  down.result.error = "connection refused";
  const auto ids = store_->record_probes({p, down});
  ASSERT_EQ(ids.size(), 2u);
  p.id = ids[0];
  down.id = ids[1];
  EXPECT_THAT(store_->latest_probes(), ElementsAre(p, down));
  EXPECT_EQ(store_->latest_probe("tpu-b"), down);
  EXPECT_FALSE(store_->latest_probe("nope"));
}

TEST_P(StateStoreContract, TheLatestProbeIsTheNewestByTimeNotByArrival) {
  store_->record_probes({probe("tpu-a", 2000, 5)});
  store_->record_probes({probe("tpu-a", 1000, 9)});  // late arrival of an older probe
  ASSERT_TRUE(store_->latest_probe("tpu-a"));
  EXPECT_EQ(store_->latest_probe("tpu-a")->result.queue_depth, 5);
  EXPECT_EQ(store_->probe_history("tpu-a", at_ms(0), at_ms(10000)).size(), 2u);
}

TEST_P(StateStoreContract, HistoryIsTheHalfOpenRangeOldestFirst) {
  std::vector<ProbeRecord> batch;
  for (int i = 0; i < 10; ++i) batch.push_back(probe("tpu-a", i * 1000, i));
  batch.push_back(probe("tpu-b", 3000));
  store_->record_probes(batch);
  const auto h = store_->probe_history("tpu-a", at_ms(2000), at_ms(5000));
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].result.queue_depth, 2);
  EXPECT_EQ(h[2].result.queue_depth, 4);
  EXPECT_EQ(store_->probe_history("tpu-a", at_ms(0), at_ms(10000), 4).size(), 4u);
  EXPECT_THROW(store_->probe_history("tpu-a", at_ms(0), at_ms(1), 0), std::invalid_argument);
}

TEST_P(StateStoreContract, DownsamplingKeepsRecentProbesAndTheNewestPerClusterPerBucket) {
  // One probe a minute for 3 hours on two clusters; keep 1 h at full resolution, then hourly.
  std::vector<ProbeRecord> batch;
  for (int minute = 0; minute < 180; ++minute) {
    batch.push_back(probe("tpu-a", minute * 60000LL, minute));
    batch.push_back(probe("tpu-b", minute * 60000LL + 1, minute));
  }
  store_->record_probes(batch);
  const StoreTime now = at_ms(180 * 60000LL);
  const auto result =
      store_->downsample_probes(ProbeRetention{.full_resolution = 1h, .bucket = 60min}, now);
  // Hours 0 and 1 (older than now - 1h) shrink to one probe each: 2 x 2 x 59 deleted.
  EXPECT_EQ(result.thinned, 236);
  EXPECT_EQ(result.dropped, 0);
  const auto a = store_->probe_history("tpu-a", at_ms(0), now + 1h);
  ASSERT_EQ(a.size(), 62u);
  EXPECT_EQ(a[0].result.queue_depth, 59);  // the newest of hour 0
  EXPECT_EQ(a[1].result.queue_depth, 119);
  EXPECT_EQ(a[2].result.queue_depth, 120);  // full resolution from here
  // Running it again changes nothing.
  EXPECT_EQ(store_->downsample_probes({.full_resolution = 1h, .bucket = 60min}, now).thinned, 0);
}

TEST_P(StateStoreContract, DroppingOldHistoryKeepsTheLatestProbeOfAQuietCluster) {
  store_->record_probes({probe("quiet", 0, 3), probe("busy", 0), probe("busy", 50 * 3600000LL)});
  const auto result = store_->downsample_probes(
      {.full_resolution = 1h, .bucket = 60min, .drop_after = 24h}, at_ms(50 * 3600000LL));
  EXPECT_EQ(result.dropped, 2);
  EXPECT_TRUE(store_->probe_history("quiet", at_ms(0), at_ms(100 * 3600000LL)).empty());
  ASSERT_TRUE(store_->latest_probe("quiet"));
  EXPECT_EQ(store_->latest_probe("quiet")->result.queue_depth, 3);
  EXPECT_THROW(store_->downsample_probes({.bucket = 0min}, at_ms(0)), std::invalid_argument);
  EXPECT_THROW(store_->downsample_probes({.full_resolution = 2h, .drop_after = 1h}, at_ms(0)),
               std::invalid_argument);
}

TEST_P(StateStoreContract, ABatchWithOneBadProbeStoresNothing) {
  ProbeRecord bad = probe("tpu-b", 10);
  bad.extra_json = "[1, 2]";  // not an object
  EXPECT_THROW(store_->record_probes({probe("tpu-a", 0), bad}), std::invalid_argument);
  bad.extra_json = "{";
  EXPECT_THROW(store_->record_probes({probe("tpu-a", 0), bad}), std::invalid_argument);
  ProbeRecord late = probe("tpu-b", 10);
  late.result.probed_at = "not a time";
  EXPECT_THROW(store_->record_probes({probe("tpu-a", 0), late}), std::invalid_argument);
  EXPECT_TRUE(store_->latest_probes().empty());
}

// --- Workload events.

TEST_P(StateStoreContract, OnlyChangesOfStateAreRecorded) {
  auto event = [](const std::string& state, std::int64_t ms) {
    return WorkloadEvent{.cluster = "tpu-a",
                         .workload = "w",
                         .state = state,
                         .observed_at = at_ms(ms),
                         .detail = "seen by probe " + std::to_string(ms)};
  };
  EXPECT_TRUE(store_->record_workload_event(event("QUEUED", 0)));
  EXPECT_FALSE(store_->record_workload_event(event("QUEUED", 10)));
  EXPECT_TRUE(store_->record_workload_event(event("RUNNING", 20)));
  EXPECT_FALSE(store_->record_workload_event(event("QUEUED", 15)));  // older than the latest
  EXPECT_TRUE(store_->record_workload_event(event("COMPLETED", 30)));
  const auto events = store_->list_workload_events("tpu-a", "w");
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].state, "QUEUED");
  EXPECT_EQ(events[0].detail, "seen by probe 0");
  EXPECT_EQ(events[1].state, "RUNNING");
  EXPECT_EQ(events[1].observed_at, at_ms(20));
  EXPECT_EQ(events[2].state, "COMPLETED");
  EXPECT_EQ(store_->list_workload_events("tpu-a", "w", 2)[0].state, "RUNNING");
  EXPECT_TRUE(store_->list_workload_events("tpu-b", "w").empty());
}

TEST_P(StateStoreContract, ClusterEventsAreTheClustersChangesInAWindowOldestFirst) {
  auto event = [](const std::string& cluster, const std::string& workload, const std::string& state,
                  std::int64_t ms) {
    return WorkloadEvent{.cluster = cluster,
                         .workload = workload,
                         .state = state,
                         .observed_at = at_ms(ms),
                         .detail = ""};
  };
  ASSERT_TRUE(store_->record_workload_event(event("tpu-a", "w2", "QUEUED", 5)));
  ASSERT_TRUE(store_->record_workload_event(event("tpu-a", "w1", "QUEUED", 0)));
  ASSERT_TRUE(store_->record_workload_event(event("tpu-b", "w1", "QUEUED", 1)));
  ASSERT_TRUE(store_->record_workload_event(event("tpu-a", "w1", "RUNNING", 20)));
  ASSERT_TRUE(store_->record_workload_event(event("tpu-a", "w2", "RUNNING", 30)));
  const auto all = store_->cluster_events("tpu-a", at_ms(0), at_ms(31));
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].workload, "w1");  // by observed_at, not by insertion order
  EXPECT_EQ(all[1].workload, "w2");
  EXPECT_EQ(all[2].state, "RUNNING");
  EXPECT_EQ(all[3].observed_at, at_ms(30));
  const auto window = store_->cluster_events("tpu-a", at_ms(5), at_ms(30));  // [5, 30)
  ASSERT_EQ(window.size(), 2u);
  EXPECT_EQ(window[0].state, "QUEUED");
  EXPECT_EQ(window[1].workload, "w1");
  EXPECT_EQ(store_->cluster_events("tpu-a", at_ms(0), at_ms(31), 1).at(0).workload, "w1");
  EXPECT_TRUE(store_->cluster_events("tpu-c", at_ms(0), at_ms(31)).empty());
  EXPECT_THROW(store_->cluster_events("tpu-a", at_ms(0), at_ms(31), 0), std::invalid_argument);
}

// --- Exports.

TEST_P(StateStoreContract, AnExportRunsThenFinishesOnce) {
  const auto id = store_->start_export({.workload = "w",
                                        .cluster = "tpu-a",
                                        .dest = "gs://b/x",
                                        .progress_json = R"({"ranks":4})",
                                        .started_at = at_ms(0)});
  auto e = store_->get_export(id);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->state, kExportRunning);
  EXPECT_EQ(e->result_json, "null");
  EXPECT_EQ(e->finished_at, std::nullopt);
  EXPECT_TRUE(store_->update_export_progress(id, R"({"ranks":4,"done":2})"));
  EXPECT_TRUE(store_->finish_export(id, kExportDone, R"({"gcs_uris":{"0":"gs://b/x/rank-0.log"}})",
                                    at_ms(5000)));
  e = store_->get_export(id);
  EXPECT_EQ(e->state, kExportDone);
  EXPECT_EQ(e->progress_json, R"({"ranks":4,"done":2})");
  EXPECT_EQ(e->finished_at, at_ms(5000));
  // Finished is final.
  EXPECT_FALSE(store_->finish_export(id, kExportFailed, "{}", at_ms(6000)));
  EXPECT_FALSE(store_->update_export_progress(id, "{}"));
  EXPECT_EQ(store_->get_export(id)->state, kExportDone);
  EXPECT_FALSE(store_->update_export_progress(id + 100, "{}"));
  EXPECT_FALSE(store_->get_export(id + 100));
  EXPECT_THROW(store_->finish_export(id, "paused", "{}", at_ms(0)), std::invalid_argument);
  EXPECT_THROW(store_->update_export_progress(id, "{oops"), std::invalid_argument);
}

TEST_P(StateStoreContract, ExportsListNewestFirstAndByWorkload) {
  const auto a = store_->start_export({.workload = "w1", .cluster = "c", .dest = "gs://b/1"});
  const auto b = store_->start_export({.workload = "w2", .cluster = "c", .dest = "gs://b/2"});
  std::vector<std::int64_t> ids;
  for (const auto& e : store_->list_exports(10)) ids.push_back(e.id);
  EXPECT_THAT(ids, ElementsAre(b, a));
  ASSERT_EQ(store_->list_exports(10, "w1").size(), 1u);
  EXPECT_EQ(store_->list_exports(10, "w1")[0].id, a);
}

// --- Recoveries.

TEST_P(StateStoreContract, RecoveriesAreReplacedByIncidentAndReadBackPerWorkload) {
  RecoveryRecord r{.incident_id = "inc-1",
                   .workload = "train",
                   .cluster = "tpu-a",
                   .attempts = 1,
                   .t_violation = at_ms(0),
                   .detected = at_ms(1500),
                   .classification = "infrastructure",
                   .outcome = "open",
                   .detail_json = R"({"reason":"cluster unreachable"})"};
  store_->put_recovery(r);
  r.decided = at_ms(2000);
  r.submitted = at_ms(2500);
  r.admitted = at_ms(9000);
  r.recovered = at_ms(309000);
  r.outcome = "recovered";
  r.to_cluster = "tpu-b";
  r.replacement = "train-r1";
  r.cause = "cluster tpu-a unreachable for 60s";
  r.detail_json = R"({"replacement":"train-r1"})";
  store_->put_recovery(r);
  store_->put_recovery({.incident_id = "inc-2", .workload = "other", .attempts = 0});
  store_->put_recovery({.incident_id = "inc-3", .workload = "train", .attempts = 2});

  EXPECT_EQ(store_->get_recovery("inc-1"), r);
  EXPECT_FALSE(store_->get_recovery("inc-9"));
  std::vector<std::string> ids;
  for (const auto& x : store_->list_recoveries(10, "train")) ids.push_back(x.incident_id);
  EXPECT_THAT(ids, ElementsAre("inc-3", "inc-1"));
  EXPECT_EQ(store_->list_recoveries(10).size(), 3u);
  EXPECT_THROW(store_->put_recovery({.incident_id = "", .workload = "w"}), std::invalid_argument);
  EXPECT_THROW(store_->put_recovery({.incident_id = "x", .workload = "w", .detail_json = "{"}),
               std::invalid_argument);
}

TEST_P(StateStoreContract, TimesAreKeptToTheMillisecond) {
  const StoreTime t = at_ms(1234) + std::chrono::microseconds(567);
  store_->put_recovery({.incident_id = "i", .workload = "w", .t_violation = t});
  EXPECT_EQ(store_->get_recovery("i")->t_violation, at_ms(1234));
}

// --- Managed workloads.

ManagedWorkloadRecord managed(const std::string& name) {
  ManagedWorkloadRecord m;
  m.name = name;
  m.spec.name = name;
  m.spec.docker_image = "gcr.io/p/train:1";
  m.spec.command = {"python3", "train.py"};
  m.spec.accelerator_type = "tpu-v4-64";
  m.spec.env = {{"STEPS", "100"}};
  m.max_recoveries = 2;
  m.stable_after = std::chrono::milliseconds(30000);
  m.recover_on_failure = true;
  m.incarnation = name;
  m.cluster = "tpu-a";
  m.state = ManagedState::kStarting;
  m.created_at = at_ms(0);
  m.updated_at = at_ms(0);
  return m;
}

TEST_P(StateStoreContract, ManagedWorkloadsAreCreatedOnceUpdatedListedByStateAndDeleted) {
  ManagedWorkloadRecord a = managed("train-a");
  a.version = 7;  // ignored: a new row is at version 1
  EXPECT_TRUE(store_->create_managed(a));
  EXPECT_FALSE(store_->create_managed(managed("train-a")));  // the name is taken
  a.version = 1;
  EXPECT_EQ(store_->get_managed("train-a"), a);
  EXPECT_FALSE(store_->get_managed("nope"));

  a.incarnation = "train-a-r1";
  a.cluster = "tpu-b";
  a.state = ManagedState::kRecovering;
  a.phase = RecoveryPhase::kDeciding;  // typed, in a column of its own (schema 6)
  a.attempts = 1;
  a.updated_at = at_ms(5000);
  a.detail_json = R"({"incident":"train-a-1"})";
  EXPECT_TRUE(store_->update_managed(a));
  EXPECT_EQ(a.version, 2);
  EXPECT_EQ(store_->get_managed("train-a"), a);
  ManagedWorkloadRecord ghost = managed("ghost");
  EXPECT_FALSE(store_->update_managed(ghost));

  ManagedWorkloadRecord b = managed("train-b");
  b.state = ManagedState::kCompleted;
  ASSERT_TRUE(store_->create_managed(b));
  std::vector<std::string> names;
  for (const auto& m : store_->list_managed(10)) names.push_back(m.name);
  EXPECT_THAT(names, ElementsAre("train-a", "train-b"));
  names.clear();
  for (const auto& m :
       store_->list_managed(10, {ManagedState::kStarting, ManagedState::kRecovering})) {
    names.push_back(m.name);
  }
  EXPECT_THAT(names, ElementsAre("train-a"));
  EXPECT_EQ(store_->list_managed(1).size(), 1u);
  EXPECT_THROW(store_->list_managed(0), std::invalid_argument);

  EXPECT_TRUE(store_->delete_managed("train-b"));
  EXPECT_FALSE(store_->delete_managed("train-b"));
  EXPECT_EQ(store_->list_managed(10).size(), 1u);

  ManagedWorkloadRecord bad = managed("bad");
  bad.detail_json = "[1]";
  EXPECT_THROW(store_->create_managed(bad), std::invalid_argument);
  bad = managed("");
  EXPECT_THROW(store_->create_managed(bad), std::invalid_argument);
}

// Issue 27: two writers of one managed workload never overwrite each other unseen: an update
// applies only over the version it read, and a lease holder's only while it holds the lease.
TEST_P(StateStoreContract, ManagedUpdatesAreCompareAndSetOnTheVersionAndTheLease) {
  ASSERT_TRUE(store_->create_managed(managed("train")));
  ManagedWorkloadRecord pass = *store_->get_managed("train");    // the supervisor's read
  ManagedWorkloadRecord cancel = *store_->get_managed("train");  // the API's read
  cancel.state = ManagedState::kCancelled;
  ASSERT_TRUE(store_->update_managed(cancel));
  pass.state = ManagedState::kRecovering;
  EXPECT_FALSE(store_->update_managed(pass));  // written since: nothing changes
  EXPECT_EQ(pass.version, 1);
  EXPECT_EQ(store_->get_managed("train")->state, ManagedState::kCancelled);
  pass = *store_->get_managed("train");  // read again: the cancel is seen
  EXPECT_EQ(pass.version, 2);

  // Written on behalf of the supervisor's lease: only while that token holds it.
  const Lease held =
      *store_->acquire_lease("supervisor", "replica-a", std::chrono::seconds(30), at_ms(0));
  pass.detail_json = R"({"seen":1})";
  EXPECT_TRUE(store_->update_managed(pass, LeaseFence{"supervisor", held.token}));
  EXPECT_EQ(pass.version, 3);
  // The lease expires and another replica takes it: the first one's writes no longer apply.
  const Lease next =
      *store_->acquire_lease("supervisor", "replica-b", std::chrono::seconds(30), at_ms(60000));
  ASSERT_NE(next.token, held.token);
  pass.detail_json = R"({"seen":2})";
  EXPECT_FALSE(store_->update_managed(pass, LeaseFence{"supervisor", held.token}));
  EXPECT_EQ(store_->get_managed("train")->detail_json, R"({"seen":1})");
  EXPECT_TRUE(store_->update_managed(pass, LeaseFence{"supervisor", next.token}));
  EXPECT_FALSE(store_->update_managed(pass, LeaseFence{"no-such-lease", next.token}));
}

// Issue 27: the supervisor reads every managed workload, not the first 1000: pages by name.
TEST_P(StateStoreContract, ManagedWorkloadsPageByNameAndAllOfThemCanBeRead) {
  constexpr int kCount = 2003;
  for (int i = 0; i < kCount; ++i) {
    ManagedWorkloadRecord m = managed(fmt::format("m-{:04}", i));
    if (i % 2 == 1) m.state = ManagedState::kRecovering;
    ASSERT_TRUE(store_->create_managed(m));
  }
  std::vector<std::string> names;
  for (const auto& m : store_->list_managed(2, {}, "m-0007")) names.push_back(m.name);
  EXPECT_THAT(names, ElementsAre("m-0008", "m-0009"));
  names.clear();
  for (const auto& m : store_->list_managed(2, {ManagedState::kRecovering}, "m-0007"))
    names.push_back(m.name);
  EXPECT_THAT(names, ElementsAre("m-0009", "m-0011"));

  const auto all = list_all_managed(*store_);
  ASSERT_EQ(all.size(), std::size_t{kCount});
  for (int i = 0; i < kCount; ++i) ASSERT_EQ(all[i].name, fmt::format("m-{:04}", i));
  EXPECT_EQ(list_all_managed(*store_, {ManagedState::kRecovering}).size(), std::size_t{kCount / 2});
}

TEST_P(StateStoreContract, AManagedWorkloadSurvivesReopening) {
  ASSERT_TRUE(store_->create_managed(managed("kept")));
  store_.reset();
  store_ = open();
  ManagedWorkloadRecord want = managed("kept");
  want.version = 1;  // a new row's
  EXPECT_EQ(store_->get_managed("kept"), want);
}

// --- Circuit breakers.

TEST_P(StateStoreContract, ABreakerIsCreatedOnceThenChangedOnlyFromTheVersionRead) {
  BreakerState s{.key = "tpu-a/tpu-v4-64",
                 .state = kBreakerOpen,
                 .consecutive_failures = 3,
                 .trips = 1,
                 .opened_until = at_ms(60000),
                 .updated_at = at_ms(0)};
  EXPECT_TRUE(store_->compare_and_set_breaker(s));
  EXPECT_FALSE(store_->compare_and_set_breaker(s));  // version 0 again: another got there first
  auto stored = store_->get_breaker(s.key);
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->version, 1);
  BreakerState expected = s;
  expected.version = 1;
  EXPECT_EQ(*stored, expected);

  BreakerState half = *stored;
  half.state = kBreakerHalfOpen;
  half.opened_until = std::nullopt;
  EXPECT_TRUE(store_->compare_and_set_breaker(half));
  EXPECT_FALSE(store_->compare_and_set_breaker(half));  // stale version 1
  EXPECT_EQ(store_->get_breaker(s.key)->version, 2);
  EXPECT_EQ(store_->get_breaker(s.key)->state, kBreakerHalfOpen);
  EXPECT_EQ(store_->get_breaker(s.key)->opened_until, std::nullopt);

  EXPECT_TRUE(store_->compare_and_set_breaker({.key = "a-cluster", .updated_at = at_ms(0)}));
  std::vector<std::string> keys;
  for (const auto& b : store_->list_breakers()) keys.push_back(b.key);
  EXPECT_THAT(keys, ElementsAre("a-cluster", "tpu-a/tpu-v4-64"));
  EXPECT_FALSE(store_->get_breaker("none"));
  EXPECT_THROW(store_->compare_and_set_breaker({.key = "k", .state = "ajar"}),
               std::invalid_argument);
}

// --- Leases.

TEST_P(StateStoreContract, ALeaseHasOneHolderUntilItExpires) {
  const auto a = store_->acquire_lease("supervisor", "replica-a", 10s, at_ms(0));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->holder, "replica-a");
  EXPECT_EQ(a->token, 1);
  EXPECT_EQ(a->acquired_at, at_ms(0));
  EXPECT_EQ(a->expires_at, at_ms(10000));
  EXPECT_EQ(a->heartbeat_at, at_ms(0));
  EXPECT_FALSE(store_->acquire_lease("supervisor", "replica-b", 10s, at_ms(9999)));
  EXPECT_TRUE(store_->acquire_lease("other-lease", "replica-b", 10s, at_ms(0)));

  // Expired: the next holder takes it with a new fencing token.
  const auto b = store_->acquire_lease("supervisor", "replica-b", 10s, at_ms(10000));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->holder, "replica-b");
  EXPECT_EQ(b->token, 2);
  EXPECT_EQ(b->acquired_at, at_ms(10000));
  EXPECT_FALSE(store_->renew_lease("supervisor", "replica-a", 10s, at_ms(10001)));
  EXPECT_EQ(store_->get_lease("supervisor"), b);
}

TEST_P(StateStoreContract, RenewingKeepsTheTokenAndFailsOnceExpired) {
  ASSERT_TRUE(store_->acquire_lease("l", "me", 10s, at_ms(0)));
  const auto renewed = store_->renew_lease("l", "me", 10s, at_ms(8000));
  ASSERT_TRUE(renewed);
  EXPECT_EQ(renewed->token, 1);
  EXPECT_EQ(renewed->acquired_at, at_ms(0));
  EXPECT_EQ(renewed->expires_at, at_ms(18000));
  EXPECT_EQ(renewed->heartbeat_at, at_ms(8000));  // the holder's last heartbeat
  // Acquiring what one already holds renews it too.
  EXPECT_EQ(store_->acquire_lease("l", "me", 10s, at_ms(9000))->token, 1);
  EXPECT_FALSE(store_->renew_lease("l", "me", 10s, at_ms(19000)));
  // Taking it back after expiry is a new term.
  EXPECT_EQ(store_->acquire_lease("l", "me", 10s, at_ms(19000))->token, 2);
  EXPECT_FALSE(store_->renew_lease("never-taken", "me", 10s, at_ms(0)));
}

TEST_P(StateStoreContract, ReleasingLetsAnotherTakeTheLeaseAtOnce) {
  ASSERT_TRUE(store_->acquire_lease("l", "a", 60s, at_ms(0)));
  EXPECT_FALSE(store_->release_lease("l", "b", at_ms(1000)));
  EXPECT_TRUE(store_->release_lease("l", "a", at_ms(1000)));
  EXPECT_FALSE(store_->release_lease("l", "a", at_ms(1000)));
  const auto b = store_->acquire_lease("l", "b", 60s, at_ms(1000));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->token, 2);
  EXPECT_FALSE(store_->get_lease("unknown"));
  EXPECT_THROW(store_->acquire_lease("l", "", 60s, at_ms(0)), std::invalid_argument);
  EXPECT_THROW(store_->acquire_lease("l", "a", 0s, at_ms(0)), std::invalid_argument);
}

}  // namespace
}  // namespace falcon::testing
