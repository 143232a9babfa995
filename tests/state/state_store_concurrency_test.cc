// The store under concurrency and crashes, on both backends: threads with their own store
// objects, and child processes (this test binary run again in a child role, see child_main)
// racing for a lease, migrating one fresh database, or killed after or during a write.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <latch>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "falcon/errors.h"
#include "falcon/state_store.h"
#include "state/migrations.h"
#include "state/postgres_connection.h"
#include "state/sql_connection.h"
#include "state/sqlite_connection.h"
#include "state/state_url.h"
#include "state/store_fixture.h"
#include "util/time_format.h"

namespace falcon::testing {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

constexpr const char* kRoleEnv = "FALCON_STATE_TEST_CHILD";
constexpr const char* kUrlEnv = "FALCON_STATE_TEST_URL";
constexpr const char* kArgEnv = "FALCON_STATE_TEST_ARG";

std::unique_ptr<state::SqlConnection> raw_connection(const std::string& url) {
  const auto parsed = state::parse_state_url(url);
  if (parsed.backend == state::StateUrl::Backend::kPostgres) {
    return std::make_unique<state::PostgresConnection>(parsed.postgres_uri, 10s);
  }
  return std::make_unique<state::SqliteConnection>(parsed.sqlite_path, 10s);
}

const state::SqlDialect& dialect_of(const std::string& url) {
  return state::parse_state_url(url).backend == state::StateUrl::Backend::kPostgres
             ? state::postgres_dialect()
             : state::sqlite_dialect();
}

SubmissionRow submission(const std::string& workload, std::int64_t ms) {
  SubmissionRow r;
  r.handle = WorkloadHandle{.workload_name = workload,
                            .cluster = "tpu-a",
                            .namespace_ = "default",
                            .submitted_at = format_iso8601(at_ms(ms))};
  r.priority = "medium";
  return r;
}

void wait_for_go() {
  std::string line;
  std::getline(std::cin, line);
}

// Blocks until the parent closes our stdin (or kills us).
void hang() {
  std::string line;
  while (std::getline(std::cin, line)) {
  }
}

// The child roles. Output is line-based on stdout; the exit code says whether it worked.
int child_main(const std::string& role) {
  const std::string url = std::getenv(kUrlEnv) ? std::getenv(kUrlEnv) : "";
  const std::string arg = std::getenv(kArgEnv) ? std::getenv(kArgEnv) : "";
  try {
    if (role == "open") {
      std::cout << "ready" << std::endl;
      wait_for_go();
      auto store = open_state_store(url);
      std::cout << "opened " << store->schema_version() << std::endl;
      return 0;
    }
    if (role == "lease-race") {
      auto store = open_state_store(url);
      std::cout << "ready" << std::endl;
      wait_for_go();
      for (int i = 0; i < 40; ++i) {
        const auto lease = store->acquire_lease("race-" + std::to_string(i), arg, 60s, at_ms(0));
        std::cout << (lease ? "won " : "lost ") << i << std::endl;
      }
      return 0;
    }
    if (role == "write-then-hang") {
      auto store = open_state_store(url);
      for (int i = 0; i < 20; ++i) {
        const auto id = store->record_submission(submission("acked-" + std::to_string(i), i));
        std::cout << "acked " << i << " " << id << std::endl;
      }
      hang();
      return 0;
    }
    if (role == "hang-in-transaction") {
      open_state_store(url);  // the schema exists
      auto conn = raw_connection(url);
      conn->execute(dialect_of(url).begin_write);
      conn->query(
          "INSERT INTO submissions (cluster, workload, namespace, accelerator_type, device_class, "
          "submitted_at_ms, cluster_id, project, zone, docker_image, priority) VALUES ('tpu-a', "
          "'never-committed', 'default', '', '', 0, '', '', '', '', '')",
          {});
      std::cout << "in-transaction" << std::endl;
      hang();
      return 0;
    }
    std::cout << "unknown role " << role << std::endl;
    return 2;
  } catch (const std::exception& e) {
    std::cout << "error: " << e.what() << std::endl;
    return 1;
  }
}

// Before main: this binary started as a child runs its role and exits.
[[maybe_unused]] const bool kIsParent = [] {
  if (const char* role = std::getenv(kRoleEnv)) {
    const int rc = child_main(role);
    std::cout.flush();
    std::_Exit(rc);
  }
  return true;
}();

// This test binary, started again in a child role, with pipes on its stdin and stdout.
class Child {
 public:
  Child(const std::string& role, const std::string& url, const std::string& arg = "") {
    int in[2];
    int out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0)
      throw std::runtime_error("pipe");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
    env.push_back(std::string(kRoleEnv) + "=" + role);
    env.push_back(std::string(kUrlEnv) + "=" + url);
    env.push_back(std::string(kArgEnv) + "=" + arg);
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string self = "/proc/self/exe";
    char* argv[] = {self.data(), nullptr};
    const int rc = posix_spawn(&pid_, self.c_str(), &actions, nullptr, argv, envp.data());
    posix_spawn_file_actions_destroy(&actions);
    ::close(in[0]);
    ::close(out[1]);
    to_child_ = in[1];
    from_child_ = out[0];
    if (rc != 0) throw std::runtime_error("posix_spawn failed");
  }

  ~Child() {
    if (to_child_ >= 0) ::close(to_child_);
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(from_child_);
  }

  // The next line the child prints; "" when it closed its output. Waits at most 5 minutes
  // (a guard against a hung child, not a timing assumption).
  std::string read_line() {
    for (;;) {
      if (const auto nl = buffer_.find('\n'); nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      pollfd p{.fd = from_child_, .events = POLLIN, .revents = 0};
      if (::poll(&p, 1, 300000) <= 0) return "";
      char chunk[4096];
      const ssize_t n = ::read(from_child_, chunk, sizeof(chunk));
      if (n <= 0) return "";
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
  }

  void send(const std::string& line) {
    const std::string text = line + "\n";
    ASSERT_EQ(::write(to_child_, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  }

  // SIGKILL, then reap.
  void kill() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  // Closes its stdin and waits for its exit code.
  int wait() {
    ::close(to_child_);
    to_child_ = -1;
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
  std::string buffer_;
};

class StateStoreConcurrency : public StoreTest {
 protected:
  // A database no one has opened yet.
  std::string fresh_url() {
    if (is_postgres()) return shared_postgres_server().fresh_database();
    return "sqlite://" + (dir_.path() / ("fresh-" + std::to_string(++fresh_) + ".db")).string();
  }
  int fresh_ = 0;
};
FALCON_BOTH_BACKENDS(StateStoreConcurrency);

// --- Leases.

TEST_P(StateStoreConcurrency, ExactlyOneOfManyThreadsGetsEachLease) {
  constexpr int kThreads = 6;
  constexpr int kLeases = 30;
  std::vector<std::unique_ptr<StateStore>> stores;
  for (int t = 0; t < kThreads; ++t) stores.push_back(open());
  std::vector<std::vector<int>> won(kThreads);
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int i = 0; i < kLeases; ++i) {
        if (stores[t]->acquire_lease("lease-" + std::to_string(i), "holder-" + std::to_string(t),
                                     60s, at_ms(0))) {
          won[t].push_back(i);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  std::map<int, int> winners;
  for (const auto& w : won) {
    for (int i : w) ++winners[i];
  }
  ASSERT_EQ(winners.size(), static_cast<std::size_t>(kLeases));
  for (const auto& [lease, count] : winners) EXPECT_EQ(count, 1) << "lease-" << lease;
  for (int i = 0; i < kLeases; ++i) {
    EXPECT_EQ(store_->get_lease("lease-" + std::to_string(i))->token, 1);
  }
}

TEST_P(StateStoreConcurrency, ExactlyOneOfTwoProcessesGetsEachLease) {
  Child a("lease-race", url_, "process-a");
  Child b("lease-race", url_, "process-b");
  ASSERT_EQ(a.read_line(), "ready");
  ASSERT_EQ(b.read_line(), "ready");
  a.send("go");
  b.send("go");
  std::map<int, int> winners;
  for (Child* c : {&a, &b}) {
    for (int i = 0; i < 40; ++i) {
      const std::string line = c->read_line();
      ASSERT_TRUE(line.rfind("won ", 0) == 0 || line.rfind("lost ", 0) == 0) << line;
      if (line.rfind("won ", 0) == 0) ++winners[std::stoi(line.substr(4))];
    }
    EXPECT_EQ(c->wait(), 0);
  }
  ASSERT_EQ(winners.size(), 40u);
  for (const auto& [lease, count] : winners) EXPECT_EQ(count, 1) << "race-" << lease;
}

// --- Writers.

TEST_P(StateStoreConcurrency, ConcurrentWritersLoseNothing) {
  constexpr int kThreads = 4;
  constexpr int kBatches = 25;
  auto other = open();
  std::latch start(kThreads);
  std::vector<std::vector<std::int64_t>> ids(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      StateStore& store = t % 2 == 0 ? *store_ : *other;
      start.arrive_and_wait();
      for (int b = 0; b < kBatches; ++b) {
        std::vector<ProbeRecord> batch;
        // Clusters in opposite orders in alternate threads: the store must not deadlock.
        for (int c = 0; c < 4; ++c) {
          const int cluster = t % 2 == 0 ? c : 3 - c;
          ProbeRecord p;
          p.result = ClusterProbeResult{.cluster = fmt::format("c{}", cluster),
                                        .reachable = true,
                                        .queue_depth = t,
                                        .running_count = b,
                                        .probed_at = format_iso8601(at_ms(b * 1000 + t))};
          p.backend = "xpk";
          batch.push_back(p);
        }
        for (auto id : store.record_probes(batch)) ids[t].push_back(id);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<std::int64_t> unique;
  for (const auto& v : ids) unique.insert(v.begin(), v.end());
  EXPECT_EQ(unique.size(), static_cast<std::size_t>(kThreads * kBatches * 4));
  for (int c = 0; c < 4; ++c) {
    const std::string cluster = "c" + std::to_string(c);
    EXPECT_EQ(store_->probe_history(cluster, at_ms(0), at_ms(1000000)).size(),
              static_cast<std::size_t>(kThreads * kBatches));
    const auto latest = store_->latest_probe(cluster);
    ASSERT_TRUE(latest);
    EXPECT_EQ(latest->result.probed_at, format_iso8601(at_ms((kBatches - 1) * 1000 + 3)));
  }
}

// Group commit: decisions recorded at once by many threads share transactions; each caller
// gets its own row's id, and every acknowledged decision reads back whole.
TEST_P(StateStoreConcurrency, ConcurrentDecisionsAreAllStoredWithTheirOwnIds) {
  constexpr int kThreads = 8;
  constexpr int kEach = 40;
  std::latch start(kThreads);
  std::vector<std::vector<std::pair<std::int64_t, ClusterSelection>>> stored(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int i = 0; i < kEach; ++i) {
        ClusterSelection s;
        s.selected_cluster = "c" + std::to_string(t);
        s.accelerator = "tpu-v5p-128";
        s.candidates = {s.selected_cluster};
        s.probe_results = {ClusterProbeResult{.cluster = s.selected_cluster,
                                              .reachable = true,
                                              .queue_depth = i,
                                              .running_count = t,
                                              .probed_at = format_iso8601(at_ms(i))}};
        s.reason = "thread " + std::to_string(t) + " decision " + std::to_string(i);
        s.decided_at = format_iso8601(at_ms(t * 1000 + i));
        stored[t].emplace_back(store_->record_selection(s), s);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<std::int64_t> ids;
  for (const auto& v : stored) {
    for (const auto& [id, s] : v) {
      ids.insert(id);
      const auto back = store_->get_selection(id);
      ASSERT_TRUE(back) << id;
      ClusterSelection expected = s;
      expected.selection_id = id;
      EXPECT_EQ(back->selection, expected) << s.reason;
    }
  }
  EXPECT_EQ(ids.size(), static_cast<std::size_t>(kThreads * kEach));
}

// Repeats and fresh decisions share the group commit; a repeat of a decision that is not there
// fails its own caller only, whatever batch it lands in.
TEST_P(StateStoreConcurrency, ConcurrentRepeatsShareBatchesAndABadOneFailsAlone) {
  ClusterSelection base;
  base.selected_cluster = "tpu-a";
  base.accelerator = "v4-64";
  base.reason = "the base";
  base.decided_at = format_iso8601(at_ms(0));
  const std::int64_t base_id = store_->record_selection(base);
  constexpr int kThreads = 8;
  constexpr int kEach = 40;
  std::latch start(kThreads);
  std::vector<std::vector<std::int64_t>> repeats(kThreads);
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int i = 0; i < kEach; ++i) {
        const auto when = format_iso8601(at_ms(1 + t * kEach + i));
        if (i % 10 == 9) {
          try {
            store_->record_repeated_selection(base_id + 1000000, when);
          } catch (const std::invalid_argument&) {
            ++refused;
          }
        } else if (i % 10 == 5) {
          ClusterSelection s = base;
          s.decided_at = when;
          store_->record_selection(s);
        } else {
          repeats[t].push_back(store_->record_repeated_selection(base_id, when));
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(refused, kThreads * kEach / 10);
  std::set<std::int64_t> ids;
  for (const auto& v : repeats) {
    for (const std::int64_t id : v) {
      ids.insert(id);
      const auto back = store_->get_selection(id);
      ASSERT_TRUE(back) << id;
      EXPECT_EQ(back->same_as, base_id);
      EXPECT_EQ(back->selection.reason, "the base");
    }
  }
  EXPECT_EQ(ids.size(), static_cast<std::size_t>(kThreads * kEach * 8 / 10));
  EXPECT_EQ(store_->list_selections(1000).size(),
            static_cast<std::size_t>(1 + kThreads * kEach * 9 / 10));
}

// A batch whose transaction fails fails every caller in it, and nothing of it is stored; every
// caller answered with an id has its decision stored.
TEST_P(StateStoreConcurrency, AFailedGroupCommitFailsEachOfItsCallersAndStoresNone) {
  auto conn = raw_connection(url_);
  if (is_postgres()) {
    conn->execute(
        "CREATE FUNCTION refuse_boom() RETURNS trigger AS $$ BEGIN "
        "IF NEW.accelerator = 'boom' THEN RAISE EXCEPTION 'refused by the test'; END IF; "
        "RETURN NEW; END $$ LANGUAGE plpgsql");
    conn->execute(
        "CREATE TRIGGER refuse_boom BEFORE INSERT ON selections FOR EACH ROW "
        "EXECUTE FUNCTION refuse_boom()");
  } else {
    conn->execute(
        "CREATE TRIGGER refuse_boom BEFORE INSERT ON selections WHEN NEW.accelerator = 'boom' "
        "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END");
  }
  conn.reset();
  constexpr int kThreads = 8;
  constexpr int kEach = 30;
  std::latch start(kThreads);
  struct Outcome {
    std::string reason;
    bool boom = false;
    std::int64_t id = 0;
    std::string error;
  };
  std::vector<std::vector<Outcome>> outcomes(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int i = 0; i < kEach; ++i) {
        ClusterSelection s;
        // Assigned as std::string: GCC 12 at -O2 warns falsely (-Wrestrict) on assigning a
        // short literal to a fresh member.
        s.accelerator = std::string((i + t) % 5 == 0 ? "boom" : "tpu-v5p-128");
        s.selected_cluster = std::string("c");
        s.reason = fmt::format("{}-{}", t, i);
        s.decided_at = format_iso8601(at_ms(i));
        Outcome o{s.reason, s.accelerator == "boom"};
        try {
          o.id = store_->record_selection(s);
        } catch (const StateStoreError& e) {
          o.error = e.what();
        }
        outcomes[t].push_back(o);
      }
    });
  }
  for (auto& th : threads) th.join();
  int failed = 0;
  std::set<std::string> stored_reasons;
  for (const auto& r : store_->list_selections(1000)) stored_reasons.insert(r.selection.reason);
  for (const auto& v : outcomes) {
    for (const Outcome& o : v) {
      if (o.boom) {
        EXPECT_EQ(o.id, 0) << o.reason;  // its own row always fails its batch
      }
      if (o.id != 0) {
        EXPECT_TRUE(stored_reasons.contains(o.reason)) << o.reason;
        EXPECT_EQ(store_->get_selection(o.id)->selection.reason, o.reason);
      } else {
        ++failed;
        EXPECT_THAT(o.error, HasSubstr("record_selection")) << o.reason;
        EXPECT_THAT(o.error, HasSubstr("refused by the test")) << o.reason;
        EXPECT_FALSE(stored_reasons.contains(o.reason)) << o.reason;
      }
    }
  }
  EXPECT_GE(failed, kThreads * kEach / 5);
  EXPECT_EQ(stored_reasons.size(), static_cast<std::size_t>(kThreads * kEach - failed));
}

TEST_P(StateStoreConcurrency, BreakerCompareAndSetCountsEveryFailureFromManyWriters) {
  constexpr int kThreads = 4;
  constexpr int kFailuresEach = 25;
  auto other = open();
  std::latch start(kThreads);
  std::atomic<int> conflicts{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      StateStore& store = t % 2 == 0 ? *store_ : *other;
      start.arrive_and_wait();
      for (int i = 0; i < kFailuresEach; ++i) {
        for (;;) {
          BreakerState s = store.get_breaker("tpu-a").value_or(BreakerState{.key = "tpu-a"});
          ++s.consecutive_failures;
          s.updated_at = at_ms(i);
          if (store.compare_and_set_breaker(s)) break;
          ++conflicts;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  const auto final_state = store_->get_breaker("tpu-a");
  ASSERT_TRUE(final_state);
  EXPECT_EQ(final_state->consecutive_failures, kThreads * kFailuresEach);
  EXPECT_EQ(final_state->version, kThreads * kFailuresEach);
  std::cout << "compare-and-set conflicts retried: " << conflicts << "\n";
}

TEST_P(StateStoreConcurrency, AChangeSeenByManyReplicasIsRecordedOnce) {
  constexpr int kReplicas = 4;
  constexpr int kWorkloads = 10;
  auto other = open();
  std::latch start(kReplicas);
  std::vector<std::thread> threads;
  for (int t = 0; t < kReplicas; ++t) {
    threads.emplace_back([&, t] {
      StateStore& store = t % 2 == 0 ? *store_ : *other;
      start.arrive_and_wait();
      for (int w = 0; w < kWorkloads; ++w) {
        int ms = 0;
        for (const char* state : {"QUEUED", "RUNNING", "COMPLETED"}) {
          store.record_workload_event({.cluster = "tpu-a",
                                       .workload = fmt::format("w{}", w),
                                       .state = state,
                                       .observed_at = at_ms(ms += 1000),
                                       .detail = fmt::format("replica {}", t)});
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int w = 0; w < kWorkloads; ++w) {
    const auto events = store_->list_workload_events("tpu-a", "w" + std::to_string(w));
    ASSERT_EQ(events.size(), 3u) << "w" << w;
    EXPECT_EQ(events[0].state, "QUEUED");
    EXPECT_EQ(events[1].state, "RUNNING");
    EXPECT_EQ(events[2].state, "COMPLETED");
  }
}

TEST_P(StateStoreConcurrency, ConcurrentImportsOfOneFileImportOnce) {
  std::string text;
  for (int i = 0; i < 50; ++i) {
    text += R"({"v":1,"cluster":"tpu-a","workload":"w)" + std::to_string(i) +
            R"(","namespace":"default","submitted_at":"2026-04-13T08:00:00.000Z"})" + "\n";
  }
  const auto file = dir_.write("submissions.jsonl", text);
  auto other = open();
  SubmissionsImportResult r1;
  SubmissionsImportResult r2;
  std::latch start(2);
  std::thread t1([&] {
    start.arrive_and_wait();
    r1 = store_->import_submissions_jsonl(file);
  });
  std::thread t2([&] {
    start.arrive_and_wait();
    r2 = other->import_submissions_jsonl(file);
  });
  t1.join();
  t2.join();
  EXPECT_NE(r1.already_imported, r2.already_imported);
  EXPECT_EQ(r1.imported + r2.imported, 50);
  EXPECT_EQ(store_->list_submissions({.limit = 1000}).rows.size(), 50u);
}

// --- Migrations.

TEST_P(StateStoreConcurrency, ThreadsOpeningAFreshDatabaseAtOnceMigrateItOnce) {
  for (int round = 0; round < 3; ++round) {
    const std::string url = fresh_url();
    constexpr int kOpeners = 4;
    std::latch start(kOpeners);
    std::vector<std::string> errors(kOpeners);
    std::vector<int> versions(kOpeners);
    std::vector<std::thread> threads;
    for (int t = 0; t < kOpeners; ++t) {
      threads.emplace_back([&, t] {
        start.arrive_and_wait();
        try {
          versions[t] = open_state_store(url)->schema_version();
        } catch (const std::exception& e) {
          errors[t] = e.what();
        }
      });
    }
    for (auto& th : threads) th.join();
    for (int t = 0; t < kOpeners; ++t) {
      EXPECT_EQ(errors[t], "") << "opener " << t;
      EXPECT_EQ(versions[t], kStateSchemaVersion);
    }
    auto conn = raw_connection(url);
    EXPECT_EQ(conn->query("SELECT count(*) FROM schema_migrations", {}).at(0).int64(0),
              kStateSchemaVersion);
  }
}

TEST_P(StateStoreConcurrency, ProcessesOpeningAFreshDatabaseAtOnceMigrateItOnce) {
  const std::string url = fresh_url();
  std::vector<std::unique_ptr<Child>> children;
  for (int i = 0; i < 3; ++i) children.push_back(std::make_unique<Child>("open", url));
  for (auto& c : children) ASSERT_EQ(c->read_line(), "ready");
  for (auto& c : children) c->send("go");
  for (auto& c : children) {
    EXPECT_EQ(c->read_line(), "opened " + std::to_string(kStateSchemaVersion));
    EXPECT_EQ(c->wait(), 0);
  }
  auto conn = raw_connection(url);
  EXPECT_EQ(conn->query("SELECT count(*) FROM schema_migrations", {}).at(0).int64(0),
            kStateSchemaVersion);
}

// A database as a falcon of schema version `version` left it: its migrations applied and
// recorded, nothing else. The connection to write its rows with.
std::unique_ptr<state::SqlConnection> old_database(const std::string& url, int version) {
  auto conn = raw_connection(url);
  const auto& dialect = dialect_of(url);
  conn->execute(state::render_migration(
      "CREATE TABLE schema_migrations (version {int} PRIMARY KEY, name TEXT NOT NULL, "
      "applied_at_ms {int} NOT NULL)",
      dialect));
  for (int v = 1; v <= version; ++v) {
    conn->execute(state::render_migration(state::migrations().at(v - 1).sql, dialect));
    conn->query("INSERT INTO schema_migrations (version, name, applied_at_ms) VALUES ($1, 'v', 0)",
                {std::int64_t{v}});
  }
  return conn;
}

// Schema 6: a managed workload's recovery phase moves from its detail JSON to a typed column, so
// an upgrade in the middle of a recovery carries on where it was.
TEST_P(StateStoreConcurrency, AVersionFiveDatabaseKeepsARecoveryPhaseInItsNewColumn) {
  const std::string url = fresh_url();
  {
    auto conn = old_database(url, 5);
    for (const auto& [name, detail] :
         {std::pair{"mid-recovery", R"({"phase":"deciding","incident":"mid-recovery-1"})"},
          std::pair{"quiet", R"({"incidents":0})"}}) {
      conn->query(
          "INSERT INTO managed_workloads (name, spec_json, max_recoveries, stable_after_ms, "
          "recover_on_failure, incarnation, cluster, state, attempts, created_at_ms, "
          "updated_at_ms, detail_json) VALUES ($1, $2, 3, 0, 0, $1, 'tpu-a', $3, 1, 0, 0, $4)",
          {std::string(name),
           fmt::format(
               R"({{"name":"{}","docker_image":"i","command":[],"accelerator_type":"v4-8"}})",
               name),
           std::string(name == std::string("quiet") ? "running" : "recovering"),
           std::string(detail)});
    }
  }
  auto store = open_state_store(url);
  EXPECT_EQ(store->schema_version(), kStateSchemaVersion);
  const auto mid = store->get_managed("mid-recovery");
  ASSERT_TRUE(mid);
  EXPECT_EQ(mid->state, ManagedState::kRecovering);
  EXPECT_EQ(mid->phase, RecoveryPhase::kDeciding);
  EXPECT_EQ(store->get_managed("quiet")->phase, RecoveryPhase::kNone);
  // A state this falcon does not know (a newer one wrote it) is an error naming it.
  raw_connection(url)->query("UPDATE managed_workloads SET state = 'hibernating' WHERE name = $1",
                             {std::string("quiet")});
  try {
    store->get_managed("quiet");
    ADD_FAILURE() << "expected StateStoreError";
  } catch (const StateStoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'hibernating'"));
  }
}

TEST_P(StateStoreConcurrency, AVersionOneDatabaseIsMigratedToTheLatestKeepingItsRows) {
  const std::string url = fresh_url();
  {
    // A database as a falcon of schema version 1 left it, with a recovery and a lease.
    auto conn = old_database(url, 1);
    conn->query(
        "INSERT INTO recoveries (incident_id, workload, cluster, attempts, classification, "
        "outcome, detail_json) VALUES ('old-1', 'train', 'tpu-a', 1, 'infrastructure', 'open', "
        "'{}')",
        {});
    conn->query(
        "INSERT INTO leases (name, holder, token, acquired_at_ms, expires_at_ms) VALUES "
        "('supervisor', 'old-replica', 3, 0, 1000)",
        {});
    conn->query(
        "INSERT INTO selections (accelerator, selected_cluster, decided_at_ms, selection_json) "
        "VALUES ('v4-64', 'tpu-a', 0, '{\"selected_cluster\":\"tpu-a\",\"accelerator\":"
        "\"v4-64\",\"candidates\":[],\"probe_results\":[],\"reason\":\"old\","
        "\"decided_at\":\"1970-01-01T00:00:00.000Z\"}')",
        {});
  }
  auto store = open_state_store(url);
  EXPECT_EQ(store->schema_version(), kStateSchemaVersion);
  const auto old = store->get_recovery("old-1");
  ASSERT_TRUE(old);
  EXPECT_EQ(old->cluster, "tpu-a");
  EXPECT_EQ(old->to_cluster, "");
  EXPECT_EQ(old->replacement, "");
  EXPECT_EQ(old->cause, "");
  const auto lease = store->get_lease("supervisor");
  ASSERT_TRUE(lease);
  EXPECT_EQ(lease->token, 3);
  EXPECT_EQ(lease->heartbeat_at, StoreTime{});
  // The new table is there and usable.
  EXPECT_TRUE(store->list_managed(10).empty());
  // A decision of version 1 reads back as made afresh, and can be repeated (version 3).
  const auto decisions = store->list_selections(10);
  ASSERT_EQ(decisions.size(), 1u);
  EXPECT_EQ(decisions[0].same_as, 0);
  EXPECT_EQ(decisions[0].selection.reason, "old");
  const auto again = store->record_repeated_selection(decisions[0].id, "1970-01-01T00:00:01.000Z");
  EXPECT_EQ(store->get_selection(again)->same_as, decisions[0].id);
  // Summaries read the old row's plain JSON (its version 4 columns are NULL), for it and for
  // its new repeat; a new decision is stored packed, and both kinds list together.
  ClusterSelection fresh = decisions[0].selection;
  fresh.reason = "new";
  fresh.policy = "score";
  fresh.decided_at = "1970-01-01T00:00:02.000Z";
  const auto made = store->record_selection(fresh);
  const auto summaries = store->list_selection_summaries(10);
  ASSERT_EQ(summaries.size(), 3u);
  EXPECT_EQ(summaries[0].id, made);
  EXPECT_EQ(summaries[0].reason, "new");
  EXPECT_EQ(summaries[0].policy, "score");
  EXPECT_EQ(summaries[0].decided_at, "1970-01-01T00:00:02.000Z");
  EXPECT_EQ(summaries[1].id, again);
  EXPECT_EQ(summaries[1].reason, "old");
  EXPECT_EQ(summaries[1].decided_at, "1970-01-01T00:00:01.000Z");
  EXPECT_EQ(summaries[2].reason, "old");
  EXPECT_EQ(summaries[2].policy, "");
  EXPECT_EQ(summaries[2].decided_at, "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(store->get_selection(made)->selection.reason, "new");
  auto conn = raw_connection(url);
  EXPECT_EQ(conn->query("SELECT max(version) FROM schema_migrations", {}).at(0).int64(0),
            kStateSchemaVersion);
  const auto stored = conn->query("SELECT selection_json FROM selections WHERE id = $1", {made});
  EXPECT_EQ(stored.at(0).text(0).substr(0, 3), "z1:");
}

TEST_P(StateStoreConcurrency, ASchemaNewerThanThisBinaryIsRefusedNamingBothVersions) {
  store_->record_submission(submission("kept", 0));
  const int future = kStateSchemaVersion + 1;
  raw_connection(url_)->query(
      "INSERT INTO schema_migrations (version, name, applied_at_ms) VALUES ($1, 'future', 0)",
      {std::int64_t{future}});
  try {
    open();
    FAIL() << "a newer schema was accepted";
  } catch (const StateStoreError& e) {
    EXPECT_EQ(e.backend(), GetParam());
    EXPECT_EQ(e.operation(), "open");
    EXPECT_THAT(e.what(), HasSubstr("schema is version " + std::to_string(future)));
    EXPECT_THAT(e.what(), HasSubstr("knows versions up to " + std::to_string(kStateSchemaVersion)));
  }
  // Refusing changed nothing.
  auto conn = raw_connection(url_);
  EXPECT_EQ(conn->query("SELECT max(version) FROM schema_migrations", {}).at(0).int64(0), future);
  EXPECT_TRUE(store_->find_submission("tpu-a", "kept"));
}

// --- Crashes.

TEST_P(StateStoreConcurrency, EveryAcknowledgedWriteSurvivesTheWriterBeingKilled) {
  Child child("write-then-hang", url_);
  std::map<std::string, std::int64_t> acked;
  for (int i = 0; i < 20; ++i) {
    const std::string line = child.read_line();
    ASSERT_EQ(line.rfind("acked ", 0), 0u) << line;
    std::istringstream in(line.substr(6));
    int n = 0;
    std::int64_t id = 0;
    in >> n >> id;
    acked["acked-" + std::to_string(n)] = id;
  }
  child.kill();
  auto reopened = open();
  for (const auto& [name, id] : acked) {
    const auto found = reopened->find_submission("tpu-a", name);
    ASSERT_TRUE(found) << name;
    EXPECT_EQ(found->id, id);
  }
}

TEST_P(StateStoreConcurrency, AKilledWritersOpenTransactionIsUndoneAndReleasesTheDatabase) {
  Child child("hang-in-transaction", url_);
  ASSERT_EQ(child.read_line(), "in-transaction");
  if (!is_postgres()) {
    // SQLite has one writer at a time: while the child holds it, a writer gives up after its
    // busy timeout with an error that names the backend, operation and SQLite's message.
    StateStoreOptions impatient;
    impatient.busy_timeout = 50ms;
    auto blocked = open_state_store(url_, impatient);
    try {
      blocked->record_submission(submission("blocked", 0));
      FAIL() << "wrote while another process held the write lock";
    } catch (const StateStoreError& e) {
      EXPECT_EQ(e.backend(), "sqlite");
      EXPECT_EQ(e.operation(), "record_submission");
      EXPECT_THAT(e.db_message(), HasSubstr("locked"));
    }
  }
  child.kill();
  auto reopened = open();
  EXPECT_FALSE(reopened->find_submission("tpu-a", "never-committed"));
  reopened->record_submission(submission("after", 0));
  EXPECT_TRUE(reopened->find_submission("tpu-a", "after"));
}

TEST(PostgresStateStore, AfterLosingItsConnectionTheStoreFailsOnceThenReconnects) {
  if (postgres_tests_opted_out()) GTEST_SKIP() << "FALCON_SKIP_POSTGRES_TESTS=1";
  const std::string url = shared_postgres_server().fresh_database();
  auto store = open_state_store(url);
  store->record_probes(
      {ProbeRecord{.result = {.cluster = "c", .probed_at = format_iso8601(at_ms(0))}}});
  const std::string database = url.substr(url.rfind('/') + 1);
  shared_postgres_server().psql(
      "postgres",
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '" + database + "'");
  try {
    store->latest_probes();
    FAIL() << "a terminated connection answered";
  } catch (const StateStoreError& e) {
    EXPECT_EQ(e.backend(), "postgresql");
    EXPECT_EQ(e.operation(), "latest_probes");
    EXPECT_EQ(e.location(), url);
  }
  EXPECT_EQ(store->latest_probes().size(), 1u);
}

}  // namespace
}  // namespace falcon::testing
