// CloudLogRetriever against the local Google-protocol server (tools/gcp_server), with realistic
// GKE container entries (reference/xpk.md section 4).
//
// Cases (one JSON object per line on stdout, so a script can build a table):
//   stream  stream_log of one rank holding --lines lines (plus a tenth as many of a neighbour
//           rank): lines/s, list requests, RSS growth and peak during the read. With --gcloud,
//           the same filter through `gcloud logging read` on the same server and data, and the
//           time ratio.
//   tail    a tail of --tail lines from a rank with --lines entries: requests and time.
//   export  export_logs of --ranks ranks x --lines lines each: time, peak RSS, list requests
//           against pages of data, upload requests.
//
//   logs_bench --case=stream|tail|export|all [--lines=N] [--ranks=8] [--tail=100]
//              [--line-bytes=120] [--export-buffer-mib=64] [--gcloud[=PATH]]
//              [--server=URL --token=TOKEN | --server-bin=PATH]
//
// Where the server runs:
//   (default)          in this process: its memory (about 250 bytes per entry) counts in RSS.
//   --server-bin=PATH  a falcon-gcp-server child process started here, and the entries are
//                      written from a forked child: this process's RSS is the client's alone.
//   --server=URL       an already running server (--token: a bearer token it accepts).
// Memory: rss_before_kib is VmRSS before the measured call; peak_rss_kib is VmHWM after it,
// reset (/proc/self/clear_refs) just before, so it is the peak during the call alone;
// rss_growth_kib is their difference.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "falcon/clock.h"
#include "falcon/http_client.h"
#include "falcon/log_retriever.h"
#include "gcp/credentials.h"
#include "gcp/rate_limiter.h"
#include "gcp_server/gcp_server.h"
#include "logs/filter_builder.h"
#include "logs/retriever_options.h"
#include "util/time_format.h"

namespace {

using nlohmann::json;
using Seconds = std::chrono::duration<double>;

constexpr std::int64_t kStartNanos = 1776063600LL * 1'000'000'000;  // 2026-04-13T07:00:00Z
constexpr const char* kProject = "falcon-bench";
constexpr const char* kClusterId = "tpu-v4-bench";
constexpr const char* kNamespace = "default";

struct Args {
  std::string bench_case = "all";
  std::optional<long> lines;
  int ranks = 8;
  int tail = 100;
  std::size_t line_bytes = 120;
  std::size_t export_buffer_mib = 64;
  std::string server_url;
  std::string token;
  std::string server_bin;
  std::string gcloud;  // empty: no comparison
};

[[noreturn]] void usage(const std::string& problem) {
  std::cerr << "logs_bench: " << problem
            << "\nusage: logs_bench --case=stream|tail|export|all [--lines=N] [--ranks=8] "
               "[--tail=100] [--line-bytes=120] [--export-buffer-mib=64] [--gcloud[=PATH]] "
               "[--server=URL --token=TOKEN | --server-bin=PATH]\n";
  std::exit(2);
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto eq = arg.find('=');
    const std::string key = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    const auto number = [&]() -> long {
      try {
        return std::stol(value);
      } catch (const std::exception&) {
        usage(arg + ": not a number");
      }
    };
    if (key == "--case") {
      a.bench_case = value;
    } else if (key == "--lines") {
      a.lines = number();
    } else if (key == "--ranks") {
      a.ranks = static_cast<int>(number());
    } else if (key == "--tail") {
      a.tail = static_cast<int>(number());
    } else if (key == "--line-bytes") {
      a.line_bytes = static_cast<std::size_t>(number());
    } else if (key == "--export-buffer-mib") {
      a.export_buffer_mib = static_cast<std::size_t>(number());
    } else if (key == "--server") {
      a.server_url = value;
    } else if (key == "--token") {
      a.token = value;
    } else if (key == "--server-bin") {
      a.server_bin = value;
    } else if (key == "--gcloud") {
      a.gcloud = value.empty() ? "gcloud" : value;
    } else {
      usage("unknown argument " + arg);
    }
  }
  if (a.bench_case != "stream" && a.bench_case != "tail" && a.bench_case != "export" &&
      a.bench_case != "all") {
    usage("--case must be stream, tail, export or all");
  }
  if (!a.server_url.empty() && a.token.empty()) usage("--server needs --token");
  if (a.ranks < 1 || a.tail < 0) usage("--ranks must be positive and --tail not negative");
  return a;
}

// --- memory

long status_kib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string prefix = std::string(field) + ":";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) return std::stol(line.substr(prefix.size()));
  }
  return -1;
}

// Resets VmHWM to the current RSS (Linux >= 4.0), so a later VmHWM is the peak since now.
void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

long ru_maxrss_kib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

struct MemoryWindow {
  long before = 0;
  MemoryWindow() {
    reset_peak_rss();
    before = status_kib("VmRSS");
  }
  void report(json& out) const {
    const long peak = status_kib("VmHWM");
    out["rss_before_kib"] = before;
    out["peak_rss_kib"] = peak;
    out["rss_growth_kib"] = peak - before;
    out["ru_maxrss_kib"] = ru_maxrss_kib();
  }
};

// --- entries

std::string pod_suffix(int worker) {
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::uint32_t h = 2166136261u ^ static_cast<std::uint32_t>(worker * 104729 + 17);
  std::string out;
  for (int i = 0; i < 5; ++i) {
    h = h * 16777619u + 0x9e3779b9u;
    out += kChars[(h >> 11) % 36];
  }
  return out;
}

// Line `i` of worker `worker` of `workload`, as GKE's agent stores a JAX training log line.
json gke_entry(const std::string& workload, int worker, long i, std::int64_t timestamp,
               std::size_t line_bytes) {
  std::string text = fmt::format(
      "I0413 07:{:02}:{:02}.{:06} 1 train.py:412] step={} loss={:.5f} "
      "step_time={:.3f}s tokens/s={}",
      (i / 60'000) % 60, (i / 1000) % 60, i % 1000 * 1000, i, 4.0 / (1.0 + i * 1e-3),
      0.412 + (i % 17) * 1e-3, 182'000 + i % 977);
  if (text.size() < line_bytes) text.append(line_bytes - text.size(), '.');
  const std::string pod = fmt::format("{}-slice-job-0-{}-{}", workload, worker, pod_suffix(worker));
  const std::string job = workload + "-slice-job-0";
  return {
      {"logName", fmt::format("projects/{}/logs/{}", kProject, i % 50 == 7 ? "stderr" : "stdout")},
      {"resource",
       {{"type", "k8s_container"},
        {"labels",
         {{"project_id", kProject},
          {"location", "us-central2-b"},
          {"cluster_name", kClusterId},
          {"namespace_name", kNamespace},
          {"pod_name", pod},
          {"container_name", "jax-tpu"}}}}},
      {"timestamp", falcon::format_rfc3339_nanos(timestamp)},
      {"severity", i % 50 == 7 ? "ERROR" : "INFO"},
      {"insertId", fmt::format("{}{:012x}", pod_suffix(worker), i)},
      {"labels",
       {{"compute.googleapis.com/resource_name", fmt::format("gke-{}-np-0-{}", kClusterId, worker)},
        {"k8s-pod/jobset_sigs_k8s_io/jobset-name", workload},
        {"k8s-pod/jobset_sigs_k8s_io/job-index", "0"},
        {"k8s-pod/jobset_sigs_k8s_io/replicatedjob-name", "slice-job"},
        {"k8s-pod/jobset_sigs_k8s_io/restart-attempt", "0"},
        {"k8s-pod/batch_kubernetes_io/job-completion-index", std::to_string(worker)},
        {"k8s-pod/batch_kubernetes_io/job-name", job},
        {"k8s-pod/job-name", job},
        {"k8s-pod/xpk_google_com/workload", workload},
        {"k8s-pod/kueue_x-k8s_io/podset", "slice-job"}}},
      {"textPayload", text + "\n"}};
}

// --- the server

class Server {
 public:
  explicit Server(const Args& args) {
    if (!args.server_url.empty()) {
      url_ = args.server_url;
      token_ = args.token;
      mode_ = "external";
    } else if (!args.server_bin.empty()) {
      spawn(args.server_bin);
      mode_ = "child-process";
    } else {
      in_process_ = std::make_unique<falcon::fake::GcpServer>(falcon::fake::GcpServerOptions{});
      in_process_->start();
      url_ = in_process_->base_url();
      token_ = in_process_->valid_token();
      mode_ = "in-process";
    }
    http_ = falcon::make_curl_http_client();
  }
  ~Server() {
    if (child_ > 0) {
      kill(child_, SIGTERM);
      waitpid(child_, nullptr, 0);
    }
  }

  const std::string& url() const { return url_; }
  const std::string& token() const { return token_; }
  const std::string& mode() const { return mode_; }

  // Stores entries workload by workload in batches; with a server outside this process the
  // JSON is built and sent by a forked child, so that this process's memory stays the client's.
  void write(const std::function<void(const std::function<void(std::vector<json>&&)>&)>& produce) {
    if (in_process_) {
      produce([&](std::vector<json>&& batch) { in_process_->write_log_entries(batch); });
      return;
    }
    std::cout.flush();
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      int code = 0;
      try {
        const auto http = falcon::make_curl_http_client();
        produce([&](std::vector<json>&& batch) {
          falcon::HttpRequest request;
          request.method = "POST";
          request.url = url_ + "/v2/entries:write";
          request.headers.set("Content-Type", "application/json");
          request.headers.set("Authorization", "Bearer " + token_);
          request.body = json{{"entries", std::move(batch)}}.dump();
          request.timeout = std::chrono::minutes(5);
          const falcon::HttpResponse response = http->send(request);
          if (response.status != 200) {
            throw std::runtime_error(fmt::format("entries:write: HTTP {}: {}", response.status,
                                                 response.body.substr(0, 300)));
          }
        });
      } catch (const std::exception& e) {
        std::cerr << "logs_bench: writing entries failed: " << e.what() << '\n';
        code = 1;
      }
      _exit(code);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      throw std::runtime_error("the child writing entries failed");
    }
  }

  // Requests per route so far (GET /_fake/counters).
  std::map<std::string, long> counts() const {
    falcon::HttpRequest request;
    request.url = url_ + "/_fake/counters";
    const auto response = http_->send(request);
    const json counters = json::parse(response.body);
    std::map<std::string, long> out;
    for (const auto& [k, v] : counters.at("requests").items()) out[k] = v.get<long>();
    return out;
  }

 private:
  void spawn(const std::string& binary) {
    int out[2];
    if (pipe(out) != 0) throw std::runtime_error("pipe failed");
    child_ = fork();
    if (child_ < 0) throw std::runtime_error("fork failed");
    if (child_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      close(out[0]);
      close(out[1]);
      execl(binary.c_str(), binary.c_str(), "--port", "0", "--print-json",
            static_cast<char*>(nullptr));
      _exit(127);
    }
    close(out[1]);
    FILE* from_child = fdopen(out[0], "r");
    char buffer[4096];
    while (fgets(buffer, sizeof buffer, from_child)) {
      if (buffer[0] != '{') continue;
      const json info = json::parse(buffer);
      url_ = info["url"].get<std::string>();
      token_ = info["token"].get<std::string>();
      break;
    }
    fclose(from_child);
    if (url_.empty()) throw std::runtime_error(binary + " did not print its address");
  }

  std::unique_ptr<falcon::fake::GcpServer> in_process_;
  pid_t child_ = -1;
  std::string url_;
  std::string token_;
  std::string mode_;
  std::shared_ptr<falcon::HttpClient> http_;
};

long diff(const std::map<std::string, long>& after, const std::map<std::string, long>& before,
          const std::string& route) {
  const auto a = after.find(route);
  const auto b = before.find(route);
  return (a == after.end() ? 0 : a->second) - (b == before.end() ? 0 : b->second);
}

falcon::CloudLogRetriever make_retriever(const Server& server, std::size_t export_buffer_mib) {
  const auto clock = falcon::make_system_clock();
  const auto http = falcon::make_curl_http_client();
  const auto credentials = falcon::gcp::make_fixed_credentials(server.token());
  falcon::logs::RetrieverOptions o;
  o.logging.endpoint = server.url();
  o.logging.http = http;
  o.logging.credentials = credentials;
  o.logging.clock = clock;
  // A local server has no read quota: a limit high enough never to wait.
  o.logging.rate_limiters = std::make_shared<falcon::gcp::ProjectRateLimiters>(clock);
  o.logging.reads_per_minute = 1'000'000;
  o.storage.endpoint = server.url();
  o.storage.http = http;
  o.storage.credentials = credentials;
  o.storage.clock = clock;
  o.export_buffer_bytes = export_buffer_mib << 20;
  o.clock = clock;
  return falcon::logs::make_retriever(std::move(o));
}

falcon::ClusterConfig cluster() {
  falcon::ClusterConfig c;
  c.name = "tpu-v4-bench";
  c.project = kProject;
  c.cluster_id = kClusterId;
  c.zone = "us-central2-b";
  return c;
}

// `count` lines for each of `workers` of `workload`, interleaved in time, in batches.
void write_workload(Server& server, const std::string& workload,
                    const std::vector<std::pair<int, long>>& workers, std::size_t line_bytes) {
  server.write([&](const std::function<void(std::vector<json> &&)>& send) {
    constexpr std::size_t kBatch = 10'000;
    long longest = 0;
    for (const auto& [worker, count] : workers) longest = std::max(longest, count);
    std::vector<json> batch;
    batch.reserve(kBatch);
    for (long i = 0; i < longest; ++i) {
      for (const auto& [worker, count] : workers) {
        if (i >= count) continue;
        batch.push_back(gke_entry(workload, worker, i, kStartNanos + i * 1'000'000 + worker * 1000,
                                  line_bytes));
        if (batch.size() == kBatch) {
          send(std::move(batch));
          batch.clear();
          batch.reserve(kBatch);
        }
      }
    }
    if (!batch.empty()) send(std::move(batch));
  });
}

void emit(const json& j) { std::cout << j.dump() << std::endl; }

// gcloud logging read of the same filter on the same server: lines and seconds.
std::optional<std::pair<long, double>> gcloud_read(const Args& args, const Server& server,
                                                   const std::string& filter) {
  const auto dir =
      std::filesystem::temp_directory_path() / fmt::format("logs_bench_gcloud_{}", getpid());
  std::filesystem::create_directories(dir);
  {
    std::ofstream(dir / "token") << server.token();
    std::ofstream(dir / "filter") << filter;
  }
  const std::string command = fmt::format(
      "CLOUDSDK_CONFIG='{0}/config' CLOUDSDK_CORE_DISABLE_PROMPTS=1 "
      "CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING='{1}/' '{2}' logging read \"$(cat '{0}/filter')\" "
      "--project={3} --order=asc --access-token-file='{0}/token' "
      "--format='value(textPayload)' > '{0}/out' 2> '{0}/err'",
      dir.string(), server.url(), args.gcloud, kProject);
  const auto start = std::chrono::steady_clock::now();
  const int rc = std::system(command.c_str());
  const double seconds = Seconds(std::chrono::steady_clock::now() - start).count();
  long lines = 0;
  {
    std::ifstream out(dir / "out");
    // textPayload keeps the entry's trailing newline, so gcloud prints a blank line after each.
    std::string line;
    while (std::getline(out, line)) lines += line.empty() ? 0 : 1;
  }
  if (rc != 0) {
    std::ifstream err(dir / "err");
    std::cerr << "logs_bench: gcloud logging read failed (" << rc << "): " << err.rdbuf() << '\n';
    std::filesystem::remove_all(dir);
    return std::nullopt;
  }
  std::filesystem::remove_all(dir);
  return std::make_pair(lines, seconds);
}

void run_stream(const Args& args, Server& server) {
  const long lines = args.lines.value_or(200'000);
  const std::string workload = fmt::format("bench-stream-{}", lines);
  write_workload(server, workload, {{0, lines}, {1, std::max(1L, lines / 10)}}, args.line_bytes);
  auto retriever = make_retriever(server, args.export_buffer_mib);
  falcon::LogFilter filter;
  filter.since = falcon::format_rfc3339_nanos(kStartNanos);

  const auto before = server.counts();
  const MemoryWindow memory;
  const auto start = std::chrono::steady_clock::now();
  long read = 0;
  std::size_t bytes = 0;
  for (const std::string& line : retriever.stream_log(cluster(), workload, kNamespace, 0, filter)) {
    ++read;
    bytes += line.size();
  }
  const double seconds = Seconds(std::chrono::steady_clock::now() - start).count();
  json out = {{"case", "stream"},
              {"server", server.mode()},
              {"lines", lines},
              {"lines_read", read},
              {"bytes_read", bytes},
              {"seconds", seconds},
              {"lines_per_second", read / seconds},
              {"list_requests", diff(server.counts(), before, "logging.list")}};
  memory.report(out);

  if (!args.gcloud.empty()) {
    falcon::logs::WorkloadQuery q;
    q.project = kProject;
    q.cluster_id = kClusterId;
    q.namespace_ = kNamespace;
    q.workload = workload;
    q.ranks = std::vector<int>{0};
    q.not_before_nanos = kStartNanos;
    if (const auto result = gcloud_read(args, server, falcon::logs::build_workload_filter(q))) {
      out["gcloud_lines"] = result->first;
      out["gcloud_seconds"] = result->second;
      out["gcloud_lines_per_second"] = result->first / result->second;
      out["speedup_vs_gcloud"] = result->second / seconds;
    }
  }
  emit(out);
}

void run_tail(const Args& args, Server& server) {
  const long lines = args.lines.value_or(1'000'000);
  const std::string workload = fmt::format("bench-tail-{}", lines);
  write_workload(server, workload, {{0, lines}}, args.line_bytes);
  auto retriever = make_retriever(server, args.export_buffer_mib);
  falcon::LogFilter filter;
  filter.since = falcon::format_rfc3339_nanos(kStartNanos);
  filter.tail_lines = args.tail;

  const auto before = server.counts();
  const MemoryWindow memory;
  const auto start = std::chrono::steady_clock::now();
  long read = 0;
  std::string last;
  for (const std::string& line : retriever.stream_log(cluster(), workload, kNamespace, 0, filter)) {
    ++read;
    last = line;
  }
  const double seconds = Seconds(std::chrono::steady_clock::now() - start).count();
  json out = {
      {"case", "tail"},
      {"server", server.mode()},
      {"log_entries", lines},
      {"tail", args.tail},
      {"lines_read", read},
      {"last_line_is_newest", last.find(fmt::format("step={} ", lines - 1)) != std::string::npos},
      {"seconds", seconds},
      {"list_requests", diff(server.counts(), before, "logging.list")}};
  memory.report(out);
  emit(out);
}

void run_export(const Args& args, Server& server) {
  const long lines = args.lines.value_or(100'000);
  const std::string workload = fmt::format("bench-export-{}x{}", args.ranks, lines);
  std::vector<std::pair<int, long>> workers;
  for (int r = 0; r < args.ranks; ++r) workers.emplace_back(r, lines);
  write_workload(server, workload, workers, args.line_bytes);
  auto retriever = make_retriever(server, args.export_buffer_mib);
  falcon::LogFilter filter;
  filter.since = falcon::format_rfc3339_nanos(kStartNanos);

  const auto before = server.counts();
  const MemoryWindow memory;
  const auto start = std::chrono::steady_clock::now();
  const falcon::LogExportResult result =
      retriever.export_logs(cluster(), workload, kNamespace, filter,
                            fmt::format("gs://falcon-bench-logs/{}/{}/", workload, getpid()));
  const double seconds = Seconds(std::chrono::steady_clock::now() - start).count();
  const auto after = server.counts();
  const long total = lines * args.ranks;
  json out = {{"case", "export"},
              {"server", server.mode()},
              {"ranks", args.ranks},
              {"lines_per_rank", lines},
              {"exported_ranks", result.exported_ranks.size()},
              {"seconds", seconds},
              {"lines_per_second", total / seconds},
              {"export_buffer_mib", args.export_buffer_mib},
              {"list_requests", diff(after, before, "logging.list")},
              {"data_pages", (total + 999) / 1000},
              {"upload_chunk_requests", diff(after, before, "storage.upload_chunk")},
              {"upload_init_requests", diff(after, before, "storage.upload_init")}};
  memory.report(out);
  emit(out);
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse_args(argc, argv);
  try {
    Server server(args);
    if (args.bench_case == "stream" || args.bench_case == "all") run_stream(args, server);
    if (args.bench_case == "tail" || args.bench_case == "all") run_tail(args, server);
    if (args.bench_case == "export" || args.bench_case == "all") run_export(args, server);
  } catch (const std::exception& e) {
    std::cerr << "logs_bench: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
