// The layer reads fleet-xpk's list exactly as it reads real xpk's: for both table styles, the
// layer's own parser (src/xpk/list_parser.h) finds every row and maps it to the state the
// simulator knows the workload is in.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "fleet/fake_xpk.h"
#include "fleet/fleet_control.h"
#include "sim_fixture.h"
#include "xpk/list_parser.h"

namespace falcon::fleet {
namespace {

using testing::SimHarness;
using testing::small_fleet;

// Puts one workload in each state on cluster `c`, then lists it with fleet-xpk and parses the
// output with the layer's parser; returns name -> (mapped state, simulator state).
std::map<std::string, std::pair<std::string, std::string>> list_through_layer(
    const std::string& top_yaml, std::optional<std::string>* version = nullptr) {
  SimHarness h(small_fleet("", top_yaml));
  h.create("done", "tpu-v4-64", {{"FLEET_DURATION_S", "10"}});
  h.create("broken", "tpu-v4-64", {{"FLEET_DURATION_S", "10"}, {"FLEET_OUTCOME", "fail"}});
  h.advance_s(10);
  h.create("running", "tpu-v4-8");
  h.create("waiting", "tpu-v4-8");  // tpu-v4-8 has a single slot
  h.create("cpu-job", "n2-standard-32-4");
  h.advance_s(1);

  FleetControl control(h.sim, "http://127.0.0.1:1");
  LocalFleetApi api(control);
  std::ostringstream out;
  std::ostringstream err;
  std::istringstream in;
  const FakeXpkEnv env{
      out, err, in, [](const std::string&) -> std::optional<std::string> { return std::nullopt; },
      [](std::chrono::milliseconds) {}};
  const int code = run_fake_xpk(
      {"workload", "list", "--cluster=c-1", "--project=p", "--zone=us-central2-b"}, &api, env);
  EXPECT_EQ(code, 0) << err.str();
  const auto parsed = xpk::parse_workload_list(out.str());
  EXPECT_TRUE(parsed.has_value()) << out.str();
  std::map<std::string, std::pair<std::string, std::string>> result;
  if (!parsed) return result;
  if (version) *version = parsed->xpk_version;
  for (const auto& row : parsed->rows) result[row.jobset_name].first = xpk::map_row_state(row);
  for (const auto& row : h.sim.list("c").rows) result[row.name].second = row.state;
  return result;
}

void expect_states_agree(const std::map<std::string, std::pair<std::string, std::string>>& rows) {
  ASSERT_EQ(rows.size(), 5u);
  for (const auto& [name, states] : rows) EXPECT_EQ(states.first, states.second) << name;
  EXPECT_EQ(rows.at("done").first, "COMPLETED");
  EXPECT_EQ(rows.at("broken").first, "FAILED");
  EXPECT_EQ(rows.at("running").first, "RUNNING");
  EXPECT_EQ(rows.at("waiting").first, "QUEUED");
  EXPECT_EQ(rows.at("cpu-job").first, "RUNNING");
}

TEST(LayerCompat, TheLayerReadsTheV19TableAsTheSimulatorMeantIt) {
  std::optional<std::string> version;
  expect_states_agree(list_through_layer("", &version));
  EXPECT_EQ(version, "1.13.1");
}

TEST(LayerCompat, TheLayerReadsTheV17TableAsTheSimulatorMeantIt) {
  std::optional<std::string> version;
  expect_states_agree(list_through_layer("xpk: {version: v1.7.2, table_style: v1.7}\n", &version));
  EXPECT_EQ(version, "1.7.2");
}

}  // namespace
}  // namespace falcon::fleet
