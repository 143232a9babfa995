// The shared Logging read quota end to end, through the public CloudLogRetriever, against the
// local server enforcing Cloud Logging's per-project read quota (a sliding 60 s window):
// processes that share a quota directory together stay under the quota, and a 429 the server
// sends anyway (its quota lower than gcp.logging_reads_per_minute) is waited out with a notice.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <thread>

#include <fmt/format.h>

#include "falcon/errors.h"
#include "falcon/log_retriever.h"
#include "logs/gke_log_env.h"
#include "support/temp_dir.h"

namespace falcon {
namespace {

using falcon::testing::FakeClock;
using falcon::testing::GkePlace;
using falcon::testing::LogServerEnv;
using falcon::testing::TempDir;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;

// Time running kScale times faster than real time, the same in every process: both clocks are
// derived from CLOCK_MONOTONIC (system-wide) and anchors taken before fork(). So the server's
// 60-second window and the limiters' shared bucket (steady time) agree across processes, and a
// minute of reading takes 12 real seconds. (Faster, and the reads of an ASan build would be paced
// by the server's speed rather than by the limiters, and would not press the quota.)
class ScaledClock final : public Clock {
 public:
  static constexpr int kScale = 5;
  ScaledClock()
      : wall_start_(std::chrono::system_clock::now()),
        steady_start_(std::chrono::steady_clock::now()) {}
  std::chrono::system_clock::time_point now() const override {
    return wall_start_ + std::chrono::duration_cast<std::chrono::system_clock::duration>(elapsed());
  }
  std::chrono::steady_clock::time_point steady_now() const override {
    return steady_start_ + elapsed();
  }
  void sleep_for(nanoseconds d) const override { std::this_thread::sleep_for(d / kScale); }

 private:
  nanoseconds elapsed() const {
    return (std::chrono::steady_clock::now() - steady_start_) * kScale;
  }
  std::chrono::system_clock::time_point wall_start_;
  std::chrono::steady_clock::time_point steady_start_;
};

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

ClusterConfig cluster_of(const GkePlace& place) { return LogServerEnv::cluster(place); }

// Public options pointing at `server` with a fixed token in `token_file`.
LogRetrieverOptions retriever_options(const std::string& url, const std::string& token_file,
                                      int reads_per_minute, std::shared_ptr<Clock> clock) {
  LogRetrieverOptions o;
  o.http = make_curl_http_client();
  o.clock = std::move(clock);
  o.settings.logging_endpoint = url;
  o.settings.storage_endpoint = url;
  o.settings.token_endpoint = url + "/token";
  o.settings.metadata_host = "127.0.0.1:1";
  o.settings.access_token_file = token_file;
  o.settings.logging_reads_per_minute = reads_per_minute;
  return o;
}

// One pod log of `lines` lines (rank = worker, slice 0), an hour before `now`.
void write_rank(fake::GcpServer& server, const GkePlace& place, int rank, int lines,
                std::chrono::system_clock::time_point now) {
  const std::int64_t start =
      std::chrono::duration_cast<nanoseconds>((now - std::chrono::hours(1)).time_since_epoch())
          .count();
  std::vector<fake::LogLine> out;
  for (int i = 0; i < lines; ++i) {
    out.push_back({start + i * 1'000'000LL, fmt::format("rank {} line {}\n", rank, i)});
  }
  nlohmann::json shared = testing::gke_entry(place, {.slice = 0, .worker = rank});
  shared.erase("timestamp");
  shared.erase("textPayload");
  shared.erase("insertId");
  server.write_text_entries(shared, std::move(out));
}

// Three processes read a rank each of one project's logs at once, each with
// gcp.logging_reads_per_minute 100 and the same quota directory, from a server whose quota is
// 120 reads a minute. Partial pages (a small scan budget) make every read many requests, so that
// together they read more than the quota allows in a minute (without sharing, each would start
// with a burst of its own and read at 100 a minute: 300 together, and meet 429s). The server
// refuses none of them and every process gets all its lines.
TEST(SharedReadQuota, ProcessesSharingTheQuotaDirectoryStayUnderTheServersQuota) {
  constexpr int kProcesses = 3;
  constexpr int kLines = 450;
  constexpr int kServerQuota = 120;
  constexpr int kClientRate = 100;
  TempDir dir;
  const std::filesystem::path quota_dir = dir.path() / "quota";
  auto clock = std::make_shared<ScaledClock>();
  GkePlace place;

  // The children are forked before the server's threads exist; each learns the URL from a pipe.
  std::vector<pid_t> children;
  std::vector<int> pipes;
  for (int p = 0; p < kProcesses; ++p) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[1]);
      char url[256] = {};
      const ssize_t n = ::read(fds[0], url, sizeof(url) - 1);
      if (n <= 0) ::_exit(3);
      const std::filesystem::path out = dir.path() / fmt::format("rank-{}", p);
      try {
        std::string notices;
        LogRetrieverOptions o =
            retriever_options(url, (dir.path() / "token").string(), kClientRate, clock);
        o.quota_dir = quota_dir.string();
        o.on_wait = [&notices](const LogWaitNotice& notice) {
          notices += fmt::format("{} {}\n", static_cast<int>(notice.reason), notice.message);
        };
        CloudLogRetriever retriever(std::move(o));
        LogQueryOptions query;
        query.not_before = "2000-01-01T00:00:00Z";
        std::string text;
        for (const std::string& line : retriever.stream_log(cluster_of(place), place.workload,
                                                            place.namespace_, p, {}, query)) {
          text += line + "\n";
        }
        write_file(out, text);
        write_file(out.string() + ".notices", notices);
      } catch (const std::exception& e) {
        write_file(out.string() + ".error", e.what());
        ::_exit(2);
      }
      ::_exit(0);
    }
    ::close(fds[0]);
    children.push_back(pid);
    pipes.push_back(fds[1]);
  }

  fake::GcpServerOptions options;
  options.clock = clock;
  options.logging_reads_per_minute = kServerQuota;
  options.list_scan_budget = 30;
  fake::GcpServer server(options);
  server.start();
  write_file(dir.path() / "token", server.valid_token());
  for (int p = 0; p < kProcesses; ++p) write_rank(server, place, p, kLines, clock->now());
  const std::string url = server.base_url();
  for (const int fd : pipes) {
    ASSERT_EQ(::write(fd, url.data(), url.size()), static_cast<ssize_t>(url.size()));
    ::close(fd);
  }
  for (int p = 0; p < kProcesses; ++p) {
    int status = 0;
    ASSERT_EQ(::waitpid(children[static_cast<std::size_t>(p)], &status, 0),
              children[static_cast<std::size_t>(p)]);
    const std::filesystem::path out = dir.path() / fmt::format("rank-{}", p);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "rank " << p << ": " << read_file(out.string() + ".error");
    std::string expected;
    for (int i = 0; i < kLines; ++i) expected += fmt::format("rank {} line {}\n", p, i);
    EXPECT_EQ(read_file(out), expected) << "rank " << p;
    // Waits for the shared limiter are the ordinary pace; no 429 was waited out.
    EXPECT_THAT(read_file(out.string() + ".notices"), Not(HasSubstr("is spent (HTTP 429")));
  }
  const auto counts = server.request_counts();
  const std::int64_t reads = counts.count("logging.list") ? counts.at("logging.list") : 0;
  // More reads than the quota allows in a minute: limiters of their own would have sent them
  // at 300 a minute and met 429s.
  EXPECT_GT(reads, kServerQuota) << "the reads must press the quota for the test to mean anything";
  EXPECT_EQ(server.logging_quota_rejections(), 0) << reads << " reads";
}

// The server's quota (20 a minute) is below the client's setting (120): the server sends 429s,
// which the read waits out (RetryInfo, on the fake clock the server shares) and tells through
// on_wait as the CLI prints it on stderr, and then returns every line.
TEST(SharedReadQuota, A429FromTheServerIsWaitedOutWithANotice) {
  LogServerEnv env(fake::GcpServerOptions{.list_scan_budget = 50, .logging_reads_per_minute = 20});
  TempDir dir;
  GkePlace place;
  constexpr int kLines = 2000;  // 40 partial pages
  write_rank(env.server(), place, 0, kLines, env.clock().now());
  const std::string token_file = dir.write("token", env.server().valid_token()).string();
  LogRetrieverOptions o =
      retriever_options(env.server().base_url(), token_file, 120, env.clock_ptr());
  o.quota_dir = (dir.path() / "quota").string();
  std::vector<LogWaitNotice> notices;
  o.on_wait = [&notices](const LogWaitNotice& n) { notices.push_back(n); };
  CloudLogRetriever retriever(std::move(o));
  LogQueryOptions query;
  query.not_before = "2000-01-01T00:00:00Z";
  std::vector<std::string> lines;
  for (const std::string& line :
       retriever.stream_log(cluster_of(place), place.workload, place.namespace_, 0, {}, query)) {
    lines.push_back(line);
  }
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(kLines));
  EXPECT_EQ(lines.back(), fmt::format("rank 0 line {}", kLines - 1));

  const std::int64_t refused = env.server().logging_quota_rejections();
  ASSERT_GT(refused, 0);
  std::vector<LogWaitNotice> quota_notices;
  for (const auto& n : notices) {
    if (n.reason == LogWaitNotice::Reason::kQuotaExceeded) quota_notices.push_back(n);
  }
  ASSERT_EQ(static_cast<std::int64_t>(quota_notices.size()), refused);
  const LogWaitNotice& first = quota_notices.front();
  EXPECT_EQ(first.project, place.project);
  EXPECT_GE(first.wait, seconds(1));
  EXPECT_THAT(first.message,
              HasSubstr(fmt::format("the Cloud Logging read quota of project {} is spent (HTTP "
                                    "429 RESOURCE_EXHAUSTED), by falcon or other readers of the "
                                    "project; waiting ",
                                    place.project)));
  EXPECT_THAT(first.message, HasSubstr("before reading again"));
  EXPECT_THAT(first.message, HasSubstr("gives up in"));
}

}  // namespace
}  // namespace falcon
