// The client's value types as JSON (client.h): the brief decision in the server's brief shape,
// the whole one as ClusterSelection plus candidate_probes, a recovery both ways.
#include "falcon/client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace falcon {
namespace {

using nlohmann::json;

TEST(ClientTypesTest, ABriefDecisionIsTheServersBriefAnswer) {
  Decision d;
  d.brief = true;
  d.selection.accelerator = "tpu-v4-64";
  d.selection.selected_cluster = "tpu-b";
  d.selection.selection_id = 12;
  d.selection.reason = "selected tpu-b";
  d.same_as = 9;
  MonitoredProbe cached;
  cached.result.cluster = "tpu-a";
  cached.result.reachable = true;
  cached.age_ms = 1200;
  cached.from_cache = true;
  MonitoredProbe probed;
  probed.result.cluster = "tpu-down";
  probed.age_ms = 3;
  d.candidate_probes = {cached, probed};
  const json j = d;
  EXPECT_EQ(j["probe_age_ms"], json({{"tpu-a", 1200}, {"tpu-down", 3}}));
  EXPECT_EQ(j["probed_now"], json({"tpu-down"}));
  EXPECT_EQ(j["unreachable"], json({"tpu-down"}));
  EXPECT_EQ(j["same_as"], 9);
  EXPECT_EQ(j["explain"], "/v1/selections/12");
  EXPECT_FALSE(j.contains("scores"));
}

TEST(ClientTypesTest, AWholeDecisionIsTheSelectionWithItsCandidateProbesWhenThereAreAny) {
  Decision d;
  d.selection.accelerator = "tpu-v4-64";
  d.selection.selected_cluster = "tpu-b";
  json j = d;
  EXPECT_EQ(j, json(d.selection));  // in-process: no candidate_probes
  MonitoredProbe p;
  p.result.cluster = "tpu-b";
  d.candidate_probes = {p};
  j = d;
  ASSERT_EQ(j["candidate_probes"].size(), 1u);
  EXPECT_EQ(j["candidate_probes"][0].get<MonitoredProbe>().result.cluster, "tpu-b");
}

TEST(ClientTypesTest, ARecoveryRoundTripsThroughJson) {
  Recovery r;
  r.id = "train-1";
  r.workload = "train";
  r.kind = "infrastructure";
  r.from_cluster = "tpu-a";
  r.to_cluster = "tpu-b";
  r.t_violation = "2026-04-13T08:00:00.000Z";
  r.svrt_s = 34;
  r.admission_s = 4;
  r.attempts = 1;
  r.outcome = "recovered";
  const json j = r;
  EXPECT_TRUE(j["replacement"].is_null());
  EXPECT_EQ(j["phases"]["admission_s"], 4.0);
  EXPECT_TRUE(j["phases"]["detection_s"].is_null());
  const Recovery back = j.get<Recovery>();
  EXPECT_EQ(json(back), j);
}

}  // namespace
}  // namespace falcon
