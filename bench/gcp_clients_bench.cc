// Throughput and memory of the Google clients against the local GCP-protocol server:
//   - reading 200,000 log entries through LoggingClient (entries/s, peak RSS)
//   - uploading generated streams of 64 MiB and 1 GiB through the resumable writer (MB/s, peak
//     RSS, which must not grow with the size: memory is bounded by one chunk)
// One JSON object per line on stdout.
//
// The server (which keeps everything it stores in memory) runs in a child process, and each
// measured phase in a child of its own, so that each peak RSS (getrusage ru_maxrss) is the
// client's alone. The parent starts no thread before it forks.
//
//   gcp_clients_bench [--entries N] [--upload-mib M ...]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "falcon/clock.h"
#include "falcon/http_client.h"
#include "gcp/credentials.h"
#include "gcp/logging_client.h"
#include "gcp/storage_client.h"
#include "gcp_server/gcp_server.h"
#include "util/time_format.h"

namespace {

using namespace falcon;
using namespace falcon::gcp;
using nlohmann::json;

constexpr const char* kWorkload = "bench-train";

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::vector<json> make_entries(int first, int count) {
  std::vector<json> entries;
  entries.reserve(static_cast<std::size_t>(count));
  const std::int64_t base = 1'776'067'200'000'000'000LL;  // 2026-04-13T08:00:00Z
  for (int i = first; i < first + count; ++i) {
    const int rank = i % 4;
    entries.push_back(
        {{"logName", "projects/bench/logs/stdout"},
         {"resource",
          {{"type", "k8s_container"},
           {"labels",
            {{"project_id", "bench"},
             {"location", "us-central2"},
             {"cluster_name", "tpu-v4"},
             {"namespace_name", "default"},
             {"pod_name", fmt::format("{}-slice-job-0-{}-abcde", kWorkload, rank)},
             {"container_name", "main"}}}}},
         {"labels",
          {{"k8s-pod/jobset_sigs_k8s_io/jobset-name", kWorkload},
           {"k8s-pod/batch_kubernetes_io/job-completion-index", std::to_string(rank)}}},
         {"timestamp", format_rfc3339_nanos(base + static_cast<std::int64_t>(i) * 1'000'000)},
         {"insertId", fmt::format("{:08d}", i)},
         {"severity", "INFO"},
         {"textPayload", fmt::format("step {} loss={:.4f} step_time=0.{:03d}s tokens/s=123456", i,
                                     1.0 / (1 + i), i % 1000)}});
  }
  return entries;
}

struct ServerInfo {
  char base_url[128];
  char token[128];
};

// Forks the server process: it stores `entries` log entries, starts, reports its address on
// `ready`, and serves until `stop` reaches EOF.
pid_t start_server(int entries, ServerInfo& info, int& stop_fd) {
  int ready[2];
  int stop[2];
  if (pipe(ready) != 0 || pipe(stop) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = fork();
  if (pid == 0) {
    close(ready[0]);
    close(stop[1]);
    fake::GcpServerOptions options;
    options.threads = 4;
    fake::GcpServer server(options);
    for (int first = 0; first < entries; first += 10'000) {
      server.write_log_entries(make_entries(first, std::min(10'000, entries - first)));
    }
    server.start();
    ServerInfo out{};
    std::snprintf(out.base_url, sizeof(out.base_url), "%s", server.base_url().c_str());
    std::snprintf(out.token, sizeof(out.token), "%s", server.valid_token().c_str());
    if (write(ready[1], &out, sizeof(out)) != sizeof(out)) _exit(1);
    char byte;
    while (read(stop[0], &byte, 1) > 0) {
    }
    server.stop();
    _exit(0);
  }
  close(ready[1]);
  close(stop[0]);
  if (read(ready[0], &info, sizeof(info)) != sizeof(info)) {
    throw std::runtime_error("the server process did not start");
  }
  close(ready[0]);
  stop_fd = stop[1];
  return pid;
}

// Runs `phase` in a child process and waits for it; false when it failed.
template <typename F>
bool in_child(F phase) {
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    try {
      phase();
      std::fflush(stdout);
      _exit(0);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "gcp_clients_bench: %s\n", e.what());
      _exit(1);
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

void bench_logging_read(const ServerInfo& server, int expected) {
  auto clock = make_system_clock();
  LoggingClientOptions options;
  options.endpoint = server.base_url;
  options.http = make_curl_http_client();
  options.credentials = make_fixed_credentials(server.token);
  options.clock = clock;
  options.rate_limiters = std::make_shared<ProjectRateLimiters>(clock);
  options.reads_per_minute = 1'000'000;  // the local server has no quota
  LoggingClient client(options);
  ListLogEntriesRequest request;
  request.resource_names = {"projects/bench"};
  request.filter =
      fmt::format(R"(resource.type="k8s_container" AND timestamp>="2026-04-13T00:00:00Z" AND )"
                  R"(labels."k8s-pod/jobset_sigs_k8s_io/jobset-name"="{}")",
                  kWorkload);
  request.page_size = 1000;
  const auto start = std::chrono::steady_clock::now();
  LogEntryReader reader = client.list_entries(request);
  std::int64_t entries = 0;
  std::int64_t bytes = 0;
  while (auto entry = reader.next()) {
    ++entries;
    bytes += static_cast<std::int64_t>(entry->message.size());
  }
  const double seconds = seconds_since(start);
  if (entries != expected) {
    throw std::runtime_error(fmt::format("read {} entries, expected {}", entries, expected));
  }
  std::printf("%s\n", json{{"bench", "logging_read"},
                           {"entries", entries},
                           {"pages", reader.pages_fetched()},
                           {"payload_mib", bytes / 1048576.0},
                           {"seconds", seconds},
                           {"entries_per_s", entries / seconds},
                           {"peak_rss_mib", peak_rss_mib()}}
                          .dump()
                          .c_str());
}

void bench_upload(const ServerInfo& server, std::int64_t total, std::size_t chunk) {
  StorageClientOptions options;
  options.endpoint = server.base_url;
  options.http = make_curl_http_client();
  options.credentials = make_fixed_credentials(server.token);
  options.clock = make_system_clock();
  options.upload_chunk_bytes = chunk;
  StorageClient client(options);
  // A 1 MiB block of log-like text, varied per block so the stream is not one repeated page.
  std::string block;
  while (block.size() < (1u << 20)) {
    block += fmt::format("{:08d} step_time=0.{:03d}s loss=0.{:06d}\n", block.size(),
                         block.size() % 997, block.size() % 999'983);
  }
  block.resize(1u << 20);
  const auto start = std::chrono::steady_clock::now();
  ResumableUploadWriter writer =
      client.start_resumable_upload("bench", fmt::format("upload-{}.log", total), "text/plain");
  std::int64_t sent = 0;
  std::uint32_t counter = 0;
  while (sent < total) {
    std::memcpy(block.data(), &counter, sizeof(counter));
    ++counter;
    const std::size_t n = static_cast<std::size_t>(
        std::min<std::int64_t>(static_cast<std::int64_t>(block.size()), total - sent));
    for (std::size_t offset = 0; offset < n; offset += 64 * 1024) {  // 64 KiB writes
      writer.write(
          std::string_view(block).substr(offset, std::min<std::size_t>(64 * 1024, n - offset)));
    }
    sent += static_cast<std::int64_t>(n);
  }
  const ObjectMetadata object = writer.finish();
  const double seconds = seconds_since(start);
  if (object.size != total) {
    throw std::runtime_error(fmt::format("stored {} bytes, wrote {}", object.size, total));
  }
  std::printf("%s\n", json{{"bench", "resumable_upload"},
                           {"mib", total / 1048576.0},
                           {"chunk_mib", chunk / 1048576.0},
                           {"seconds", seconds},
                           {"mb_per_s", total / 1e6 / seconds},
                           {"peak_rss_mib", peak_rss_mib()}}
                          .dump()
                          .c_str());
}

}  // namespace

int main(int argc, char** argv) {
  int entries = 200'000;
  std::vector<std::int64_t> upload_mib;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--entries" && i + 1 < argc) {
      entries = std::stoi(argv[++i]);
    } else if (arg == "--upload-mib" && i + 1 < argc) {
      upload_mib.push_back(std::stoll(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--entries N] [--upload-mib M ...]\n", argv[0]);
      return 2;
    }
  }
  if (upload_mib.empty()) upload_mib = {64, 1024};

  ServerInfo server{};
  int stop_fd = -1;
  const pid_t server_pid = start_server(entries, server, stop_fd);
  bool ok = in_child([&] { bench_logging_read(server, entries); });
  for (const std::int64_t mib : upload_mib) {
    ok = in_child([&] { bench_upload(server, mib << 20, 8u << 20); }) && ok;
  }
  close(stop_fd);
  waitpid(server_pid, nullptr, 0);
  return ok ? 0 : 1;
}
