// The Logging query language: parsing (precedence, quoting, escapes, comments, errors with
// positions) and evaluation against LogEntry JSON.
#include "gcp_server/lql.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace falcon::fake::lql {
namespace {

using nlohmann::json;

json gke_entry() {
  return json::parse(R"({
    "textPayload": "[main] INFO Application - Responding at http://0.0.0.0:8080",
    "insertId": "r7iddfioc0p12ds0",
    "resource": {"type": "k8s_container",
      "labels": {"location": "us-east1", "cluster_name": "c1", "pod_name": "job-a-slice-job-0-1-x7k2p",
                 "namespace_name": "default", "project_id": "proj", "container_name": "jax-tpu"}},
    "timestamp": "2022-09-17T17:29:00.064010148Z",
    "receiveTimestamp": "2022-09-17T17:29:04.819376748Z",
    "severity": "ERROR",
    "labels": {"k8s-pod/jobset_sigs_k8s_io/jobset-name": "job-a",
               "k8s-pod/batch_kubernetes_io/job-completion-index": "1",
               "compute.googleapis.com/resource_name": "gke-node-1"},
    "logName": "projects/proj/logs/stderr"
  })");
}

bool matches(const std::string& filter, const json& entry = gke_entry()) {
  return Filter::parse(filter).matches(JsonEntryView(entry));
}

std::string tree(const std::string& filter) { return Filter::parse(filter).debug_string(); }

TEST(LqlParse, OrBindsTighterThanAndAndNotTightest) {
  EXPECT_EQ(tree(R"("a" OR NOT "b" AND NOT "c" OR "d")"),
            R"(AND(OR(TERM("a"), NOT(TERM("b"))), OR(NOT(TERM("c")), TERM("d"))))");
}

TEST(LqlParse, ImplicitAndBetweenTerms) {
  EXPECT_EQ(tree(R"(severity=ERROR textPayload:"x")"), R"(AND(severity="ERROR", textPayload:"x"))");
  EXPECT_EQ(tree("a b OR c"), R"(AND(TERM("a"), OR(TERM("b"), TERM("c"))))");
}

TEST(LqlParse, MinusIsNot) {
  EXPECT_EQ(tree(R"(-severity=ERROR)"), R"(NOT(severity="ERROR"))");
  EXPECT_EQ(tree(R"(a -"b")"), R"(AND(TERM("a"), NOT(TERM("b"))))");
}

TEST(LqlParse, ParenthesesOverridePrecedence) {
  EXPECT_EQ(tree("(a AND b) OR c"), R"(OR(AND(TERM("a"), TERM("b")), TERM("c")))");
}

TEST(LqlParse, QuotedFieldSegments) {
  EXPECT_EQ(tree(R"(labels."k8s-pod/jobset_sigs_k8s_io/jobset-name"="job-a")"),
            R"(labels."k8s-pod/jobset_sigs_k8s_io/jobset-name"="job-a")");
  EXPECT_EQ(tree(R"(jsonPayload."a.b".c = 1)"), R"(jsonPayload."a.b".c="1")");
}

TEST(LqlParse, StringEscapes) {
  EXPECT_EQ(tree(R"(textPayload="say \"hi\" \\ back")"), R"(textPayload="say \"hi\" \\ back")");
}

TEST(LqlParse, LowercaseKeywordsAreSearchTerms) {
  EXPECT_EQ(tree("a and b"), R"(AND(TERM("a"), TERM("and"), TERM("b")))");
}

TEST(LqlParse, CommentsRunToEndOfLine) {
  EXPECT_EQ(tree("severity=ERROR -- only errors\nlogName:stderr"),
            R"(AND(severity="ERROR", logName:"stderr"))");
  EXPECT_EQ(tree("-- nothing but a comment"), "ALL");
}

TEST(LqlParse, ValueLists) {
  EXPECT_EQ(tree(R"(resource.type = ("k8s_container" OR "gce_instance"))"),
            R"(OR(resource.type="k8s_container", resource.type="gce_instance"))");
  EXPECT_EQ(tree(R"(textPayload:("a" "b"))"), R"(AND(textPayload:"a", textPayload:"b"))");
}

TEST(LqlParse, ExistsAndFunctions) {
  EXPECT_EQ(tree("jsonPayload.x:*"), "jsonPayload.x:*");
  EXPECT_EQ(tree(R"(SEARCH("Hello World"))"), R"(SEARCH(["hello","world"]))");
  EXPECT_EQ(tree(R"(SEARCH(textPayload, "`exact phrase` more"))"),
            R"(SEARCH(textPayload, ["more"], [["exact","phrase"]]))");
}

TEST(LqlParse, EmptyFilterMatchesAll) {
  EXPECT_EQ(tree(""), "ALL");
  EXPECT_TRUE(matches("   "));
}

// Found by fuzz/lql: a filter is any bytes a client sends, and showing one whose strings are
// not UTF-8 made json::dump throw. Every string the tree shows (values, field segments, LOG_ID,
// SEARCH words) shows such bytes as U+FFFD, and matching still works on the raw bytes.
TEST(LqlParse, BytesThatAreNotUtf8ShowAsReplacementCharacters) {
  EXPECT_EQ(tree("log_id(\"std\xa0\") AND\xa0NOT severity=DEBUG"),
            "AND(LOG_ID(\"/logs/std\xef\xbf\xbd\"), TERM(\"AND\xef\xbf\xbdNOT\"), "
            "severity=\"DEBUG\")");
  EXPECT_EQ(tree("labels.\"k\xff\"=\"v\xc3\""), "labels.\"k\xef\xbf\xbd\"=\"v\xef\xbf\xbd\"");
  EXPECT_EQ(tree("SEARCH(\"\xfe\")"), "SEARCH([\"\xef\xbf\xbd\"])");
  json entry = gke_entry();
  entry["labels"]["k\xff"] = "v";  // nlohmann stores the raw bytes
  EXPECT_TRUE(matches("labels.\"k\xff\"=\"v\"", entry));
}

TEST(LqlParse, MalformedFiltersReportPosition) {
  struct Case {
    std::string filter;
    std::size_t position;
  };
  for (const Case& c : std::vector<Case>{{"severity=", 9},
                                         {"(a OR b", 7},
                                         {"a AND", 5},
                                         {R"(textPayload="unterminated)", 12},
                                         {"a )", 2},
                                         {"severity = = ERROR", 11},
                                         {"insertId = abc:def", 14},
                                         {"NOT", 3},
                                         {R"(timestamp >= "yesterday")", 13},
                                         {R"(nosuch("x"))", 0},
                                         {R"(textPayload =~ "(")", 15},
                                         // RE2 has no back-references and caps repeats at
                                         // 1000 (RE2's own errors; "\\111" is an octal
                                         // escape there, "{2,999...}" a literal)
                                         {R"(textPayload =~ "(a)\\1x")", 15},
                                         {R"(textPayload =~ "a{1001}")", 15},
                                         {R"(textPayload =~ "a{2,1001}")", 15},
                                         // a repetition of a repetition (fuzz/lql_fuzz.cc: with
                                         // std::regex, ".****..." ran for minutes)
                                         {R"(textPayload =~ ".****")", 15},
                                         {"()", 1}}) {
    try {
      Filter::parse(c.filter);
      ADD_FAILURE() << "parsed: " << c.filter;
    } catch (const FilterError& e) {
      EXPECT_EQ(e.position(), c.position) << c.filter << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find("column"), std::string::npos) << e.what();
    }
  }
}

TEST(LqlParse, ErrorLineAndColumnOnLaterLines) {
  try {
    Filter::parse("severity=ERROR\n  AND )");
    FAIL();
  } catch (const FilterError& e) {
    EXPECT_EQ(e.position(), 21u);
    EXPECT_NE(std::string(e.what()).find("line 2, column 7"), std::string::npos) << e.what();
  }
}

TEST(LqlEval, EqualityOnNestedAndQuotedFields) {
  EXPECT_TRUE(matches(R"(resource.type="k8s_container")"));
  EXPECT_TRUE(matches(R"(labels."k8s-pod/jobset_sigs_k8s_io/jobset-name"="job-a")"));
  EXPECT_FALSE(matches(R"(labels."k8s-pod/jobset_sigs_k8s_io/jobset-name"="job-b")"));
  EXPECT_FALSE(matches(R"(labels."k8s-pod/jobset_sigs_k8s_io/jobset-name"="job")"));
  EXPECT_TRUE(matches(R"(labels."k8s-pod/jobset_sigs_k8s_io/jobset-name"!="job-b")"));
}

TEST(LqlEval, StringComparisonsAreCaseInsensitive) {
  EXPECT_TRUE(matches(R"(resource.type="K8S_CONTAINER")"));
  EXPECT_TRUE(matches(R"(textPayload:"responding AT")"));
}

TEST(LqlEval, HasIsSubstring) {
  EXPECT_TRUE(matches(R"(resource.labels.pod_name:"job-a-slice-job-0-")"));
  EXPECT_FALSE(matches(R"(resource.labels.pod_name:"job-b-")"));
  EXPECT_TRUE(matches(R"(labels:"gke-node")"));  // `:` on a map searches its values
}

TEST(LqlEval, RegularExpressions) {
  EXPECT_TRUE(matches(R"(textPayload=~"Responding at http://[0-9.]+:\\d+")"));
  EXPECT_TRUE(matches(R"(resource.labels.pod_name=~"^job-a-slice-job-0-\d+-[a-z0-9]{5}$")"));
  EXPECT_FALSE(matches(R"(textPayload=~"responding")"));  // case-sensitive
  EXPECT_TRUE(matches(R"(textPayload=~"(?i)responding")"));
  EXPECT_TRUE(matches(R"(textPayload=~"[0-9]{1,1000}")"));        // RE2's limit itself is fine
  EXPECT_TRUE(matches(R"(textPayload=~"[{9999}]|Responding")"));  // in a class, '{' is literal
  EXPECT_TRUE(matches(R"(textPayload!~"panic")"));
}

TEST(LqlEval, SeverityComparesByLevel) {
  EXPECT_TRUE(matches("severity>=WARNING"));
  EXPECT_TRUE(matches("severity>WARNING"));
  EXPECT_FALSE(matches("severity>ERROR"));
  EXPECT_TRUE(matches("severity=error"));
  EXPECT_TRUE(matches("severity<=500"));
  EXPECT_TRUE(matches("severity<CRITICAL"));
  json no_severity = gke_entry();
  no_severity.erase("severity");
  EXPECT_TRUE(matches("severity=DEFAULT", no_severity));
  EXPECT_FALSE(matches("severity>=INFO", no_severity));
}

TEST(LqlEval, TimestampsCompareAsInstantsWithNanoseconds) {
  EXPECT_TRUE(matches(R"(timestamp>="2022-09-17T17:29:00.064010148Z")"));
  EXPECT_FALSE(matches(R"(timestamp>"2022-09-17T17:29:00.064010148Z")"));
  EXPECT_TRUE(matches(R"(timestamp<"2022-09-17T17:29:00.064010149Z")"));
  // Offsets: 13:29:00-04:00 is 17:29:00Z. A string comparison would get this wrong.
  EXPECT_TRUE(matches(R"(timestamp>"2022-09-17T13:29:00-04:00")"));
  EXPECT_FALSE(matches(R"(timestamp>"2022-09-17T19:29:01+02:00")"));
  EXPECT_TRUE(matches(R"(timestamp>="2022-09-17T17:29:00.064Z")"));  // fewer digits
  EXPECT_TRUE(matches(R"(timestamp = "2022-09-17T17:29:00.064010148Z")"));
  // Bare dates are midnight UTC.
  EXPECT_TRUE(matches(R"(timestamp>="2022-09-17" timestamp<"2022-09-18")"));
  EXPECT_FALSE(matches(R"(timestamp<2022-09-17)"));
  EXPECT_TRUE(matches(R"(receiveTimestamp>"2022-09-17T17:29:04Z")"));
}

TEST(LqlEval, TimeBoundsFromTopLevelConjunction) {
  const auto b = Filter::parse(R"(timestamp>="2024-01-01T00:00:00Z" severity>=ERROR
                                  timestamp<"2024-01-02T00:00:00Z")")
                     .time_bounds();
  EXPECT_EQ(b.lo, 1704067200LL * 1'000'000'000);
  EXPECT_EQ(b.hi, 1704153600LL * 1'000'000'000 - 1);
  EXPECT_EQ(Filter::parse(R"(timestamp>="2024-01-01" OR severity=ERROR)").time_bounds().lo,
            TimeBounds{}.lo);
  EXPECT_EQ(Filter::parse(R"(NOT timestamp<"2024-01-01")").time_bounds().lo, TimeBounds{}.lo);
  const auto either = Filter::parse(R"((timestamp>"2024-01-02" timestamp<"2024-01-03") OR
                                       (timestamp>"2024-01-05" timestamp<"2024-01-06"))")
                          .time_bounds();
  EXPECT_EQ(either.lo, 1704153600LL * 1'000'000'000 + 1);
  EXPECT_EQ(either.hi, 1704499200LL * 1'000'000'000 - 1);
}

TEST(LqlEval, NumbersCompareNumerically) {
  json e = gke_entry();
  e["jsonPayload"] = {{"latency", 250}, {"step", "12"}, {"ok", true}, {"tags", {"a", "b"}}};
  EXPECT_TRUE(matches("jsonPayload.latency > 99", e));  // not "250" < "99" as strings
  EXPECT_TRUE(matches("jsonPayload.latency >= 250 jsonPayload.latency <= 250", e));
  EXPECT_TRUE(matches("jsonPayload.step > 9", e));
  EXPECT_TRUE(matches("jsonPayload.latency > -5", e));
  EXPECT_TRUE(matches("jsonPayload.ok = true", e));
  EXPECT_TRUE(matches(R"(jsonPayload.tags = "b")", e));  // any array element
  EXPECT_TRUE(matches(R"(labels."k8s-pod/batch_kubernetes_io/job-completion-index" = 1)"));
}

TEST(LqlEval, BareTermsSearchAllFields) {
  EXPECT_TRUE(matches("Responding"));
  EXPECT_TRUE(matches(R"("0.0.0.0:8080")"));
  EXPECT_TRUE(matches("gke-node-1"));  // a label value
  EXPECT_TRUE(matches("us-east1"));    // a resource label
  EXPECT_FALSE(matches("nonexistent"));
  EXPECT_TRUE(matches("NOT nonexistent"));
}

TEST(LqlEval, SearchIsTokenBased) {
  EXPECT_TRUE(matches(R"(SEARCH("responding application"))"));
  EXPECT_FALSE(matches(R"(SEARCH("respond"))"));  // tokens, not substrings
  EXPECT_TRUE(matches(R"(SEARCH("`Responding at`"))"));
  EXPECT_FALSE(matches(R"(SEARCH("`at Responding`"))"));
  EXPECT_TRUE(matches(R"(SEARCH(textPayload, "INFO"))"));
  EXPECT_FALSE(matches(R"(SEARCH(logName, "INFO"))"));
  EXPECT_TRUE(matches(R"(SEARCH("job a"))"));  // "job-a" tokenizes into job, a
}

TEST(LqlEval, ExistsAndNull) {
  json e = gke_entry();
  e["jsonPayload"] = {{"x", nullptr}, {"y", 1}};
  EXPECT_TRUE(matches("jsonPayload.y:*", e));
  EXPECT_FALSE(matches("jsonPayload.z:*", e));
  EXPECT_FALSE(matches("jsonPayload.x:*", e));
  EXPECT_TRUE(matches("jsonPayload.x = NULL_VALUE", e));
  EXPECT_TRUE(matches("jsonPayload.y != NULL_VALUE", e));
  EXPECT_TRUE(matches("textPayload:*"));
}

TEST(LqlEval, MissingFieldsSatisfyOnlyNegations) {
  EXPECT_FALSE(matches(R"(jsonPayload.missing = "x")"));
  EXPECT_TRUE(matches(R"(jsonPayload.missing != "x")"));
  EXPECT_FALSE(matches(R"(jsonPayload.missing : "x")"));
  EXPECT_TRUE(matches(R"(-jsonPayload.missing : "x")"));
}

TEST(LqlEval, ValueListsMatchAnyValue) {
  EXPECT_TRUE(matches(R"(resource.type = ("gce_instance" OR "k8s_container"))"));
  EXPECT_FALSE(matches(R"(resource.type = ("gce_instance" OR "k8s_node"))"));
  EXPECT_TRUE(matches(R"(textPayload:("Responding" AND "INFO"))"));
  EXPECT_FALSE(matches(R"(textPayload:("Responding" AND NOT "INFO"))"));
}

TEST(LqlEval, LogIdMatchesUnencodedId) {
  EXPECT_TRUE(matches(R"(log_id("stderr"))"));
  json audit = gke_entry();
  audit["logName"] = "projects/proj/logs/cloudaudit.googleapis.com%2Factivity";
  EXPECT_TRUE(matches(R"(log_id("cloudaudit.googleapis.com/activity"))", audit));
}

TEST(LqlEval, PrecedenceChangesResults) {
  // With OR binding tighter: (ERROR-severity OR nothing) AND missing -> false. Were AND tighter,
  // it would read severity=ERROR OR (x AND y) -> true.
  EXPECT_FALSE(matches(R"(severity=ERROR OR textPayload:"nope" jsonPayload.missing:*)"));
  EXPECT_TRUE(matches(R"(severity=ERROR OR (textPayload:"nope" jsonPayload.missing:*))"));
}

TEST(Severity, NamesAndLevels) {
  EXPECT_EQ(severity_level("warning"), 400);
  EXPECT_EQ(severity_level("800"), 800);
  EXPECT_EQ(severity_level("LOUD"), std::nullopt);
  EXPECT_EQ(severity_name(600), "CRITICAL");
  EXPECT_EQ(severity_name(250), std::nullopt);
}

}  // namespace
}  // namespace falcon::fake::lql
