// fleet-xpk's behaviour, in process against a simulated fleet: what goes to stdout and stderr,
// exit codes, prompts on a closed stdin, the two table styles, unreachable clusters, latency,
// and the kubeconfig side effect (including xpk's shared-kubeconfig race).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "fleet/fake_xpk.h"
#include "fleet/fleet_control.h"
#include "fleet/kubeconfig.h"
#include "sim_fixture.h"
#include "support/temp_dir.h"

namespace falcon::fleet {
namespace {

using ::testing::AllOf;
using ::testing::ContainsRegex;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::SimHarness;
using testing::small_fleet;
using ::testing::StartsWith;

using XpkRun = testing::ToolRun;

// The fleet these tests use: cluster `c` (c-1) with latencies, and an unreachable `down`.
FleetConfig two_clusters(const std::string& top = "") {
  return small_fleet(R"(    behaviour: {probe_latency_ms: 250, command_latency_ms: 40}
  down:
    project: p
    zone: us-east5-a
    cluster_id: down-1
    capacity: {tpu-v4-8: 1}
    behaviour: {unreachable: true}
)",
                     top);
}

class FakeXpkTest : public ::testing::Test {
 protected:
  explicit FakeXpkTest(FleetConfig config = two_clusters())
      : h_(std::move(config)), control_(h_.sim, "http://127.0.0.1:1"), api_(control_) {}

  XpkRun xpk(std::vector<std::string> args, const std::string& stdin_text = "",
             bool with_fleet = true) {
    return testing::run_in_process(run_fake_xpk, args, with_fleet ? &api_ : nullptr, env_, slept_,
                                   stdin_text);
  }

  static std::vector<std::string> on(const std::string& cluster, std::vector<std::string> args) {
    const bool down = cluster == "down-1";
    args.push_back("--cluster=" + cluster);
    args.push_back("--project=p");
    args.push_back(down ? "--zone=us-east5-a" : "--zone=us-central2-b");
    return args;
  }

  XpkRun create(const std::string& name, std::vector<std::string> extra = {},
                const std::string& stdin_text = "") {
    std::vector<std::string> args = {"workload",           "create",
                                     "--workload=" + name, "--command=python3 train.py",
                                     "--tpu-type=v4-8",    "--docker-image=gcr.io/p/trainer:1"};
    args.insert(args.end(), extra.begin(), extra.end());
    return xpk(on("c-1", args), stdin_text);
  }

  SimHarness h_;
  FleetControl control_;
  LocalFleetApi api_;
  std::map<std::string, std::string> env_;
  std::vector<long> slept_;
};

TEST_F(FakeXpkTest, ListPrintsXpkLinesAndTheTable) {
  create("train-a");
  create("train-b");
  slept_.clear();
  const XpkRun r = xpk(on("c-1", {"workload", "list"}));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_THAT(r.out, StartsWith("[XPK] Starting xpk v1.13.1\n"));
  EXPECT_THAT(r.out, HasSubstr("[XPK] Starting workload list\n[XPK] Working on p and "
                               "us-central2-b\n"));
  EXPECT_THAT(r.out, HasSubstr("[XPK] Task: `List Jobs with filter-by-status=EVERYTHING` is "
                               "implemented by `kubectl get workloads --ignore-not-found "
                               "-o=json`\n[XPK] Workload List Output:\nJobset Name   "));
  EXPECT_THAT(r.out, ContainsRegex("\ntrain-a +2026-04-13T08:00:00Z +medium +1 +1 +<none> +"
                                   "QuotaReserved +Quota reserved in ClusterQueue cluster-queue"));
  EXPECT_THAT(r.out, ContainsRegex("\ntrain-b +2026-04-13T08:00:00Z +medium +1 +<none> +<none> "
                                   "+QuotaReserved +couldn't assign flavors"));
  EXPECT_THAT(r.out, EndsWith("\n[XPK] See your workloads in Cloud Console: "
                              "https://console.cloud.google.com/kubernetes/aiml/deployments/"
                              "jobs?project=p\n[XPK] Exiting XPK cleanly\n"));
  EXPECT_EQ(slept_, (std::vector<long>{250}));  // the cluster's probe latency
}

TEST_F(FakeXpkTest, ListFiltersLikeXpk) {
  create("train-a");
  create("other");
  const XpkRun r = xpk(on("c-1", {"workload", "list", "--filter-by-job=rain"}));
  EXPECT_THAT(r.out, HasSubstr("`List Jobs with filter-by-status=EVERYTHING with "
                               "filter-by-job=rain`"));
  EXPECT_THAT(r.out, HasSubstr("\ntrain-a "));
  EXPECT_THAT(r.out, Not(HasSubstr("\nother ")));
  const XpkRun queued = xpk(on("c-1", {"workload", "list", "--filter-by-status=QUEUED"}));
  EXPECT_THAT(queued.out, Not(HasSubstr("\ntrain-a ")));  // QuotaReserved with a count
  EXPECT_THAT(queued.out, HasSubstr("\nother "));
}

TEST_F(FakeXpkTest, EmptyListPrintsOnlyTheHeader) {
  const XpkRun r = xpk(on("c-1", {"workload", "list", "--skip-validation"}));
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("[XPK] Workload List Output:\nJobset Name   Created Time   "
                               "Priority   TPU/GPU VMs Needed   TPU/GPU VMs Running/Ran   "
                               "TPU/GPU VMs Done   Status   Status Message   Status Time\n[XPK] "
                               "See your workloads"));
  EXPECT_THAT(r.out, Not(HasSubstr("Validate KUBECTL")));
}

class FakeXpkV17Test : public FakeXpkTest {
 protected:
  FakeXpkV17Test() : FakeXpkTest(two_clusters("xpk: {version: v1.7.2, table_style: v1.7}\n")) {}
};

TEST_F(FakeXpkV17Test, ListUsesKubectlsTableAndRawConditionTypes) {
  const XpkRun empty = xpk(on("c-1", {"workload", "list"}));
  EXPECT_THAT(empty.out, HasSubstr("[XPK] Workload List Output:\n\n[XPK] See your workloads"));
  create("train-a");
  const XpkRun r = xpk(on("c-1", {"workload", "list"}));
  EXPECT_THAT(r.out, StartsWith("[XPK] Starting xpk v1.7.2\n"));
  EXPECT_THAT(r.out, HasSubstr("custom-columns=\"Jobset Name:.metadata.ownerReferences[0].name"));
  EXPECT_THAT(r.out, HasSubstr("\nJobset Name   Created Time           Priority   TPU VMs "
                               "Needed   TPU VMs Running/Ran   TPU VMs Done   Status     "));
  EXPECT_THAT(r.out, ContainsRegex("\ntrain-a +2026-04-13T08:00:00Z +medium +1 +1 +<none> +"
                                   "Admitted +The workload is admitted +2026-04-13T08:00:00Z\n\n"
                                   "\\[XPK\\] See your"));
}

TEST_F(FakeXpkV17Test, DuplicateCreateIsRefusedBeforeV19) {
  create("dup");
  const XpkRun r = create("dup");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.out, EndsWith("[XPK] dup already exists, XPK will not create this workload. "
                              "Please pick a new workload name\n[XPK] XPK failed, error code 1\n"));
}

TEST_F(FakeXpkTest, ArgparseErrorsExitTwoWithNothingOnStdout) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           on("c-1", {"workload", "list", "--bogus"}),
           on("c-1", {"workload", "create", "--workload=Bad", "--command=x", "--tpu-type=v4-8"}),
           on("c-1", {"workload", "create", "--workload=w", "--command=x", "--tpu-type=v4-8",
                      "--priority=urgent"}),
           on("c-1", {"workload", "create", "--workload=w", "--command=x", "--tpu-type=v4-8",
                      "--namespace=team"}),
       }) {
    const XpkRun r = xpk(args);
    EXPECT_EQ(r.code, 2) << args.back();
    EXPECT_EQ(r.out, "");
    EXPECT_THAT(r.err, AllOf(StartsWith("usage: xpk"), HasSubstr("error: ")));
    EXPECT_THAT(r.err, Not(HasSubstr("[XPK]")));
  }
  EXPECT_THAT(xpk(on("c-1", {"workload", "list", "--bogus"})).err,
              EndsWith("xpk: error: unrecognized arguments: --bogus\n"));
  // Argument errors need no fleet.
  EXPECT_EQ(xpk({"workload", "list", "--bogus"}, "", false).code, 2);
}

// Real xpk 1.13.1 takes only its own accelerator names (reference/xpk.md): the spec's
// `tpu-v4-128` is argparse's invalid choice, with difflib's closest matches.
TEST_F(FakeXpkTest, AcceleratorTypesOutsideXpksTableAreInvalidChoices) {
  const XpkRun r = xpk(on("c-1", {"workload", "create", "--workload=w", "--command=x",
                                  "--tpu-type=tpu-v4-128", "--docker-image=i"}));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, EndsWith("error: argument --tpu-type: invalid choice: 'tpu-v4-128' (closest "
                              "matches: tpu7-128, v4-128, tpu7x-128, v4-1280, tpu7x-1280)\n"));
  // --tpu-type offers TPU names only; --device-type every name.
  EXPECT_EQ(xpk(on("c-1", {"workload", "create", "--workload=w", "--command=x",
                           "--tpu-type=h100-80gb-8", "--docker-image=i"}))
                .code,
            2);
  const XpkRun gpu = xpk(on("c-1", {"workload", "create", "--workload=w", "--command=x",
                                    "--device-type=nvidia-a100-80g", "--docker-image=i"}));
  EXPECT_EQ(gpu.code, 2);
  EXPECT_THAT(gpu.err, HasSubstr("argument --device-type: invalid choice: 'nvidia-a100-80g' "
                                 "(closest matches: h100-80gb-8, a100-40gb-8, "));
  EXPECT_EQ(xpk(on("c-1", {"workload", "create", "--workload=g", "--command=x",
                           "--device-type=a100-40gb-8", "--docker-image=i"}))
                .code,
            0);
}

// xpk 1.13 asks gcloud for the cluster at --zone when it is there, else at the zone's region.
class FakeXpkLocationTest : public FakeXpkTest {
 protected:
  FakeXpkLocationTest()
      : FakeXpkTest(small_fleet(R"(  regional:
    project: p
    zone: us-east1-b
    location: us-east1
    cluster_id: reg-1
    capacity: {v5p-8: 1}
)")) {}
  XpkRun list(const std::string& cluster, const std::string& zone) {
    return xpk({"workload", "list", "--cluster=" + cluster, "--project=p", "--zone=" + zone});
  }
};

TEST_F(FakeXpkLocationTest, ZonalClusterIsReachedOnlyThroughItsZone) {
  EXPECT_EQ(list("c-1", "us-central2-b").code, 0);
  const XpkRun r = list("c-1", "us-central2");  // the region of a zonal cluster
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.out, HasSubstr("get-credentials c-1 --location=us-central2"));
  EXPECT_THAT(r.out, HasSubstr("code=404, message=Not found: "
                               "projects/p/locations/us-central2/clusters/c-1."));
  EXPECT_EQ(list("c-1", "us-central2-a").code, 1);  // another zone of its region
}

TEST_F(FakeXpkLocationTest, RegionalClusterIsReachedThroughItsRegionOrAnyZoneOfIt) {
  for (const char* zone : {"us-east1", "us-east1-b", "us-east1-c"}) {
    const XpkRun r = list("reg-1", zone);
    EXPECT_EQ(r.code, 0) << zone << "\n" << r.out;
    EXPECT_THAT(r.out, HasSubstr("get-credentials reg-1 --location=us-east1 ")) << zone;
  }
  EXPECT_EQ(list("reg-1", "europe-west4-a").code, 1);
}

class FakeXpkNamespaceTest : public FakeXpkTest {
 protected:
  FakeXpkNamespaceTest() : FakeXpkTest(two_clusters("xpk: {supports_namespace: true}\n")) {}
};

TEST_F(FakeXpkNamespaceTest, NamespaceIsAcceptedWhenTheFleetSaysSo) {
  const XpkRun r = create("team-run", {"--namespace=team"});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("/c-1/team/team-run/details"));
  EXPECT_EQ(h_.sim.state()["clusters"][0]["workloads"][0]["namespace"], "team");
  h_.advance_s(1);
  EXPECT_EQ(h_.entries_of("team-run", 0, 0).at(0)["resource"]["labels"]["namespace_name"], "team");
}

TEST_F(FakeXpkTest, CreatePrintsKubectlAndFollowLinks) {
  const XpkRun r = create("train-a", {"--env=FLEET_DURATION_S=30", "--env", "MODEL=llama"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_THAT(r.out, HasSubstr("[XPK] Starting workload create\n"));
  EXPECT_THAT(r.out, ContainsRegex("\\[XPK\\] Task: `Creating Workload` is implemented by "
                                   "`kubectl apply -f /tmp/tmp[a-z0-9_]{8}`, streaming output "
                                   "live.\n\\[XPK\\] Waiting for `Creating Workload`, for 0 "
                                   "seconds...\rjobset.jobset.x-k8s.io/train-a created\n"
                                   "\\[XPK\\] Task: `Creating Workload` terminated with code "
                                   "`0`\n"));
  EXPECT_THAT(r.out, HasSubstr("[XPK] Follow your workload here: https://console.cloud.google."
                               "com/kubernetes/service/us-central2-b/c-1/default/train-a/"
                               "details?project=p\n"));
  EXPECT_THAT(r.out, HasSubstr("resource.labels.pod_name%3A%22train-a-slice-job-0-0-%22"));
  EXPECT_THAT(r.out, EndsWith("[XPK] Exiting XPK cleanly\n"));
  const nlohmann::json w = h_.sim.state()["clusters"][0]["workloads"][0];
  EXPECT_EQ(w["env"]["MODEL"], "llama");
  EXPECT_EQ(w["duration_s"], 30.0);
  EXPECT_EQ(w["docker_image"], "gcr.io/p/trainer:1");
  EXPECT_EQ(slept_, (std::vector<long>{40}));  // command latency
}

TEST_F(FakeXpkTest, DuplicateCreateWithClosedStdinFailsWithEofTraceback) {
  ASSERT_EQ(create("dup").code, 0);
  const XpkRun r = create("dup");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.out, EndsWith("[XPK] dup already exists, do you want to overwrite it? (y/N): "));
  EXPECT_THAT(r.err, StartsWith("Traceback (most recent call last):\n"));
  EXPECT_THAT(r.err, EndsWith("EOFError: EOF when reading a line\n"));
  EXPECT_EQ(h_.sim.list("c").rows.size(), 1u);
}

TEST_F(FakeXpkTest, DuplicateCreateAnswersAndQuietReplace) {
  ASSERT_EQ(create("dup").code, 0);
  const XpkRun no = create("dup", {}, "maybe\nn\n");
  EXPECT_EQ(no.code, 1);
  EXPECT_THAT(no.out, HasSubstr("[XPK] Invalid input. Please enter: yes/no/y/n.\n"));
  EXPECT_THAT(no.out, HasSubstr("XPK will not create this workload"));
  const XpkRun yes = create("dup", {}, "y\n");
  EXPECT_EQ(yes.code, 0);
  EXPECT_THAT(yes.out, HasSubstr("(y/N): [XPK] Deleting dup to overwrite it...\n"));
  const std::uint64_t seq_before = h_.sim.state()["clusters"][0]["workloads"][0]["sequence"];
  const XpkRun quiet = create("dup", {"--quiet"});
  EXPECT_EQ(quiet.code, 0);
  EXPECT_THAT(quiet.out, Not(HasSubstr("overwrite")));  // --quiet replaces silently
  EXPECT_GT(h_.sim.state()["clusters"][0]["workloads"][0]["sequence"].get<std::uint64_t>(),
            seq_before);
}

TEST_F(FakeXpkTest, CreateOnADeviceTheClusterLacksFailsValidation) {
  std::vector<std::string> args = {
      "workload",        "create", "--workload=w", "--command=x", "--device-type=h200-141gb-8",
      "--docker-image=i"};
  const XpkRun r = xpk(on("c-1", args));
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.out, EndsWith("[XPK] Workload scheduling validation failed. XPK will not create "
                              "the workload w.\n[XPK] XPK failed, error code 1\n"));
}

TEST_F(FakeXpkTest, BadEnvItemsFailAsXpksAssert) {
  const XpkRun r = create("w", {"--env=NOEQUALS"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, EndsWith("AssertionError: Invalid env: NOEQUALS\n"));
  const XpkRun quoted = create("q", {"--env=MSG=say \"hi\""});
  EXPECT_EQ(quoted.code, 1);
  EXPECT_THAT(quoted.err, HasSubstr("error converting YAML to JSON"));
  EXPECT_THAT(quoted.out, EndsWith("[XPK] Create Workload request returned ERROR 1\n[XPK] XPK "
                                   "failed, error code 1\n"));
  EXPECT_TRUE(h_.sim.list("c").rows.empty());
}

TEST_F(FakeXpkTest, DeleteUnknownIsNotFoundOnStderr) {
  const XpkRun r = xpk(on("c-1", {"workload", "delete", "--workload=ghost"}));
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "Error from server (NotFound): jobsets.jobset.x-k8s.io \"ghost\" not found\n");
  EXPECT_THAT(r.out, HasSubstr("[XPK] Task: `Delete Workload` is implemented by `kubectl delete "
                               "jobset ghost -n default`, streaming output live.\n"));
  EXPECT_THAT(r.out, EndsWith("[XPK] Task: `Delete Workload` terminated with code `1`\n[XPK] "
                              "Delete Workload request returned ERROR 1\n[XPK] XPK failed, error "
                              "code 1\n"));
}

TEST_F(FakeXpkTest, DeleteKnownWorkload) {
  create("w");
  const XpkRun r = xpk(on("c-1", {"workload", "delete", "--workload=w"}));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("seconds...\rjobset.jobset.x-k8s.io \"w\" deleted\n"));
  EXPECT_THAT(r.out, EndsWith("[XPK] Exiting XPK cleanly\n"));
  EXPECT_TRUE(h_.sim.list("c").rows.empty());
}

TEST_F(FakeXpkTest, DeleteByFilterAsksUnlessForced) {
  create("sweep-1");
  create("sweep-2");
  create("keep");
  const XpkRun closed = xpk(on("c-1", {"workload", "delete", "--filter-by-job=sweep"}));
  EXPECT_EQ(closed.code, 1);
  EXPECT_THAT(closed.out, EndsWith("[XPK] Planning to delete 2 workloads in the cluster c-1 "
                                   "including ['sweep-1', 'sweep-2']. \nDo you wish to delete? "
                                   "(y/N): "));
  EXPECT_THAT(closed.err, EndsWith("EOFError: EOF when reading a line\n"));
  const XpkRun forced = xpk(on("c-1", {"workload", "delete", "--filter-by-job=sweep", "--force"}));
  EXPECT_EQ(forced.code, 0) << forced.err;
  EXPECT_EQ(h_.sim.list("c").rows.size(), 1u);
  const XpkRun none = xpk(on("c-1", {"workload", "delete", "--filter-by-job=sweep", "--force"}));
  EXPECT_THAT(none.out, HasSubstr("There are no workloads to delete matching the filter"));
  EXPECT_EQ(none.code, 0);
}

TEST_F(FakeXpkTest, UnreachableClusterFailsLikeADeadControlPlane) {
  const XpkRun r = xpk(on("down-1", {"workload", "list"}));
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.out, HasSubstr("[XPK] Task: `Test kubectl credentials` terminated with ERROR "
                               "`1`, printing logs\n"));
  EXPECT_THAT(r.out, HasSubstr("[XPK] Detected error. Retrying without --dns-endpoint flag...\n"));
  EXPECT_THAT(r.out, ContainsRegex("\\[XPK\\] Task List Jobs with filter-by-status=EVERYTHING "
                                   "failed with 1\n\\[XPK\\] \\*{80}\n\\[XPK\\] b'Unable to "
                                   "connect to the server: dial tcp [0-9.]+:443: i/o "
                                   "timeout\\\\n'\n"));
  EXPECT_THAT(r.out, EndsWith("[XPK] List Job request returned ERROR 1\n[XPK] XPK failed, error "
                              "code 1\n"));
  const XpkRun c = xpk(on("down-1", {"workload", "create", "--workload=w", "--command=x",
                                     "--tpu-type=v4-8", "--docker-image=i"}));
  EXPECT_EQ(c.code, 1);
  EXPECT_THAT(c.out, HasSubstr("[XPK] Task Check if Workload Already Exists failed with 1"));
}

TEST_F(FakeXpkTest, UnknownClusterFailsGetCredentials) {
  const XpkRun r =
      xpk({"workload", "list", "--cluster=nope", "--project=p", "--zone=us-central2-b"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.out, HasSubstr("(gcloud.container.clusters.get-credentials) ResponseError: "
                               "code=404, message=Not found: "
                               "projects/p/locations/us-central2/clusters/nope."));
  EXPECT_THAT(r.out, HasSubstr("b'The connection to the server localhost:8080 was refused"));
}

TEST_F(FakeXpkTest, MissingProjectFallsBackToGcloudConfigOrExits) {
  const XpkRun r = xpk({"workload", "list", "--cluster=c-1", "--zone=us-central2-b"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("You must specify the project"));
  env_["CLOUDSDK_CORE_PROJECT"] = "p";
  EXPECT_EQ(xpk({"workload", "list", "--cluster=c-1", "--zone=us-central2-b"}).code, 0);
}

TEST_F(FakeXpkTest, WithoutAFleetItSaysHowToStartOne) {
  const XpkRun r = xpk(on("c-1", {"workload", "list"}), "", false);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.out, AllOf(StartsWith("[XPK] fleet-xpk: FALCON_FLEET_URL is not set"),
                           EndsWith("[XPK] XPK failed, error code 1\n")));
  EXPECT_THAT(r.err, HasSubstr("falcon-fleet --fleet"));
}

TEST_F(FakeXpkTest, VersionPrintsTheFleetsXpkVersion) {
  const XpkRun r = xpk({"version"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "[XPK] Starting xpk v1.13.1\n[XPK] xpk_version: v1.13.1\n[XPK] XPK Done.\n");
}

TEST_F(FakeXpkTest, DryRunTouchesNothing) {
  const XpkRun r = create("dry", {"--dry-run"});
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("not running since it is a dry run. \nkubectl apply -f /tmp/tmp"));
  EXPECT_TRUE(h_.sim.list("c").rows.empty());
}

TEST_F(FakeXpkTest, WritesTheKubeconfigItWasGiven) {
  falcon::testing::TempDir dir;
  const std::string kubeconfig = (dir.path() / "kube" / "c" / "config").string();
  env_["KUBECONFIG"] = kubeconfig;
  ASSERT_EQ(xpk(on("c-1", {"workload", "list"})).code, 0);
  EXPECT_EQ(read_current_context(kubeconfig), "gke_p_us-central2-b_c-1");
  const nlohmann::json seen = h_.sim.state()["clusters"][0]["kubeconfigs"];
  EXPECT_EQ(seen, nlohmann::json::array({kubeconfig}));
}

TEST_F(FakeXpkTest, ASharedKubeconfigSendsKubectlToWhicheverClusterItNamesLast) {
  // xpk ignores a failed credentials fetch and runs kubectl on the kubeconfig's current
  // context: with one kubeconfig shared between clusters, a command for a cluster that cannot
  // be reached silently acts on the cluster fetched before.
  falcon::testing::TempDir dir;
  const std::string shared = (dir.path() / "config").string();
  env_["KUBECONFIG"] = shared;
  ASSERT_EQ(create("mine").code, 0);
  const XpkRun r =
      xpk({"workload", "list", "--cluster=nope", "--project=p", "--zone=us-central2-b"});
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("get-credentials) ResponseError: code=404"));
  EXPECT_THAT(r.out, HasSubstr("\nmine "));  // c-1's workload, listed as if it were nope's

  // Switching the current context (another xpk's get-credentials) moves kubectl too.
  write_gke_kubeconfig(shared, GkeContext{"p", "us-east5-a", "down-1"}, "http://x");
  const XpkRun other = xpk({"workload", "list", "--cluster=nope", "--project=p", "--zone=z"});
  EXPECT_EQ(other.code, 1);
  EXPECT_THAT(other.out, HasSubstr("i/o timeout"));  // down-1 answers, or rather does not
}

}  // namespace
}  // namespace falcon::fleet
