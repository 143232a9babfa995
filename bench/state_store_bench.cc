// State store rates on both backends: a probe per transaction (the commit cost: SQLite's fsync
// with synchronous=FULL, PostgreSQL's WAL flush), a submission per transaction, a health-loop
// round of 100 probes per transaction (batching), 1, 4 and 8 threads each committing one probe
// per transaction on one store object (group commit: PostgreSQL flushes the WAL once for the
// commits that wait together; SQLite has one writer at a time), and reads: the latest probe per
// cluster over a filled history, one cluster's last hour, a page of submissions.
//
//   build/release/bench/state_store_bench [--benchmark_filter=...]
//
// SQLite runs on a file in $TMPDIR; PostgreSQL is a throwaway PostgreSQL 15 server (the tests'
// harness, tests/support/postgres_server.h) with its default durability (fsync on), on loopback.
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "falcon/state_store.h"
#include "support/postgres_server.h"
#include "util/time_format.h"

namespace {

using falcon::ProbeRecord;
using falcon::StateStore;
using falcon::StoreTime;

constexpr int kClusters = 100;
constexpr int kHistoryPerCluster = 1000;  // ~8 h at one probe every 30 s

struct Backends {
  std::filesystem::path dir;
  std::unique_ptr<falcon::testing::PostgresServer> pg;
  std::unique_ptr<StateStore> sqlite;
  std::unique_ptr<StateStore> postgres;

  Backends() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "falcon-bench-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir = tmpl;
    // Enough connections for the 8-thread case: no thread waits for the pool.
    const falcon::StateStoreOptions options{.max_connections = 8};
    sqlite = falcon::open_state_store("sqlite://" + (dir / "falcon.db").string(), options);
    pg = std::make_unique<falcon::testing::PostgresServer>(
        falcon::testing::PostgresServer::Options{.durable = true});
    postgres = falcon::open_state_store(pg->create_database("bench"), options);
  }
  ~Backends() {
    sqlite.reset();
    postgres.reset();
    pg.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

Backends& backends() {
  static Backends b;
  return b;
}

StateStore& store(const benchmark::State& state) {
  return state.range(0) == 0 ? *backends().sqlite : *backends().postgres;
}

const char* label(const benchmark::State& state) {
  return state.range(0) == 0 ? "sqlite" : "postgresql";
}

ProbeRecord probe(const std::string& cluster, std::int64_t ms) {
  ProbeRecord p;
  p.result.cluster = cluster;
  p.result.reachable = true;
  p.result.queue_depth = static_cast<int>(ms % 7);
  p.result.running_count = 3;
  p.result.probed_at = falcon::format_iso8601(StoreTime(std::chrono::milliseconds(ms)));
  p.backend = "xpk";
  p.duration_ms = 40;
  return p;
}

// One probe, one transaction.
void BM_InsertOneProbePerTransaction(benchmark::State& state) {
  StateStore& s = store(state);
  std::int64_t ms = 1776067200000;
  for (auto _ : state) {
    benchmark::DoNotOptimize(s.record_probes({probe("single", ms += 1000)}));
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(label(state));
}
BENCHMARK(BM_InsertOneProbePerTransaction)->Arg(0)->Arg(1)->UseRealTime();

// One submission, one transaction (the CLI's write per `falcon job submit`).
void BM_RecordSubmission(benchmark::State& state) {
  StateStore& s = store(state);
  std::int64_t n = 0;
  for (auto _ : state) {
    falcon::SubmissionRow row;
    row.handle.workload_name = "bench-" + std::to_string(++n);
    row.handle.cluster = "tpu-" + std::to_string(n % 10);
    row.handle.namespace_ = "default";
    row.handle.submitted_at =
        falcon::format_iso8601(StoreTime(std::chrono::milliseconds(1776067200000 + n * 1000)));
    row.accelerator_type = "v5litepod-8";
    row.device_class = "tpu";
    row.docker_image = "us-docker.pkg.dev/p/r/train:1";
    benchmark::DoNotOptimize(s.record_submission(row));
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(label(state));
}
BENCHMARK(BM_RecordSubmission)->Arg(0)->Arg(1)->UseRealTime();

// Several threads, one store object, one probe per transaction each: the aggregate commit rate.
void BM_ConcurrentWriters(benchmark::State& state) {
  StateStore& s = store(state);
  const std::string cluster = "writer-" + std::to_string(state.thread_index());
  std::int64_t ms = 1776067200000;
  for (auto _ : state) {
    benchmark::DoNotOptimize(s.record_probes({probe(cluster, ms += 1000)}));
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(label(state));
}
BENCHMARK(BM_ConcurrentWriters)->Arg(0)->Arg(1)->Threads(1)->Threads(4)->Threads(8)->UseRealTime();

// A health-loop round: 100 clusters' probes in one transaction.
void BM_InsertRoundOf100Probes(benchmark::State& state) {
  StateStore& s = store(state);
  std::int64_t ms = 1776067200000;
  std::vector<std::string> names;
  for (int c = 0; c < kClusters; ++c) names.push_back("round-" + std::to_string(c));
  for (auto _ : state) {
    std::vector<ProbeRecord> batch;
    ms += 30000;
    for (const auto& name : names) batch.push_back(probe(name, ms));
    benchmark::DoNotOptimize(s.record_probes(batch));
  }
  state.SetItemsProcessed(state.iterations() * kClusters);
  state.SetLabel(label(state));
}
BENCHMARK(BM_InsertRoundOf100Probes)->Arg(0)->Arg(1)->UseRealTime();

// 100 clusters with 1000 probes each, written once per backend.
void ensure_history(const benchmark::State& state) {
  static bool filled[2] = {false, false};
  if (filled[state.range(0)]) return;
  StateStore& s = store(state);
  std::int64_t ms = 1776067200000;
  for (int i = 0; i < kHistoryPerCluster; ++i) {
    std::vector<ProbeRecord> batch;
    ms += 30000;
    for (int c = 0; c < kClusters; ++c) batch.push_back(probe("hist-" + std::to_string(c), ms));
    s.record_probes(batch);
  }
  filled[state.range(0)] = true;
}

// Latest probe of each of 100 clusters, each with 1000 probes of history.
void BM_LatestProbePerCluster(benchmark::State& state) {
  StateStore& s = store(state);
  ensure_history(state);
  std::size_t rows = 0;
  for (auto _ : state) {
    auto latest = s.latest_probes();
    rows = latest.size();
    benchmark::DoNotOptimize(latest);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(std::string(label(state)) + ", " + std::to_string(rows) + " clusters");
}
BENCHMARK(BM_LatestProbePerCluster)->Arg(0)->Arg(1)->UseRealTime();

// One cluster's last hour (120 probes) out of its history.
void BM_ProbeHistoryOneHour(benchmark::State& state) {
  StateStore& s = store(state);
  ensure_history(state);
  const StoreTime end(std::chrono::milliseconds(1776067200000 + 30000LL * kHistoryPerCluster));
  std::size_t rows = 0;
  for (auto _ : state) {
    auto h = s.probe_history("hist-7", end - std::chrono::hours(1), end + std::chrono::seconds(1));
    rows = h.size();
    benchmark::DoNotOptimize(h);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(std::string(label(state)) + ", " + std::to_string(rows) + " rows");
}
BENCHMARK(BM_ProbeHistoryOneHour)->Arg(0)->Arg(1)->UseRealTime();

// The first page (100 rows, newest first) of one cluster's submissions, out of 10,000 over
// 10 clusters.
void BM_ListSubmissionsPage(benchmark::State& state) {
  StateStore& s = store(state);
  static bool filled[2] = {false, false};
  if (!filled[state.range(0)]) {
    for (int n = 0; n < 10000; ++n) {
      falcon::SubmissionRow row;
      row.handle.workload_name = "page-" + std::to_string(n);
      row.handle.cluster = "page-tpu-" + std::to_string(n % 10);
      row.handle.namespace_ = "default";
      row.handle.submitted_at =
          falcon::format_iso8601(StoreTime(std::chrono::milliseconds(1776067200000 + n * 1000)));
      s.record_submission(row);
    }
    filled[state.range(0)] = true;
  }
  falcon::SubmissionQuery query;
  query.cluster = "page-tpu-3";
  query.limit = 100;
  std::size_t rows = 0;
  for (auto _ : state) {
    auto page = s.list_submissions(query);
    rows = page.rows.size();
    benchmark::DoNotOptimize(page);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(std::string(label(state)) + ", " + std::to_string(rows) + " rows");
}
BENCHMARK(BM_ListSubmissionsPage)->Arg(0)->Arg(1)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
