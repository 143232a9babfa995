// The fake Logging API at benchmark scale: a million GKE entries, a newest-first tail that must
// not scan them all, a bounded window, and a 50,000-entry read through HTTP pages. Work is
// measured by counting examined entries, never by the wall clock.
#include <gtest/gtest.h>

#include <fstream>

#include "server_fixture.h"

namespace falcon::fake::testing {
namespace {

constexpr std::int64_t kMilli = 1'000'000;
constexpr std::int64_t kT0 = 1'714'521'600LL * 1'000'000'000;  // 2024-05-01T00:00:00Z
constexpr int kEntries = 1'000'000;
constexpr int kWorkloads = 8;
constexpr int kPods = kWorkloads * 4;

std::string workload(int i) { return fmt::format("wl-{}", i % kWorkloads); }

// Resident set size of this process in KiB.
long rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      long kib = 0;
      in >> kib;
      return kib;
    }
    in.ignore(1 << 16, '\n');
  }
  return 0;
}

class MillionEntries : public ServerTest {
 protected:
  void SetUp() override {
    // 8 workloads x 4 ranks = 32 pods; entry i is 1 ms after entry i-1 and belongs to pod
    // (workload i % 8, worker (i / 8) % 4). Lines go in through the bulk path, pod by pod in
    // chunks of 10,000 ms, the way a fleet of pods writes them.
    const long before = rss_kib();
    std::vector<json> shared;
    for (int pod = 0; pod < kPods; ++pod) {
      shared.push_back(gke_entry("p", workload(pod / 4), pod % 4, 0, ""));
      shared.back().erase("timestamp");
      shared.back().erase("textPayload");
    }
    constexpr int kChunk = 10'000;
    for (int start = 0; start < kEntries; start += kChunk) {
      std::vector<std::vector<LogLine>> pods(kPods);
      for (int i = start; i < start + kChunk; ++i) {
        pods[(i % kWorkloads) * 4 + (i / kWorkloads) % 4].push_back(LogLine{
            kT0 + i * kMilli, fmt::format("step {} loss 0.{} tokens/s 123456", i, i % 997)});
      }
      for (int pod = 0; pod < kPods; ++pod) {
        server_.write_text_entries(shared[pod], std::move(pods[pod]));
      }
    }
    ASSERT_EQ(server_.log_entry_count(), static_cast<std::size_t>(kEntries));
    store_kib_ = rss_kib() - before;
    RecordProperty("store_rss_kib", static_cast<int>(store_kib_));
  }

  long store_kib_ = 0;
};

TEST_F(MillionEntries, ScaleBehaviour) {
  // 1. A tail: newest 100 lines of one workload since a recent instant, newest first.
  const std::string filter =
      fmt::format(R"(labels."k8s-pod/jobset_sigs_k8s_io/jobset-name"="wl-3" AND timestamp>="{}")",
                  tools::format_rfc3339_nanos(kT0 + 900'000 * kMilli));
  std::uint64_t before = server_.log_entries_examined();
  HttpResult r = list({{"filter", filter}, {"orderBy", "timestamp desc"}, {"pageSize", 100}});
  ASSERT_EQ(r.status, 200);
  ASSERT_EQ(r.body["entries"].size(), 100u);
  EXPECT_EQ(r.body["entries"][0]["textPayload"].get<std::string>().rfind(
                fmt::format("step {} ", kEntries - kWorkloads + 3), 0),
            0u);
  std::int64_t previous = std::numeric_limits<std::int64_t>::max();
  for (const auto& e : r.body["entries"]) {
    const std::int64_t t = *tools::parse_rfc3339_nanos(e["timestamp"].get<std::string>());
    EXPECT_LT(t, previous);
    previous = t;
  }
  EXPECT_TRUE(r.body.contains("nextPageToken"));
  const std::uint64_t tail_examined = server_.log_entries_examined() - before;
  EXPECT_LT(tail_examined, 2'000u) << "the tail scanned far more than the newest entries";

  // 2. A bounded window in ascending order only looks inside the window.
  before = server_.log_entries_examined();
  const std::string window = fmt::format(
      R"(timestamp>="{}" AND timestamp<"{}" AND labels."k8s-pod/jobset_sigs_k8s_io/jobset-name"="wl-0")",
      tools::format_rfc3339_nanos(kT0 + 500'000 * kMilli),
      tools::format_rfc3339_nanos(kT0 + 505'000 * kMilli));
  r = list({{"filter", window}, {"pageSize", 1000}});
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body["entries"].size(), 625u);
  EXPECT_FALSE(r.body.contains("nextPageToken"));
  EXPECT_LE(server_.log_entries_examined() - before, 5'000u);

  // 3. Read 50,000 entries through pages of 1000; each page costs about a page of work.
  before = server_.log_entries_examined();
  json req = {{"filter", fmt::format(R"(timestamp>="{}")",
                                     tools::format_rfc3339_nanos(kT0 + 950'000 * kMilli))},
              {"pageSize", 1000}};
  std::size_t total = 0;
  std::int64_t last = 0;
  int pages = 0;
  for (;;) {
    r = list(req);
    ASSERT_EQ(r.status, 200);
    for (const auto& e : r.body.value("entries", json::array())) {
      const std::int64_t t = *tools::parse_rfc3339_nanos(e["timestamp"].get<std::string>());
      ASSERT_GT(t, last);
      last = t;
      ++total;
    }
    ++pages;
    if (!r.body.contains("nextPageToken")) break;
    req["pageToken"] = r.body["nextPageToken"];
  }
  EXPECT_EQ(total, 50'000u);
  EXPECT_EQ(pages, 50);
  EXPECT_LE(server_.log_entries_examined() - before, 50'000u + 50u);

  // 4. Memory: the store stays compact. Sanitizer builds inflate every allocation, so the
  // bound is loose; an uninterned nlohmann::json per entry would need several GB.
  EXPECT_LT(store_kib_, 1'500'000) << "1M entries took " << store_kib_ / 1024 << " MiB";
}

}  // namespace
}  // namespace falcon::fake::testing
