// End to end (issue 27): `falcon serve` with its state directory (the SQLite store, the warmed
// kubeconfigs) on a small tmpfs that the test fills while it selects. Selection never stops,
// /readyz says why the store cannot be written, a submit is refused and creates nothing, and
// recording resumes as soon as the disk has room again.
//
// The tmpfs is mounted in a mount namespace of the test's own thread (unshare(CLONE_NEWNS), so
// nothing outside the test sees it); `falcon serve` is forked from that thread and shares it.
// That needs CAP_SYS_ADMIN (root, as `make test` runs in CI); without it the test is skipped
// and says so.
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include <httplib.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "support/local_fleet.h"
#include "support/run_falcon.h"
#include "support/serve_process.h"
#include "support/temp_dir.h"

namespace falcon {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::ServeProcess;

// Appends to `path` until its file system is full; returns the bytes written.
std::size_t fill_until_full(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("cannot create " + path.string() + ": " + strerror(errno));
  const std::string block(1 << 16, 'x');
  std::size_t total = 0;
  for (std::size_t size = block.size(); size >= 512; size /= 2) {
    for (;;) {
      const ssize_t n = ::write(fd, block.data(), size);
      if (n <= 0) break;  // ENOSPC: try a smaller block, down to 512 bytes
      total += static_cast<std::size_t>(n);
    }
  }
  ::close(fd);
  return total;
}

class ServeDiskFullTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::unshare(CLONE_NEWNS) != 0) {
      GTEST_SKIP() << "cannot make a mount namespace for a small tmpfs (needs CAP_SYS_ADMIN): "
                   << strerror(errno);
    }
    // Mounts made here stay here (the root may be mounted shared).
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      GTEST_SKIP() << "cannot make the mount namespace private: " << strerror(errno);
    }
    disk_ = fleet_.state_dir();
    std::filesystem::create_directories(disk_);
    if (::mount("falcon-test", disk_.c_str(), "tmpfs", 0, "size=8m,mode=0700") != 0) {
      GTEST_SKIP() << "cannot mount a small tmpfs (a container without that right?): "
                   << strerror(errno);
    }
    mounted_ = true;
    config_ = dir_.write("repos.yaml", testing::read_file(fleet_.repos_path()) +
                                           "serve:\n  probe_interval_s: 1\n"
                                           "  max_probe_age_s: 2\n")
                  .string();
  }
  void TearDown() override {
    if (mounted_) ::umount2(disk_.c_str(), MNT_DETACH);
  }

  static json select(httplib::Client& c) {
    const auto r =
        c.Post("/v1/select", json{{"accelerator_type", "tpu-v4-64"}, {"explain", true}}.dump(),
               "application/json");
    if (!r) return json{{"status", 0}};
    json j = json::parse(r->body, nullptr, false);
    j["status"] = r->status;
    return j;
  }
  static int status_of(httplib::Client& c, const char* path) {
    const auto r = c.Get(path);
    return r ? r->status : 0;
  }

  testing::LocalFleet fleet_;
  testing::TempDir dir_;
  std::filesystem::path disk_;
  std::string config_;
  bool mounted_ = false;
};

TEST_F(ServeDiskFullTest, SelectionGoesOnWhileTheStateDiskIsFullAndRecordingResumes) {
  ServeProcess serve(config_, "sqlite://" + (disk_ / "falcon.db").string());
  serve.wait_ready();
  httplib::Client c("127.0.0.1", serve.port());
  c.set_read_timeout(120, 0);
  const json first = select(c);
  ASSERT_EQ(first["status"], 200) << first.dump();
  EXPECT_EQ(first["selected_cluster"], "tpu-b");
  EXPECT_GT(first["selection_id"].get<std::int64_t>(), 0);

  const std::size_t filled = fill_until_full(disk_ / "filler");
  EXPECT_GT(filled, 0u);
  // Decisions for at least 5 s (each on probes at most 2 s old: the health loop probes every
  // second, on the full disk), until the store refused one (the WAL may still have room for a
  // few) and /readyz says why: every one is answered, on the same cluster.
  const auto full_since = std::chrono::steady_clock::now();
  int answered = 0;
  json refused;
  bool not_ready = false;
  for (;;) {
    const json a = select(c);
    ASSERT_EQ(a["status"], 200) << a.dump() << serve.log();
    ASSERT_EQ(a["selected_cluster"], "tpu-b") << a.dump();
    ++answered;
    if (a.contains("not_recorded") && refused.is_null()) refused = a;
    if (!refused.is_null() && !not_ready) not_ready = status_of(c, "/readyz") == 503;
    const auto elapsed = std::chrono::steady_clock::now() - full_since;
    if (!refused.is_null() && not_ready && elapsed >= std::chrono::seconds(5)) break;
    ASSERT_LT(elapsed, std::chrono::seconds(90))
        << "refused: " << !refused.is_null() << ", not ready: " << not_ready << serve.log();
  }
  EXPECT_EQ(refused["selection_id"], 0);
  EXPECT_THAT(refused["not_recorded"].get<std::string>(), HasSubstr("full"));
  EXPECT_THAT(c.Get("/readyz")->body, HasSubstr("cannot be written"));
  // A brief select too (never repeated while unrecorded).
  const auto brief =
      c.Post("/v1/select", R"({"accelerator_type": "tpu-v4-64"})", "application/json");
  ASSERT_TRUE(brief);
  EXPECT_EQ(brief->status, 200) << brief->body;
  EXPECT_THAT(brief->body, HasSubstr("\"explain\":null"));
  EXPECT_THAT(brief->body, HasSubstr("\"not_recorded\":"));

  // A submit records its intent first: refused, and nothing is on the cluster.
  const json spec = {{"name", "disk-full-run"},
                     {"docker_image", "gcr.io/f/b:1"},
                     {"command", {"true"}},
                     {"accelerator_type", "tpu-v4-64"}};
  const auto submitted = c.Post("/v1/workloads", json{{"spec", spec}}.dump(), "application/json");
  ASSERT_TRUE(submitted);
  EXPECT_EQ(submitted->status, 503) << submitted->body;
  EXPECT_THAT(submitted->body, HasSubstr("full"));
  for (const auto& row : fleet_.service().simulator().list("tpu-b").rows) {
    EXPECT_NE(row.name, "disk-full-run");
  }
  // Room again: the next decision is recorded, and the server is ready again.
  std::filesystem::remove(disk_ / "filler");
  const auto freed = std::chrono::steady_clock::now();
  const json again = select(c);
  ASSERT_EQ(again["status"], 200) << again.dump();
  EXPECT_GT(again["selection_id"].get<std::int64_t>(), 0) << again.dump();
  EXPECT_FALSE(again.contains("not_recorded"));
  const auto stored =
      c.Get(("/v1/selections/" + std::to_string(again["selection_id"].get<int>())).c_str());
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->status, 200);
  while (status_of(c, "/readyz") != 200) {
    ASSERT_LT(std::chrono::steady_clock::now(), freed + std::chrono::seconds(30)) << serve.log();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // polling the server's signal
  }
  const double ready_after_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - freed).count();
  RecordProperty("answered_while_full", answered);
  RecordProperty("ready_again_after_ms", static_cast<int>(ready_after_s * 1000));
  EXPECT_EQ(c.Post("/v1/workloads", json{{"spec", spec}}.dump(), "application/json")->status, 201);
}

}  // namespace
}  // namespace falcon
