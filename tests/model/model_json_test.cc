// JSON round trips of every model type, with the spec's field names.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "falcon/errors.h"
#include "falcon/model.h"
#include "model/json_text.h"
#include "util/time_format.h"

namespace falcon {
namespace {

using nlohmann::json;

template <typename T>
void expect_round_trip(const T& value) {
  const json j = value;
  EXPECT_EQ(j.get<T>(), value) << j.dump();
  EXPECT_EQ(json::parse(j.dump()).get<T>(), value);
}

TEST(ModelJson, AcceleratorSlotRoundTrips) {
  expect_round_trip(AcceleratorSlot{"tpu-v4-64", DeviceClass::kTpu, 2});
}

TEST(ModelJson, ClusterConfigUsesSpecFieldNames) {
  ClusterConfig c{.name = "tpu-v4-prod",
                  .provider = "gke",
                  .project = "p",
                  .zone = "z",
                  .cluster_id = "cid",
                  .accelerator_slots = {{"tpu-v4-64", DeviceClass::kTpu, 1}},
                  .default_namespace = "default",
                  .gcs_bucket = "gs://b",
                  .max_queue_depth = 5,
                  .probe_timeout_s = 15,
                  .labels = {{"env", "prod"}},
                  .location = "us-central2"};
  const json j = c;
  EXPECT_EQ(j["accelerator_slots"][0]["device_class"], "tpu");
  EXPECT_EQ(j["location"], "us-central2");
  EXPECT_TRUE(j.contains("accelerator_slots"));
  EXPECT_FALSE(j.contains("accelerator_types"));
  EXPECT_EQ(j["labels"]["env"], "prod");
  expect_round_trip(c);
}

// JSON written before `location` existed still reads: the location is then the zone.
TEST(ModelJson, ClusterConfigWithoutLocationTakesTheZone) {
  ClusterConfig c{.name = "n", .provider = "gke", .project = "p", .zone = "us-east1-b"};
  json j = c;
  j.erase("location");
  EXPECT_EQ(j.get<ClusterConfig>().location, "us-east1-b");
}

// A ClusterConfig built by hand without a location is reached at its zone, wherever it is used.
TEST(ModelJson, GkeLocationIsTheZoneWhenLocationIsEmpty) {
  ClusterConfig c{.name = "tpu-a", .zone = "us-east1-b"};
  EXPECT_EQ(c.gke_location(), "us-east1-b");
  c.location = "us-east1";
  EXPECT_EQ(c.gke_location(), "us-east1");
}

TEST(ModelJson, DeviceClassIsOneOfThreeNames) {
  for (const DeviceClass c : {DeviceClass::kTpu, DeviceClass::kGpu, DeviceClass::kCpu}) {
    EXPECT_EQ(parse_device_class(to_string(c)), c);
    expect_round_trip(AcceleratorSlot{"t", c, 1});
  }
  EXPECT_EQ(parse_device_class("TPU"), std::nullopt);
  EXPECT_THROW(
      json::parse(R"({"type":"x","device_class":"fpga","priority":1})").get<AcceleratorSlot>(),
      json::exception);
}

TEST(ModelJson, ProbeResultAbsentOptionalsAreNull) {
  ClusterProbeResult r{.cluster = "c",
                       .reachable = false,
                       .queue_depth = std::nullopt,
                       .running_count = std::nullopt,
                       .error = "probe timed out after 15s",
                       .probed_at = "2026-04-13T00:00:00.000Z"};
  const json j = r;
  EXPECT_TRUE(j["queue_depth"].is_null());
  EXPECT_TRUE(j["running_count"].is_null());
  EXPECT_EQ(j["error"], "probe timed out after 15s");
  expect_round_trip(r);
  r = {"c", true, 2, 3, std::nullopt, "2026-04-13T00:00:00.000Z"};
  EXPECT_TRUE(json(r)["error"].is_null());
  expect_round_trip(r);
}

TEST(ModelJson, ClusterSelectionRoundTrips) {
  ClusterSelection s{"a",
                     "tpu-v4-64",
                     {"a", "b"},
                     {{"a", true, 0, 1, std::nullopt, "2026-04-13T00:00:00.000Z"},
                      {"b", false, std::nullopt, std::nullopt, "boom", "2026-04-13T00:00:00.000Z"}},
                     "selected a: reachable, queue_depth=0 <= max=5",
                     "2026-04-13T00:00:01.000Z"};
  expect_round_trip(s);
}

TEST(ModelJson, WorkloadSpecNamespaceIsSpelledNamespace) {
  WorkloadSpec spec{.name = "w",
                    .docker_image = "img",
                    .command = {"python3", "a b.py"},
                    .accelerator_type = "tpu-v4-64",
                    .priority = "high",
                    .env = {{"A", "1"}},
                    .namespace_ = std::nullopt,
                    .extra_args = {"--num-slices=2"}};
  json j = spec;
  EXPECT_TRUE(j.contains("namespace"));
  EXPECT_TRUE(j["namespace"].is_null());
  expect_round_trip(spec);
  spec.namespace_ = "team-a";
  expect_round_trip(spec);
}

TEST(ModelJson, WorkloadHandleStatusInfoRoundTrip) {
  expect_round_trip(WorkloadHandle{"w", "c", "default", "2026-04-13T00:00:00.000Z"});
  expect_round_trip(
      WorkloadStatus{"w", "RUNNING", "2026-04-13T00:00:00.000Z", std::nullopt, std::nullopt});
  expect_round_trip(WorkloadStatus{"w", "FAILED", "a", "b", 3});
  expect_round_trip(WorkloadInfo{"w", "QUEUED", "tpu-v4-64", std::nullopt});
}

TEST(ModelJson, LogFilterNullsAndValues) {
  LogFilter f;
  const json j = f;
  EXPECT_TRUE(j["ranks"].is_null());
  EXPECT_TRUE(j["tail_lines"].is_null());
  expect_round_trip(f);
  expect_round_trip(LogFilter{std::vector<int>{0, 3}, "2026-04-13T00:00:00Z", "step_time", 100});
}

TEST(ModelJson, LogExportResultKeysGcsUrisByRankString) {
  LogExportResult r{"w",
                    "c",
                    {0, 1},
                    {{0, "gs://b/rank-0.log"}, {1, "gs://b/rank-1.log"}},
                    "2026-04-13T00:00:00.000Z"};
  const json j = r;
  EXPECT_EQ(j["gcs_uris"]["0"], "gs://b/rank-0.log");
  EXPECT_EQ(j["gcs_uris"]["1"], "gs://b/rank-1.log");
  expect_round_trip(r);
  json bad = j;
  bad["gcs_uris"]["x"] = "gs://b/x";
  EXPECT_THROW(bad.get<LogExportResult>(), json::exception);
}

TEST(ModelJson, MissingRequiredFieldThrows) {
  EXPECT_THROW(json::parse(R"({"workload_name":"w"})").get<WorkloadHandle>(), json::exception);
  EXPECT_THROW(
      json::parse(R"({"type":"x","device_class":"tpu","priority":"one"})").get<AcceleratorSlot>(),
      json::exception);
}

// nlohmann casts any number to int; a float out of range was undefined behaviour (found by
// fuzz/model_json_fuzz.cc). Integers are read only from JSON integers that fit.
TEST(ModelJson, IntegerFieldsTakeOnlyIntegersThatFit) {
  const auto probe = [](const char* queue_depth) {
    return json::parse(
               std::string(R"({"cluster":"c","reachable":true,"probed_at":"t","queue_depth":)") +
               queue_depth + "}")
        .get<ClusterProbeResult>();
  };
  EXPECT_EQ(probe("7").queue_depth, 7);
  EXPECT_EQ(probe("2147483647").queue_depth, 2147483647);
  for (const char* bad : {"5e21", "2.5", "7.0", "2147483648", "-2147483649", "18446744073709551615",
                          "\"7\"", "true"}) {
    EXPECT_THROW(probe(bad), json::exception) << bad;
  }
  try {
    probe("5e21");
  } catch (const json::exception& e) {
    EXPECT_NE(std::string(e.what()).find("must be an integer in [-2147483648, 2147483647]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(json::parse(R"({"workload_name":"w","cluster":"c","exported_ranks":[0,1.5],)"
                           R"("gcs_uris":{},"exported_at":"t"})")
                   .get<LogExportResult>(),
               json::exception);
  EXPECT_THROW(json::parse(R"({"type":"v5p-8","device_class":"tpu","priority":1e300})")
                   .get<AcceleratorSlot>(),
               json::exception);
}

TEST(Errors, CarryTheirDetails) {
  NoAvailableClusterError e("no cluster supports x", "x", {{"a", false, {}, {}, "down", "t"}});
  json details;
  e.add_details(details);
  EXPECT_STREQ(e.type_name(), "NoAvailableClusterError");
  EXPECT_EQ(details["probe_results"][0]["error"], "down");
  WorkloadSubmitError s("xpk failed", "c", "w", 1, "Error from server");
  const XpkCommandError& base = s;
  EXPECT_STREQ(base.type_name(), "WorkloadSubmitError");
  EXPECT_EQ(s.stderr_text(), "Error from server");
  ClusterConfigError c({"f:1:1: a: missing", "f:2:1: b: missing"});
  EXPECT_THAT(c.what(), ::testing::HasSubstr("2 problems"));
}

TEST(TimeFormat, FormatsMillisecondsUtcWithZ) {
  const auto t = std::chrono::system_clock::time_point(std::chrono::milliseconds(1776038400123));
  EXPECT_EQ(format_iso8601(t), "2026-04-13T00:00:00.123Z");
}

TEST(TimeFormat, ParsesRfc3339Variants) {
  EXPECT_EQ(parse_rfc3339_nanos("2026-04-13T00:00:00Z"), 1776038400LL * 1'000'000'000);
  EXPECT_EQ(parse_rfc3339_nanos("2026-04-13T00:00:00.064010148Z"),
            1776038400LL * 1'000'000'000 + 64010148);
  EXPECT_EQ(parse_rfc3339_nanos("2026-04-13T02:00:00+02:00"), 1776038400LL * 1'000'000'000);
  EXPECT_EQ(parse_rfc3339_nanos("2026-04-13"), 1776038400LL * 1'000'000'000);
  EXPECT_FALSE(parse_rfc3339_nanos("2026-02-30T00:00:00Z"));
  EXPECT_FALSE(parse_rfc3339_nanos("yesterday"));
  EXPECT_FALSE(parse_rfc3339_nanos("2026-04-13T00:00:00"));
  EXPECT_EQ(format_rfc3339_nanos(1776038400LL * 1'000'000'000 + 5),
            "2026-04-13T00:00:00.000000005Z");
}

// The direct writer of the serve hot path writes exactly what nlohmann writes.
TEST(JsonText, SelectionIsByteForByteWhatNlohmannWrites) {
  ClusterSelection s;
  s.selected_cluster = "tpu-a";
  s.accelerator = "tpu-v4-64";
  s.candidates = {"tpu-a", "tpu-\"b\""};
  s.probe_results = {
      ClusterProbeResult{"tpu-a", true, 0, 3, std::nullopt, "2026-04-13T08:00:00.000Z"},
      ClusterProbeResult{"tpu-\"b\"", false, std::nullopt, std::nullopt,
                         std::string("xpk failed:\n\ttab \\ back\x01\x1f end \xc3\xa9t\xc3\xa9"),
                         "2026-04-13T08:00:01.000Z"},
      ClusterProbeResult{"c", false, -1, 2147483647, std::string("bad utf-8 \xff here"), ""}};
  // The kube backend's admission delay, written only when known.
  s.probe_results.push_back(
      ClusterProbeResult{"d", true, 0, 1, std::nullopt, "2026-04-13T08:00:01.500Z"});
  s.probe_results.back().admission_delay_s = 42.5;
  // And why capacity was not read, only when it was not.
  s.probe_results.push_back(
      ClusterProbeResult{"e", true, 0, 0, std::nullopt, "2026-04-13T08:00:01.700Z"});
  s.probe_results.back().capacity_error = "answered 403 to the ClusterQueue list: \"forbidden\"";
  s.reason = "selected tpu-a: reachable, queue_depth=0 <= max=5";
  s.decided_at = "2026-04-13T08:00:02.000Z";
  s.selection_id = -42;
  s.policy = "score";
  CandidateScore a;
  a.cluster = "tpu-a";
  a.priority = 2;
  a.max_queue_depth = 7;
  a.eligible = true;
  a.signals = ClusterSignals{.queue_depth = 4,
                             .running = std::nullopt,
                             .drain_per_min = 0.5,
                             .recent_wait_s = 600.0,
                             .admission_delay_s = 75.25,
                             .health = 0.9,
                             .health_samples = 11,
                             .latency_ms = 1e-7};
  a.terms = {SignalTerm{"priority", 2.0, 0.5, 1.0, 0.13333333333333333},
             SignalTerm{"queue", 4.0, std::nullopt, 0.0, -0.0},
             SignalTerm{"wait", 1e20, 1.0 / 3.0, 2.5, 123456789012345678.0},
             SignalTerm{"latency", std::nullopt, std::nan(""), 0.1, 1e-300}};
  a.total = 0.6551;
  a.rank = 2;
  a.verdict = "lost to \"tpu-b\": score 0.655 < 0.809\n";
  CandidateScore c;
  c.cluster = "c";
  c.skip_reason = "queue full: queue_depth=6 > max=5 \xff";
  c.verdict = "skipped: queue full";
  s.scores = {a, c};
  EXPECT_EQ(to_json_text(s), json(s).dump(-1, ' ', false, json::error_handler_t::replace));
  EXPECT_EQ(to_json_text(ClusterSelection{}), json(ClusterSelection{}).dump());
  // What it writes reads back.
  EXPECT_EQ(json::parse(to_json_text(s)).get<ClusterSelection>().probe_results[1],
            s.probe_results[1]);
  EXPECT_EQ(json::parse(to_json_text(s)).get<ClusterSelection>().scores[0].signals, a.signals);
  EXPECT_EQ(json::parse(to_json_text(s)).get<ClusterSelection>().probe_results[3],
            s.probe_results[3]);
  EXPECT_FALSE(json::parse(to_json_text(s))["probe_results"][0].contains("admission_delay_s"));
  EXPECT_EQ(json::parse(to_json_text(s)).get<ClusterSelection>().probe_results[4],
            s.probe_results[4]);
  EXPECT_FALSE(json::parse(to_json_text(s))["probe_results"][0].contains("capacity_error"));
}

}  // namespace
}  // namespace falcon
