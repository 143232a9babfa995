// The pure parts of CloudLogRetriever: the LQL filter (checked as text and through the local
// server's real LQL parser and evaluator), quoting, rank attribution of GKE entries, the time
// window, lines, and the export's chunk budget and destination. No server.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "falcon/errors.h"
#include "gcp_server/lql.h"
#include "logs/exit_code.h"
#include "logs/filter_builder.h"
#include "logs/gke_entries.h"
#include "logs/gke_log_env.h"
#include "logs/log_exporter.h"

namespace falcon::logs {
namespace {

using falcon::testing::EntrySpec;
using falcon::testing::gke_entry;
using falcon::testing::GkePlace;
using falcon::testing::kLogStartNanos;
using falcon::testing::PodLabels;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::size_t kKiB = 1024;
constexpr std::size_t kMiB = 1024 * 1024;

WorkloadQuery query_for(const GkePlace& place, std::optional<std::vector<int>> ranks = {{0}},
                        int slice = 0) {
  WorkloadQuery q;
  q.project = place.project;
  q.cluster_id = place.cluster_id;
  q.namespace_ = place.namespace_;
  q.workload = place.workload;
  q.slice = slice;
  q.ranks = std::move(ranks);
  q.not_before_nanos = kLogStartNanos;
  return q;
}

bool server_matches(const std::string& filter, const json& entry) {
  return fake::lql::Filter::parse(filter).matches(fake::lql::JsonEntryView(entry));
}

std::string tree(const std::string& filter) {
  return fake::lql::Filter::parse(filter).debug_string();
}

gcp::LogEntry parsed(const json& entry) {
  const json page = {{"entries", json::array({entry})}};
  return gcp::parse_log_entries_page(page.dump(), "test").entries.at(0);
}

template <typename F>
void expect_invalid_argument(F&& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "expected LogRetrievalError containing " << fragment;
  } catch (const LogRetrievalError& e) {
    EXPECT_EQ(e.status(), "INVALID_ARGUMENT");
    EXPECT_EQ(e.http_status(), 0);
    EXPECT_THAT(e.what(), HasSubstr(fragment));
  }
}

// --- quoting

TEST(QuoteLql, WrapsInDoubleQuotesAndEscapesBackslashAndQuote) {
  EXPECT_EQ(quote_lql("llama-bench", ""), R"("llama-bench")");
  EXPECT_EQ(quote_lql(R"(a"b\c)", ""), R"("a\"b\\c")");
  EXPECT_EQ(quote_lql(R"(\")", ""), R"("\\\"")");
  EXPECT_EQ(quote_lql("", ""), R"("")");
  EXPECT_EQ(quote_lql("ünïcødé", ""), "\"ünïcødé\"");
}

TEST(QuoteLql, RefusesControlCharacters) {
  expect_invalid_argument([] { quote_lql("a\nb", "namespace"); }, "namespace");
  expect_invalid_argument([] { quote_lql(std::string("a\0b", 3), "workload name"); },
                          "control character");
  expect_invalid_argument([] { quote_lql("tab\there", ""); }, "control character");
  expect_invalid_argument([] { quote_lql("del\x7f", ""); }, "control character");
}

// --- the filter as text

TEST(WorkloadFilter, OneRankIsTheDocumentedQuery) {
  const std::string expected =
      "resource.type=\"k8s_container\"\n"
      "AND resource.labels.project_id=\"falcon-bench\"\n"
      "AND resource.labels.cluster_name=\"tpu-v4-cluster\"\n"
      "AND resource.labels.namespace_name=\"default\"\n"
      "AND timestamp>=\"2026-04-13T07:00:00.000000000Z\"\n"
      "AND ((labels.\"k8s-pod/jobset_sigs_k8s_io/jobset-name\"=\"llama-bench\" AND "
      "labels.\"k8s-pod/jobset_sigs_k8s_io/job-index\"=\"0\" AND "
      "labels.\"k8s-pod/batch_kubernetes_io/job-completion-index\"=\"3\") OR "
      "(resource.labels.pod_name:\"llama-bench-slice-job-0-3-\" AND "
      "(NOT labels.\"k8s-pod/jobset_sigs_k8s_io/jobset-name\":* OR "
      "NOT labels.\"k8s-pod/jobset_sigs_k8s_io/job-index\":* OR "
      "NOT labels.\"k8s-pod/batch_kubernetes_io/job-completion-index\":*)))";
  EXPECT_EQ(build_workload_filter(query_for({}, std::vector<int>{3})), expected);
}

TEST(WorkloadFilter, ParsesAsTheIntendedTree) {
  // Every group parenthesised: the server sees ANDs of the fixed clauses and one OR.
  EXPECT_EQ(
      tree(build_workload_filter(query_for({}, std::vector<int>{0, 2}))),
      R"(AND(resource.type="k8s_container", resource.labels.project_id="falcon-bench", )"
      R"(resource.labels.cluster_name="tpu-v4-cluster", resource.labels.namespace_name="default", )"
      R"(timestamp>="2026-04-13T07:00:00.000000000Z", )"
      R"(OR(AND(labels."k8s-pod/jobset_sigs_k8s_io/jobset-name"="llama-bench", )"
      R"(labels."k8s-pod/jobset_sigs_k8s_io/job-index"="0", )"
      R"(OR(labels."k8s-pod/batch_kubernetes_io/job-completion-index"="0", )"
      R"(labels."k8s-pod/batch_kubernetes_io/job-completion-index"="2")), )"
      R"(AND(OR(resource.labels.pod_name:"llama-bench-slice-job-0-0-", )"
      R"(resource.labels.pod_name:"llama-bench-slice-job-0-2-"), )"
      R"(OR(NOT(labels."k8s-pod/jobset_sigs_k8s_io/jobset-name":*), )"
      R"(NOT(labels."k8s-pod/jobset_sigs_k8s_io/job-index":*), )"
      R"(NOT(labels."k8s-pod/batch_kubernetes_io/job-completion-index":*))))))");
}

TEST(WorkloadFilter, EveryRankOfTheSliceLeavesTheWorkerOut) {
  const std::string filter = build_workload_filter(query_for({}, std::nullopt, 1));
  EXPECT_THAT(filter, HasSubstr(R"(labels."k8s-pod/jobset_sigs_k8s_io/job-index"="1")"));
  EXPECT_THAT(filter, HasSubstr(R"(resource.labels.pod_name:"llama-bench-slice-job-1-")"));
  EXPECT_THAT(filter, Not(HasSubstr(R"(job-completion-index"=)")));
}

TEST(WorkloadFilter, EverySliceLeavesSliceAndWorkerOut) {
  WorkloadQuery q = query_for({}, std::vector<int>{3}, 1);
  q.every_slice = true;
  const std::string filter = build_workload_filter(q);
  EXPECT_THAT(filter,
              HasSubstr(R"(labels."k8s-pod/jobset_sigs_k8s_io/jobset-name"="llama-bench")"));
  EXPECT_THAT(filter, HasSubstr(R"(resource.labels.pod_name:"llama-bench-slice-job-")"));
  EXPECT_THAT(filter, Not(HasSubstr(R"(job-index"=)")));
  EXPECT_THAT(filter, Not(HasSubstr(R"(job-completion-index"=)")));
  EXPECT_THAT(filter, Not(HasSubstr("slice-job-1")));
}

TEST(WorkloadFilter, GrepIsAndedLastOnLinesOfItsOwn) {
  WorkloadQuery q = query_for({});
  q.grep = R"(textPayload:"step_time" OR severity>=ERROR)";
  const std::string filter = build_workload_filter(q);
  EXPECT_TRUE(filter.ends_with("\nAND (\ntextPayload:\"step_time\" OR severity>=ERROR\n)"))
      << filter;
  // The grep's OR stays inside its group.
  EXPECT_THAT(tree(filter), HasSubstr(R"(OR(textPayload:"step_time", severity>="ERROR"))"));
}

TEST(WorkloadFilter, RefusesAGrepThatCouldEscapeItsParentheses) {
  WorkloadQuery q = query_for({});
  for (const std::string grep :
       {"a) OR (b", "(a", "a)", "\"unterminated", "x -- comment", "line\nbreak"}) {
    q.grep = grep;
    expect_invalid_argument([&] { build_workload_filter(q); }, "grep");
  }
  // Parentheses and comment markers inside strings are text.
  q.grep = R"(textPayload:"a) -- (b\"" AND (severity=ERROR))";
  EXPECT_NO_THROW(build_workload_filter(q));
}

TEST(WorkloadFilter, RefusesMissingNamesAndNegativeIndexes) {
  GkePlace place;
  WorkloadQuery q = query_for(place);
  q.namespace_ = "";
  expect_invalid_argument([&] { build_workload_filter(q); }, "namespace");
  q = query_for(place);
  q.project = "";
  expect_invalid_argument([&] { build_workload_filter(q); }, "project");
  q = query_for(place, std::vector<int>{2, -1});
  expect_invalid_argument([&] { build_workload_filter(q); }, "rank -1");
  q = query_for(place, std::vector<int>{});
  expect_invalid_argument([&] { build_workload_filter(q); }, "empty");
  q = query_for(place, std::nullopt, -1);
  expect_invalid_argument([&] { build_workload_filter(q); }, "slice -1");
}

TEST(WorkloadFilter, TooManyRanksFallBackToTheWholeSlice) {
  std::vector<int> ranks;
  for (int r = 0; r < 2000; ++r) ranks.push_back(r);
  const std::string filter = build_workload_filter(query_for({}, ranks));
  EXPECT_LE(filter.size(), kMaxFilterLength);
  EXPECT_EQ(filter, build_workload_filter(query_for({}, std::nullopt)));
}

// --- the filter through the server's LQL evaluator

TEST(WorkloadFilterOnServer, SelectsTheRankAndNothingElse) {
  const GkePlace place;
  const std::string filter = build_workload_filter(query_for(place, std::vector<int>{1}));
  const auto at = [&](EntrySpec spec) {
    if (spec.text.empty()) spec.text = "step 1";
    spec.timestamp_nanos = kLogStartNanos + 5;
    return gke_entry(place, spec);
  };
  EXPECT_TRUE(server_matches(filter, at({.worker = 1})));
  EXPECT_TRUE(server_matches(filter, at({.worker = 1, .stderr_stream = true})));
  EXPECT_TRUE(server_matches(filter, at({.worker = 1, .json_payload = true})));
  // Without the pod labels, or with them spelt otherwise, the pod name decides.
  EXPECT_TRUE(server_matches(filter, at({.worker = 1, .labels = PodLabels::kNone})));
  EXPECT_TRUE(server_matches(filter, at({.worker = 1, .labels = PodLabels::kDotted})));
  EXPECT_TRUE(server_matches(filter, at({.worker = 1, .labels = PodLabels::kNoJobset})));

  EXPECT_FALSE(server_matches(filter, at({.worker = 0})));
  EXPECT_FALSE(server_matches(filter, at({.worker = 11})));
  EXPECT_FALSE(server_matches(filter, at({.worker = 0, .labels = PodLabels::kNone})));
  EXPECT_FALSE(server_matches(filter, at({.worker = 11, .labels = PodLabels::kNone})));
  EXPECT_FALSE(server_matches(filter, at({.slice = 1, .worker = 1})));
  EXPECT_FALSE(server_matches(filter, at({.slice = 1, .worker = 1, .labels = PodLabels::kNone})));

  json early = at({.worker = 1});
  early["timestamp"] = "2026-04-13T06:59:59.999999999Z";
  EXPECT_FALSE(server_matches(filter, early));
  for (const auto& [field, value] :
       std::vector<std::pair<std::string, std::string>>{{"namespace_name", "other"},
                                                        {"cluster_name", "other-cluster"},
                                                        {"project_id", "other-project"}}) {
    json elsewhere = at({.worker = 1});
    elsewhere["resource"]["labels"][field] = value;
    EXPECT_FALSE(server_matches(filter, elsewhere)) << field;
  }
  GkePlace other = place;
  other.workload = "mistral-bench";
  EXPECT_FALSE(server_matches(filter, gke_entry(other, {.worker = 1, .text = "x"})));
}

TEST(WorkloadFilterOnServer, EverySliceSelectsEveryPodOfTheWorkloadOnly) {
  const GkePlace place;
  WorkloadQuery q = query_for(place, std::nullopt);
  q.every_slice = true;
  const std::string filter = build_workload_filter(q);
  const auto at = [&](EntrySpec spec, const GkePlace& where) {
    spec.text = "EXIT_CODE=1";
    spec.timestamp_nanos = kLogStartNanos + 5;
    return gke_entry(where, spec);
  };
  EXPECT_TRUE(server_matches(filter, at({.slice = 0, .worker = 0}, place)));
  EXPECT_TRUE(server_matches(filter, at({.slice = 3, .worker = 7}, place)));
  EXPECT_TRUE(
      server_matches(filter, at({.slice = 2, .worker = 1, .labels = PodLabels::kNone}, place)));
  GkePlace other = place;
  other.workload = "mistral-bench";
  EXPECT_FALSE(server_matches(filter, at({.slice = 0, .worker = 0}, other)));
  EXPECT_FALSE(
      server_matches(filter, at({.slice = 0, .worker = 0, .labels = PodLabels::kNone}, other)));
}

TEST(WorkloadFilterOnServer, HostileWorkloadNamesStayValues) {
  const GkePlace benign_place;
  const std::vector<std::string> hostile = {R"(llama-bench" OR "x)",
                                            R"(" OR resource.type:* OR ")",
                                            R"(llama-bench\)",
                                            R"(\" OR \")",
                                            R"(") OR (resource.type="k8s_container)",
                                            "x\") -- ",
                                            R"(llama*)"};
  WorkloadQuery placeholder = query_for(benign_place);
  placeholder.workload = "PLACEHOLDER";
  const std::string template_tree = tree(build_workload_filter(placeholder));
  for (const std::string& name : hostile) {
    WorkloadQuery q = query_for(benign_place);
    q.workload = name;
    const std::string filter = build_workload_filter(q);
    // Parses, into exactly the tree of a benign name with this value in its place.
    std::string expected = template_tree;
    const std::string rendered = json(name).dump();
    const std::string value = rendered.substr(1, rendered.size() - 2);
    for (auto pos = expected.find("PLACEHOLDER"); pos != std::string::npos;
         pos = expected.find("PLACEHOLDER", pos + value.size())) {
      expected.replace(pos, 11, value);
    }
    EXPECT_EQ(tree(filter), expected) << name;
    // Matches nothing of the workload it names by accident, and its own entries still.
    EXPECT_FALSE(server_matches(filter, gke_entry(benign_place, {.text = "x"}))) << name;
    GkePlace own = benign_place;
    own.workload = name;
    EXPECT_TRUE(server_matches(filter, gke_entry(own, {.text = "x"}))) << name;
  }
}

// --- the time window

TEST(QueryLowerBound, SinceElseNotBeforeElseTheLast24Hours) {
  const auto now = std::chrono::system_clock::time_point(std::chrono::seconds(1776067200));
  LogFilter filter;
  LogQueryOptions options;
  EXPECT_EQ(query_lower_bound(filter, options, now), (1776067200LL - 86400) * 1'000'000'000);
  options.not_before = "2026-04-13T07:50:00Z";
  EXPECT_EQ(query_lower_bound(filter, options, now), 1776066600LL * 1'000'000'000);
  filter.since = "2026-04-13T00:00:00.5+02:00";
  EXPECT_EQ(query_lower_bound(filter, options, now),
            (1776038400LL - 7200) * 1'000'000'000 + 500'000'000);
}

TEST(QueryLowerBound, RefusesWhatIsNotATimestamp) {
  LogFilter filter;
  filter.since = R"(2026-04-13" OR "x)";
  expect_invalid_argument([&] { query_lower_bound(filter, {}, {}); }, "since");
  LogQueryOptions options;
  options.not_before = "yesterday";
  expect_invalid_argument([&] { query_lower_bound({}, options, {}); }, "not_before");
}

// --- rank attribution

TEST(ParsePodName, ReadsSliceAndWorkerOfTheWorkloadOnly) {
  const auto index = parse_pod_name("llama-bench-slice-job-1-12-x7k2p", "llama-bench");
  ASSERT_TRUE(index);
  EXPECT_EQ(index->slice, 1);
  EXPECT_EQ(index->worker, 12);
  EXPECT_FALSE(parse_pod_name("big-llama-bench-slice-job-0-0-x7k2p", "llama-bench"));
  EXPECT_FALSE(parse_pod_name("llama-bench-slice-job-0-0-x7k2p", "llama"));
  EXPECT_FALSE(parse_pod_name("llama-bench-slice-job-0-0-", "llama-bench"));
  EXPECT_FALSE(parse_pod_name("llama-bench-slice-job-0-0-X7K2P", "llama-bench"));
  EXPECT_FALSE(parse_pod_name("llama-bench-slice-job-a-0-x7k2p", "llama-bench"));
  EXPECT_FALSE(parse_pod_name("llama-bench-slice-job-+1-0-x7k2p", "llama-bench"));
  EXPECT_FALSE(parse_pod_name("LLAMA-BENCH-slice-job-0-0-x7k2p", "llama-bench"));
  EXPECT_FALSE(parse_pod_name("llama-bench-pathways-head-0-0-x7k2p", "llama-bench"));
}

TEST(RankOfEntry, LabelsDecideElseThePodName) {
  const GkePlace place;
  EXPECT_EQ(rank_of_entry(parsed(gke_entry(place, {.worker = 3, .text = "a"})), "llama-bench", 0),
            3);
  EXPECT_EQ(rank_of_entry(parsed(gke_entry(place, {.slice = 1, .worker = 3, .text = "a"})),
                          "llama-bench", 1),
            3);
  EXPECT_EQ(rank_of_entry(parsed(gke_entry(place, {.slice = 1, .worker = 3, .text = "a"})),
                          "llama-bench", 0),
            std::nullopt);
  for (const PodLabels labels : {PodLabels::kNone, PodLabels::kDotted, PodLabels::kNoJobset}) {
    EXPECT_EQ(rank_of_entry(parsed(gke_entry(place, {.worker = 5, .text = "a", .labels = labels})),
                            "llama-bench", 0),
              5);
  }
  // A substring match on the server is not enough: the workload must be exactly this one.
  GkePlace bigger = place;
  bigger.workload = "big-llama-bench";
  EXPECT_EQ(rank_of_entry(parsed(gke_entry(bigger, {.text = "a", .labels = PodLabels::kNone})),
                          "llama-bench", 0),
            std::nullopt);
  EXPECT_EQ(rank_of_entry(parsed(gke_entry(bigger, {.text = "a"})), "llama-bench", 0),
            std::nullopt);
  // A partial label set that names another workload is not ours, whatever the pod name says.
  json mixed = gke_entry(place, {.text = "a", .labels = PodLabels::kNone});
  mixed["labels"]["k8s-pod/jobset_sigs_k8s_io/jobset-name"] = "other";
  EXPECT_EQ(rank_of_entry(parsed(mixed), "llama-bench", 0), std::nullopt);
}

TEST(BelongsToWorkload, TheJobsetLabelElseThePodName) {
  GkePlace place;
  EXPECT_TRUE(belongs_to_workload(parsed(gke_entry(place, {.slice = 4, .worker = 2, .text = "x"})),
                                  "llama-bench"));
  EXPECT_TRUE(belongs_to_workload(
      parsed(gke_entry(place, {.slice = 1, .worker = 0, .text = "x", .labels = PodLabels::kNone})),
      "llama-bench"));
  EXPECT_FALSE(belongs_to_workload(parsed(gke_entry(place, {.text = "x"})), "llama"));
  EXPECT_FALSE(belongs_to_workload(parsed(gke_entry(place, {.text = "x"})), "LLAMA-BENCH"));
  place.workload = "llama-bench-2";
  EXPECT_FALSE(belongs_to_workload(
      parsed(gke_entry(place, {.text = "x", .labels = PodLabels::kNone})), "llama-bench"));
}

TEST(ExitCodeLine, ReadsTheCodeOfXpksLastLineOnly) {
  EXPECT_EQ(parse_exit_code_line("EXIT_CODE=0"), 0);
  EXPECT_EQ(parse_exit_code_line("EXIT_CODE=143\n"), 143);
  EXPECT_EQ(parse_exit_code_line("EXIT_CODE=3 \r\n"), 3);
  EXPECT_EQ(parse_exit_code_line("EXIT_CODE="), std::nullopt);
  EXPECT_EQ(parse_exit_code_line("EXIT_CODE=-1"), std::nullopt);
  EXPECT_EQ(parse_exit_code_line("EXIT_CODE=256"), std::nullopt);
  EXPECT_EQ(parse_exit_code_line("EXIT_CODE=1x"), std::nullopt);
  EXPECT_EQ(parse_exit_code_line(" EXIT_CODE=1"), std::nullopt);
  EXPECT_EQ(parse_exit_code_line("exit_code=1"), std::nullopt);
}

TEST(ExitCodeLine, TheFailureIsTheFirstCodeThatIsNotATermination) {
  const GkePlace place;
  const auto entry = [&](int worker, const std::string& text) {
    return parsed(gke_entry(place, {.worker = worker, .text = text}));
  };
  EXPECT_EQ(failure_exit_code({entry(0, "EXIT_CODE=143"), entry(1, "EXIT_CODE=0"),
                               entry(2, "EXIT_CODE=2"), entry(3, "EXIT_CODE=5")},
                              "llama-bench"),
            2);
  EXPECT_EQ(
      failure_exit_code({entry(0, "EXIT_CODE=143"), entry(1, "EXIT_CODE=137")}, "llama-bench"),
      143);
  EXPECT_EQ(failure_exit_code({entry(0, "EXIT_CODE=2")}, "other"), std::nullopt);
  EXPECT_EQ(failure_exit_code({entry(0, "EXIT_CODE=0"), entry(1, "done")}, "llama-bench"),
            std::nullopt);
  EXPECT_EQ(failure_exit_code({}, "llama-bench"), std::nullopt);
}

TEST(LogLine, TextElseJsonMessageElseJsonWithoutTrailingNewline) {
  const GkePlace place;
  EXPECT_EQ(log_line(parsed(gke_entry(place, {.text = "step 1\n"}))), "step 1");
  EXPECT_EQ(log_line(parsed(gke_entry(place, {.text = "crlf\r\n"}))), "crlf");
  EXPECT_EQ(log_line(parsed(gke_entry(place, {.text = "two\n\n"}))), "two\n");
  EXPECT_EQ(log_line(parsed(gke_entry(place, {.text = "inner\nline"}))), "inner\nline");
  EXPECT_EQ(log_line(parsed(gke_entry(place, {.text = "json\n", .json_payload = true}))), "json");
  json no_message = gke_entry(place, {.text = "x"});
  no_message.erase("textPayload");
  no_message["jsonPayload"] = {{"step", 7}, {"loss", 0.5}};
  EXPECT_EQ(log_line(parsed(no_message)), R"({"loss":0.5,"step":7})");
}

// --- export helpers

TEST(ChunkBudget, SharesTheBudgetInMultiplesOf256KiB) {
  ChunkBudget eight(64 * kMiB, 8 * kMiB);
  EXPECT_EQ(eight.allocate(8, 8), 8 * kMiB);
  EXPECT_EQ(eight.reserved(), 64 * kMiB);

  ChunkBudget many(64 * kMiB, 8 * kMiB);
  EXPECT_EQ(many.allocate(100, 100), 512 * kKiB);  // 655 KiB rounded down
  EXPECT_LE(many.reserved(), 64 * kMiB);

  ChunkBudget huge(64 * kMiB, 8 * kMiB);
  EXPECT_EQ(huge.allocate(1000, 1000), 256 * kKiB);  // the protocol's minimum wins
  EXPECT_EQ(huge.reserved(), 1000 * 256 * kKiB);
}

TEST(ChunkBudget, RanksFoundLaterShareWhatIsLeft) {
  ChunkBudget budget(4 * kMiB, 8 * kMiB);
  EXPECT_EQ(budget.allocate(2, 2), 2 * kMiB);  // the budget is spent
  EXPECT_EQ(budget.allocate(3, 1), 256 * kKiB);
  EXPECT_EQ(budget.reserved(), 4 * kMiB + 256 * kKiB);

  ChunkBudget growing(16 * kMiB, 8 * kMiB);
  EXPECT_EQ(growing.allocate(2, 2), 8 * kMiB);
  EXPECT_EQ(growing.reserved(), 16 * kMiB);
  EXPECT_EQ(growing.allocate(4, 2), 256 * kKiB);

  ChunkBudget partial(10 * kMiB, 8 * kMiB);
  EXPECT_EQ(partial.allocate(4, 1), 2560 * kKiB);
  EXPECT_EQ(partial.allocate(4, 3), 2560 * kKiB);
  EXPECT_EQ(partial.reserved(), 10 * kMiB);
  EXPECT_THROW(ChunkBudget(kMiB, 300 * kKiB), std::invalid_argument);
}

TEST(ExportDestination, NormalisesTheTrailingSlash) {
  using Dest = std::pair<std::string, std::string>;
  EXPECT_EQ(parse_export_destination("gs://falcon-b/profiles/s1/logs/"),
            Dest("falcon-b", "profiles/s1/logs/"));
  EXPECT_EQ(parse_export_destination("gs://falcon-b/profiles/s1/logs"),
            Dest("falcon-b", "profiles/s1/logs/"));
  EXPECT_EQ(parse_export_destination("gs://falcon-b/logs//"), Dest("falcon-b", "logs/"));
  EXPECT_EQ(parse_export_destination("gs://falcon-b"), Dest("falcon-b", ""));
  EXPECT_EQ(parse_export_destination("gs://falcon-b/"), Dest("falcon-b", ""));
  expect_invalid_argument([] { parse_export_destination("/tmp/logs"); }, "/tmp/logs");
  expect_invalid_argument([] { parse_export_destination("gs://"); }, "gs://");
}

}  // namespace
}  // namespace falcon::logs
