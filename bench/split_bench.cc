// The log export's splitting (logs::RankSplitter, issue 28): staged NDJSON objects, as entries:copy
// and a sink write them (realistic GKE k8s_container LogEntry lines, about 1.1 KB each, shuffled
// across objects, a share of them repeated), split into per-rank line streams in time order.
//
//   split_bench --lines=N [--ranks=8] [--objects=64] [--duplicate-every=100] [--threads=2]
//               [--memory-mib=24]
//
// The objects are generated while they are read (never held whole), in pieces of 4 MiB as a
// ranged download hands them over, so that the measurement is the splitter's work and its memory:
// decoding, the sorted runs in the temporary files, the merge. The lines go to a counting sink.
// Prints one JSON object: lines (entries decoded, repeats included), unique lines written,
// seconds, lines_per_s (entries decoded per second of wall time), cpu_seconds and lines_per_cpu_s
// (the process's user + system time, generating the objects included: what the machine's load
// cannot distort), staged_bytes, peak_rss_kib (VmHWM of the whole process).
#include <sys/resource.h>

#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench_support.h"
#include "falcon/model.h"
#include "logs/rank_query.h"
#include "logs/rank_splitter.h"
#include "util/time_format.h"

namespace {

using falcon::logs::RankLineWriter;
using falcon::logs::RankSplitter;

constexpr std::int64_t kStart = 1776063600LL * 1'000'000'000;  // 2026-04-13T07:00:00Z

using falcon::bench::flag;

// RFC 3339 with nanoseconds, the seconds part cached (consecutive entries share it).
void append_time(std::string& out, std::int64_t ns) {
  thread_local std::int64_t cached = -1;
  thread_local std::string prefix;
  const std::int64_t sec = ns / 1'000'000'000;
  if (sec != cached) {
    prefix = falcon::format_rfc3339_nanos(sec * 1'000'000'000).substr(0, 19);
    cached = sec;
  }
  out += prefix;
  char frac[16];
  std::snprintf(frac, sizeof frac, ".%09lldZ", static_cast<long long>(ns % 1'000'000'000));
  out += frac;
}

void append_int(std::string& out, std::int64_t v, int base = 10) {
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, base);
  out.append(buf, end);
}

// One GKE entry as the logging agent writes it (the shape of tests/logs/gke_log_env.h), from
// parts made once per rank: what varies is the insertId, the times, the step and the loss.
struct EntryMaker {
  std::vector<std::array<std::string, 4>> parts;  // per rank: the text between the variables

  explicit EntryMaker(int ranks) {
    for (int rank = 0; rank < ranks; ++rank) {
      const std::string pod = fmt::format("bench-split-slice-job-0-{}-ab{}cd", rank, rank % 10);
      parts.push_back(
          {R"({"insertId":")",
           fmt::format(
               R"(","labels":{{"compute.googleapis.com/resource_name":"gke-tpu-np-0-{0}","k8s-pod/batch_kubernetes_io/controller-uid":"0c6b5a4e-3d2f-4b1a-8e9d-7c6b5a4e3d2f","k8s-pod/batch_kubernetes_io/job-completion-index":"{0}","k8s-pod/batch_kubernetes_io/job-name":"bench-split-slice-job-0","k8s-pod/controller-uid":"0c6b5a4e-3d2f-4b1a-8e9d-7c6b5a4e3d2f","k8s-pod/job-name":"bench-split-slice-job-0","k8s-pod/jobset_sigs_k8s_io/job-global-index":"0","k8s-pod/jobset_sigs_k8s_io/job-index":"0","k8s-pod/jobset_sigs_k8s_io/job-key":"4f0a9d6c1b7e2a5d8c3f6e9b0a1d4c7f","k8s-pod/jobset_sigs_k8s_io/jobset-name":"bench-split","k8s-pod/jobset_sigs_k8s_io/jobset-uid":"5b3c1f0e-7d2a-4c3e-9a61-0d8f2f6b9e11","k8s-pod/jobset_sigs_k8s_io/replicatedjob-name":"slice-job","k8s-pod/jobset_sigs_k8s_io/replicatedjob-replicas":"1","k8s-pod/jobset_sigs_k8s_io/restart-attempt":"0","k8s-pod/kueue_x-k8s_io/podset":"slice-job","k8s-pod/xpk_google_com/workload":"bench-split","logging.gke.io/top_level_controller_name":"bench-split","logging.gke.io/top_level_controller_type":"JobSet"}},"logName":"projects/falcon-bench/logs/stdout","receiveTimestamp":")",
               rank),
           fmt::format(
               R"(","resource":{{"labels":{{"cluster_name":"tpu-v4-cluster","container_name":"jax-tpu","location":"us-central2-b","namespace_name":"default","pod_name":"{}","project_id":"falcon-bench"}},"type":"k8s_container"}},"severity":"INFO","textPayload":"[rank {}] step )",
               pod, rank),
           R"( loss=0.4496 step_time=0.0371s tokens/s=412345.6\n","timestamp":")"});
    }
  }

  void append(std::string& out, int rank, std::int64_t index, std::int64_t ts) const {
    const auto& p = parts[static_cast<std::size_t>(rank)];
    out += p[0];
    append_int(out, rank, 16);
    out += '-';
    append_int(out, index, 16);
    out += p[1];
    append_time(out, ts + 1'500'000'000);
    out += p[2];
    append_int(out, index);
    out += p[3];
    append_time(out, ts);
    out += "\"}";
  }
};

class Count final : public RankLineWriter {
 public:
  explicit Count(std::int64_t& lines) : lines_(lines) {}
  void write(std::string_view) override { ++lines_; }
  void finish() override {}

 private:
  std::int64_t& lines_;
};

}  // namespace

int main(int argc, char** argv) {
  const long lines = flag(argc, argv, "lines", 100'000);
  const int ranks = static_cast<int>(flag(argc, argv, "ranks", 8));
  const long objects = flag(argc, argv, "objects", 64);
  const long dup_every = flag(argc, argv, "duplicate-every", 100);
  const long threads = flag(argc, argv, "threads", 2);
  const long memory_mib = flag(argc, argv, "memory-mib", 24);
  // --generate-only=1: only make the objects (what the generator costs, to subtract).
  const bool generate_only = flag(argc, argv, "generate-only", 0) != 0;
  if (flag(argc, argv, "print-one", 0) != 0) {  // one staged line, to look at
    std::string one;
    EntryMaker(1).append(one, 0, 7, kStart);
    std::printf("%s\n", one.c_str());
    return 0;
  }

  falcon::ClusterConfig cluster;
  cluster.name = "tpu-v4-prod";
  cluster.project = "falcon-bench";
  cluster.zone = "us-central2-b";
  cluster.cluster_id = "tpu-v4-cluster";
  const falcon::logs::RankQuery query(cluster, "bench-split", "default", 0, std::nullopt, kStart,
                                      std::nullopt);
  RankSplitter splitter(query, {.threads = static_cast<std::size_t>(threads),
                                .memory_bytes = static_cast<std::size_t>(memory_mib) << 20});
  std::atomic<std::int64_t> staged_bytes{0};
  const EntryMaker maker(ranks);
  const auto t0 = std::chrono::steady_clock::now();
  // Object o holds entries o, o + objects, o + 2 objects, ... in reverse order (an unordered
  // set); every dup_every-th entry is also in the next object.
  splitter.add_objects(
      static_cast<std::size_t>(objects),
      [&](std::size_t o, const RankSplitter::ChunkSink& sink) {
        std::string piece;
        piece.reserve((4 << 20) + 4096);
        const auto emit = [&](long i) {
          const int rank = static_cast<int>(i % ranks);
          maker.append(piece, rank, i / ranks, kStart + i * 1'000'000LL);
          piece += '\n';
          if (piece.size() >= (4 << 20)) {
            staged_bytes += static_cast<std::int64_t>(piece.size());
            if (!generate_only) sink(piece);
            piece.clear();
          }
        };
        long last = lines - 1 - ((lines - 1 - static_cast<long>(o)) % objects + objects) % objects;
        for (long i = last; i >= 0; i -= objects) {
          emit(i);
          const long prev = i - 1;  // the previous object's repeated entries
          if (dup_every > 0 && prev >= 0 && prev % dup_every == 0 &&
              (prev % objects) == (static_cast<long>(o) + objects - 1) % objects) {
            emit(prev);
          }
        }
        if (!piece.empty()) {
          staged_bytes += static_cast<std::int64_t>(piece.size());
          if (!generate_only) sink(piece);
        }
      },
      [](std::size_t o) { return fmt::format("staged object {}", o); });
  std::int64_t written = 0;
  std::map<int, std::int64_t> per_rank;
  const std::set<int> found = splitter.ranks();
  for (int rank : found) per_rank[rank] = 0;  // open() runs on several threads: no insertion there
  splitter.write_ranks(found, [&](int rank) { return std::make_unique<Count>(per_rank.at(rank)); });
  for (const auto& [rank, n] : per_rank) written += n;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double cpu = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                     static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  const nlohmann::json out = {
      {"lines", splitter.entries_decoded()},
      {"unique_lines", written},
      {"expected_unique", lines},
      {"duplicates_dropped", splitter.duplicates()},
      {"seconds", seconds},
      {"lines_per_s", static_cast<double>(splitter.entries_decoded()) / seconds},
      {"staged_bytes", staged_bytes.load()},
      {"threads", threads},
      {"cpu_seconds", cpu},
      {"lines_per_cpu_s", static_cast<double>(splitter.entries_decoded()) / cpu},
      {"peak_rss_kib", usage.ru_maxrss}};
  std::printf("%s\n", out.dump().c_str());
  return generate_only || written == lines ? 0 : 1;
}
