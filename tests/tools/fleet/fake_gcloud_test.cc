// fleet-gcloud, in process against a simulated fleet: `container clusters get-credentials` as
// gcloud answers it (messages, exit codes, the kubeconfig it writes, the fleet's latency), and
// what the stand-in refuses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "fleet/fake_gcloud.h"
#include "fleet/fleet_control.h"
#include "fleet/kubeconfig.h"
#include "sim_fixture.h"
#include "support/temp_dir.h"

namespace falcon::fleet {
namespace {

using ::testing::HasSubstr;
using testing::SimHarness;
using testing::small_fleet;

using GcloudRun = testing::ToolRun;

class FakeGcloudTest : public ::testing::Test {
 protected:
  FakeGcloudTest()
      : h_(small_fleet("    behaviour: {probe_latency_ms: 250}\n")),
        control_(h_.sim, "http://127.0.0.1:1"),
        api_(control_) {
    env_["KUBECONFIG"] = kubeconfig_;
  }

  GcloudRun gcloud(const std::vector<std::string>& args, bool with_fleet = true) {
    return testing::run_in_process(run_fake_gcloud, args, with_fleet ? &api_ : nullptr, env_,
                                   slept_);
  }

  SimHarness h_;
  FleetControl control_;
  LocalFleetApi api_;
  falcon::testing::TempDir dir_;
  std::string kubeconfig_ = (dir_.path() / "kube" / "c" / "config").string();
  std::map<std::string, std::string> env_;
  std::vector<long> slept_;
};

TEST_F(FakeGcloudTest, GetCredentialsWritesTheContextAndSaysSoOnStderr) {
  const GcloudRun r = gcloud({"container", "clusters", "get-credentials", "c-1", "--project=p",
                              "--location=us-central2-b"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "Fetching cluster endpoint and auth data.\nkubeconfig entry generated for c-1.\n");
  EXPECT_EQ(read_current_context(kubeconfig_), "gke_p_us-central2-b_c-1");
  EXPECT_EQ(slept_, (std::vector<long>{250}));  // the cluster's latency
}

TEST_F(FakeGcloudTest, ZoneAndSpaceSeparatedFlagsWorkToo) {
  const GcloudRun r = gcloud({"container", "clusters", "get-credentials", "--project", "p",
                              "--zone", "us-central2-b", "c-1", "--dns-endpoint", "--quiet"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(read_current_context(kubeconfig_), "gke_p_us-central2-b_c-1");
}

TEST_F(FakeGcloudTest, AClusterTheFleetDoesNotHaveIsGcloudsNotFound) {
  const GcloudRun r = gcloud({"container", "clusters", "get-credentials", "ghost", "--project=p",
                              "--location=us-central2-b"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("ERROR: (gcloud.container.clusters.get-credentials) ResponseError: "
                               "code=404, message=Not found: "
                               "projects/p/locations/us-central2-b/clusters/ghost."));
  EXPECT_FALSE(read_current_context(kubeconfig_).has_value());
}

// GKE finds a cluster only at its own location; real gcloud then suggests where it is
// (reference/xpk.md, "Location").
TEST_F(FakeGcloudTest, AWrongLocationIsNotFoundWithWhereTheClusterIs) {
  for (const char* location : {"us-central2", "us-central2-a"}) {
    const GcloudRun r = gcloud({"container", "clusters", "get-credentials", "c-1", "--project=p",
                                std::string("--location=") + location});
    EXPECT_EQ(r.code, 1) << location;
    EXPECT_THAT(r.err, HasSubstr(std::string("code=404, message=Not found: projects/p/locations/") +
                                 location + "/clusters/c-1."));
    EXPECT_THAT(r.err, HasSubstr("Did you mean [c-1] in [us-central2-b]?"));
  }
  // --region takes a region like --location does.
  EXPECT_THAT(gcloud({"container", "clusters", "get-credentials", "c-1", "--project=p",
                      "--region=us-central2"})
                  .err,
              HasSubstr("Did you mean [c-1] in [us-central2-b]?"));
}

TEST_F(FakeGcloudTest, ALocationThatIsNoGcpLocationIsABadRequest) {
  const GcloudRun r =
      gcloud({"container", "clusters", "get-credentials", "c-1", "--project=p", "--location=Mars"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("code=400, message=Location \"Mars\" does not exist."));
}

TEST_F(FakeGcloudTest, MissingProjectLocationOrNameAreGcloudsErrors) {
  EXPECT_THAT(
      gcloud({"container", "clusters", "get-credentials", "c-1", "--location=us-central2-b"}).err,
      HasSubstr("The required property [project] is not currently set."));
  EXPECT_THAT(gcloud({"container", "clusters", "get-credentials", "c-1", "--project=p"}).err,
              HasSubstr("One of [--location, --zone, --region] must be supplied"));
  const GcloudRun no_name = gcloud({"container", "clusters", "get-credentials", "--project=p"});
  EXPECT_EQ(no_name.code, 2);
  EXPECT_THAT(no_name.err, HasSubstr("argument NAME: Must be specified."));
  EXPECT_EQ(gcloud({"container", "clusters", "get-credentials", "c-1", "--project=p",
                    "--location=x", "--bogus"})
                .code,
            2);
}

TEST_F(FakeGcloudTest, WithoutTheFleetItSaysHowToStartIt) {
  const GcloudRun r = gcloud({"container", "clusters", "get-credentials", "c-1", "--project=p",
                              "--location=us-central2-b"},
                             /*with_fleet=*/false);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("FALCON_FLEET_URL is not set"));
}

TEST_F(FakeGcloudTest, VersionSaysWhatItIsAndOtherCommandsAreRefused) {
  const GcloudRun v = gcloud({"version"});
  EXPECT_EQ(v.code, 0);
  EXPECT_THAT(v.out, HasSubstr("fleet-gcloud"));
  const GcloudRun other = gcloud({"compute", "instances", "list"});
  EXPECT_EQ(other.code, 2);
  EXPECT_THAT(other.err, HasSubstr("only `container clusters get-credentials` and `version`"));
  EXPECT_THAT(other.err, HasSubstr("compute instances list"));
}

}  // namespace
}  // namespace falcon::fleet
