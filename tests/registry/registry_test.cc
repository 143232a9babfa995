// ClusterRegistry: the spec's acceptance rows and the snapshot behaviour.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "falcon/errors.h"
#include "falcon/registry.h"
#include "support/temp_dir.h"

namespace falcon {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

std::string cluster_yaml(const std::string& name, const std::string& accel, int priority) {
  return "  " + name + ":\n    project: p-" + name + "\n    zone: us-central2-b\n" +
         "    cluster_id: c-" + name + "\n    accelerator_types:\n      - type: " + accel +
         "\n        device_class: tpu\n        priority: " + std::to_string(priority) + "\n";
}

class RegistryTest : public ::testing::Test {
 protected:
  std::string write(const std::string& body) { return dir_.write("repos.yaml", body).string(); }
  testing::TempDir dir_;
  ClusterRegistry registry_;
};

// Spec acceptance: ClusterRegistry / 加载合法配置
TEST_F(RegistryTest, LoadsTheSpecSampleIntoClusterConfigs) {
  registry_.load(std::string(FALCON_SOURCE_DIR) + "/examples/repos.yaml");
  const auto clusters = registry_.list_clusters();
  ASSERT_THAT(clusters, SizeIs(2));
  const ClusterConfig& tpu = clusters[0];
  EXPECT_EQ(tpu.name, "tpu-v4-prod");
  EXPECT_EQ(tpu.provider, "gke");
  EXPECT_EQ(tpu.project, "primatrix-tpu");
  EXPECT_EQ(tpu.zone, "us-central2-b");
  EXPECT_EQ(tpu.cluster_id, "tpu-v4-cluster");
  EXPECT_THAT(tpu.accelerator_slots, ElementsAre(AcceleratorSlot{"v4-64", DeviceClass::kTpu, 1},
                                                 AcceleratorSlot{"v4-128", DeviceClass::kTpu, 1}));
  EXPECT_EQ(tpu.default_namespace, "default");
  EXPECT_EQ(tpu.gcs_bucket, "gs://falcon-tpu-v4");
  EXPECT_EQ(tpu.max_queue_depth, 5);
  EXPECT_EQ(tpu.probe_timeout_s, 15);
  EXPECT_EQ(tpu.labels,
            (std::map<std::string, std::string>{{"env", "prod"}, {"team", "pretrain"}}));
  EXPECT_EQ(clusters[1].name, "gpu-a100");
  EXPECT_EQ(clusters[1].default_namespace, "benchmark");
  EXPECT_EQ(clusters[1].accelerator_slots[0].device_class, DeviceClass::kGpu);
}

// Spec acceptance: ClusterRegistry / 配置校验
TEST_F(RegistryTest, MissingRequiredFieldsRaiseClusterConfigError) {
  const auto path =
      write("clusters:\n  a:\n    accelerator_types:\n      - {type: v4-64, device_class: tpu}\n");
  try {
    registry_.load(path);
    FAIL() << "expected ClusterConfigError";
  } catch (const ClusterConfigError& e) {
    EXPECT_THAT(e.problems(), SizeIs(3));
    EXPECT_THAT(e.what(), HasSubstr("clusters.a.project: missing"));
    EXPECT_THAT(e.what(), HasSubstr("clusters.a.zone: missing"));
    EXPECT_THAT(e.what(), HasSubstr("clusters.a.cluster_id: missing"));
    EXPECT_THAT(e.what(), HasSubstr(path + ":2:3"));
  }
}

// Spec acceptance: ClusterRegistry / 按 accelerator 查询
TEST_F(RegistryTest, FindByAcceleratorReturnsMatchesByAscendingPriority) {
  registry_.load(write("clusters:\n" + cluster_yaml("low", "tpu-v4-128", 3) +
                       cluster_yaml("other", "tpu-v5p-256", 1) +
                       cluster_yaml("high", "tpu-v4-128", 1) +
                       cluster_yaml("mid", "tpu-v4-128", 2)));
  const auto found = registry_.find_by_accelerator("tpu-v4-128");
  ASSERT_THAT(found, SizeIs(3));
  EXPECT_EQ(found[0].first.name, "high");
  EXPECT_EQ(found[0].second, 1);
  EXPECT_EQ(found[1].first.name, "mid");
  EXPECT_EQ(found[1].second, 2);
  EXPECT_EQ(found[2].first.name, "low");
  EXPECT_EQ(found[2].second, 3);
}

TEST_F(RegistryTest, EqualPrioritiesKeepFileOrder) {
  registry_.load(write("clusters:\n" + cluster_yaml("zeta", "v5p-8", 1) +
                       cluster_yaml("alpha", "v5p-8", 1) + cluster_yaml("mu", "v5p-8", 1)));
  const auto found = registry_.find_by_accelerator("v5p-8");
  ASSERT_THAT(found, SizeIs(3));
  EXPECT_EQ(found[0].first.name, "zeta");
  EXPECT_EQ(found[1].first.name, "alpha");
  EXPECT_EQ(found[2].first.name, "mu");
}

// The spec's spelling (tpu-v4-128) and xpk's (v4-128) name one accelerator type, in the file and
// in the query.
TEST_F(RegistryTest, FindByAcceleratorTakesBothSpellings) {
  registry_.load(write("clusters:\n" + cluster_yaml("spec", "tpu-v4-128", 1) +
                       cluster_yaml("xpk", "v4-128", 2)));
  for (const std::string query : {"tpu-v4-128", "v4-128"}) {
    const auto found = registry_.find_by_accelerator(query);
    ASSERT_THAT(found, SizeIs(2)) << query;
    EXPECT_EQ(found[0].first.name, "spec");
    EXPECT_EQ(found[1].first.name, "xpk");
    EXPECT_EQ(found[0].first.accelerator_slots[0].type, "v4-128");  // canonical in the model
  }
  EXPECT_THAT(registry_.find_by_accelerator("tpu-v4-64"), IsEmpty());
}

// Spec acceptance: ClusterRegistry / 无匹配 accelerator
TEST_F(RegistryTest, FindByAcceleratorWithNoMatchIsEmpty) {
  registry_.load(std::string(FALCON_SOURCE_DIR) + "/examples/repos.yaml");
  EXPECT_THAT(registry_.find_by_accelerator("tpu-v9-9999"), IsEmpty());
}

// Spec acceptance: ClusterRegistry / 重复加载
TEST_F(RegistryTest, RepeatedLoadReplacesWithoutDuplicates) {
  const auto path =
      write("clusters:\n" + cluster_yaml("a", "v4-64", 1) + cluster_yaml("b", "v4-64", 1));
  registry_.load(path);
  registry_.load(path);
  registry_.load(path);
  EXPECT_THAT(registry_.list_clusters(), SizeIs(2));
  EXPECT_THAT(registry_.find_by_accelerator("v4-64"), SizeIs(2));

  registry_.load(write("clusters:\n" + cluster_yaml("c", "v4-8", 1)));
  const auto clusters = registry_.list_clusters();
  ASSERT_THAT(clusters, SizeIs(1));
  EXPECT_EQ(clusters[0].name, "c");
  EXPECT_THAT(registry_.find_by_accelerator("v4-64"), IsEmpty());
}

TEST_F(RegistryTest, FailedLoadKeepsThePreviousRegistry) {
  registry_.load(write("clusters:\n" + cluster_yaml("a", "v4-64", 1)));
  EXPECT_THROW(registry_.load(write("clusters:\n  a:\n    project: p\n")), ClusterConfigError);
  EXPECT_THROW(registry_.load(dir_.path().string() + "/missing.yaml"), ClusterConfigError);
  ASSERT_THAT(registry_.list_clusters(), SizeIs(1));
  EXPECT_EQ(registry_.get_cluster("a").project, "p-a");
}

TEST_F(RegistryTest, GetClusterOfUnknownNameRaisesUnknownClusterError) {
  registry_.load(
      write("clusters:\n" + cluster_yaml("a", "v4-64", 1) + cluster_yaml("b", "v4-64", 1)));
  EXPECT_EQ(registry_.get_cluster("b").cluster_id, "c-b");
  try {
    registry_.get_cluster("nope");
    FAIL() << "expected UnknownClusterError";
  } catch (const UnknownClusterError& e) {
    EXPECT_EQ(e.cluster(), "nope");
    EXPECT_THAT(e.what(), HasSubstr("unknown cluster 'nope' (registered: a, b)"));
  }
}

TEST_F(RegistryTest, EmptyBeforeTheFirstLoad) {
  EXPECT_THAT(registry_.list_clusters(), IsEmpty());
  EXPECT_THROW(registry_.get_cluster("a"), UnknownClusterError);
  EXPECT_NE(registry_.snapshot(), nullptr);
}

// Readers on other threads see the old or the new registry, never a mix: every snapshot they
// take is internally consistent (all clusters of one generation).
TEST_F(RegistryTest, ConcurrentReadersNeverSeeAMixOfTwoLoads) {
  const auto gen_a = write("clusters:\n" + cluster_yaml("a1", "v4-64", 1) +
                           cluster_yaml("a2", "v4-64", 1) + cluster_yaml("a3", "v4-64", 1));
  const auto gen_b = dir_.write("b.yaml", "clusters:\n" + cluster_yaml("b1", "v4-64", 2) +
                                              cluster_yaml("b2", "v4-64", 2))
                         .string();
  registry_.load(gen_a);
  std::atomic<bool> stop{false};
  std::atomic<int> torn{0}, reads{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&] {
      while (!stop.load()) {
        const auto found = registry_.find_by_accelerator("v4-64");
        const bool all_a = found.size() == 3 && found[0].first.name[0] == 'a' &&
                           found[1].first.name[0] == 'a' && found[2].first.name[0] == 'a';
        const bool all_b =
            found.size() == 2 && found[0].first.name[0] == 'b' && found[1].first.name[0] == 'b';
        if (!all_a && !all_b) torn.fetch_add(1);
        reads.fetch_add(1);
      }
    });
  }
  for (int i = 0; i < 200; ++i) registry_.load(i % 2 == 0 ? gen_b : gen_a);
  while (reads.load() < 1000) std::this_thread::yield();
  stop = true;
  for (auto& r : readers) r.join();
  EXPECT_EQ(torn.load(), 0);
}

}  // namespace
}  // namespace falcon
