// Attacks on a running `falcon serve` (docs/serve.md#security), measured: while one attack runs,
// GET /healthz is asked every 20 ms on a fresh connection from 127.0.0.250, and the server's
// resident memory (/proc/PID/status) is sampled. One JSON object on stdout:
//   {"attack", "seconds", "healthz": {"probes", "failures", "p50_ms", "p99_ms", "max_ms"},
//    "rss_mb": {"start", "peak"}, ...what the attack counted}
//
//   hostile_bench --port P --pid PID --attack NAME [--tls] [--seconds S] [--connections N]
//                 [--token T] [--other-token T] [--workload CLUSTER/NAME]
//
// Attacks (bench/bench.py runs each against a release build with the defaults):
//   idle       nothing: the baseline of the probes and the memory
//   slow       N connections (default 10,000) from many loopback addresses, each sending half a
//              request head and a byte a second, reopened as soon as the server closes it
//              (with --tls: half a TLS handshake record instead)
//   heads      as slow, each first sending 15,000 bytes of its head (under the 16 KiB limit)
//   trickle    64 connections trickling a request head a byte every 200 ms (with --tls: TLS)
//   pipeline   one connection pipelining GET /ui/js/app.js without reading the answers
//   methods    5,000 requests with 60 KB methods to unmatched paths
//   nested     32 concurrent 1 MiB bodies of '[' (--token: an operate token)
//   lists      16 clients looping GET /v1/selections?limit=1000 and ?limit=100 (--token)
//   follows    64 log follows of --workload on one token (--token)
//   exports    300 POST /v1/exports of --workload (--token: an operate token)
// With --other-token, GET /v1/clusters with that token is timed alongside (other_token_ms).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/raw_http_client.h"

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct Options {
  int port = 0;
  int pid = 0;
  std::string attack = "idle";
  bool tls = false;
  double seconds = 20;
  int connections = 10000;
  std::string token;
  std::string other_token;
  std::string workload = "c0/run-a";
};

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

long rss_kb(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return 0;
}

using falcon::testing::RawHttpClient;

// A blocking connection (plain or TLS) from `source` to 127.0.0.1:port, with a timeout on
// every read and write: the tests' raw client (tests/support/raw_http_client.h).
std::unique_ptr<RawHttpClient> connect_from(int port, bool tls, const std::string& source,
                                            int timeout_ms) {
  return std::make_unique<RawHttpClient>(
      port, RawHttpClient::Options{.tls = tls,
                                   .source_address = source,
                                   .read_timeout = std::chrono::milliseconds(timeout_ms)});
}

std::string request(const std::string& method, const std::string& path, int port,
                    const std::string& token = "", const std::string& body = "") {
  std::string r =
      method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) + "\r\n";
  if (!token.empty()) r += "Authorization: Bearer " + token + "\r\n";
  if (method == "POST") {
    r +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  return r + "\r\n" + body;
}

// One request on a fresh connection: its status and how long it took.
std::pair<int, double> ask(int port, bool tls, const std::string& req, const std::string& source,
                           int timeout_ms) {
  const auto t = Clock::now();
  const auto c = connect_from(port, tls, source, timeout_ms);
  if (!c->connected() || !c->send(req)) return {0, ms_since(t)};
  const int status = c->read_answer(true).status;  // the head only
  return {status, ms_since(t)};
}

json percentiles(std::vector<double> ms) {
  if (ms.empty()) return {{"p50_ms", nullptr}, {"p99_ms", nullptr}, {"max_ms", nullptr}};
  std::sort(ms.begin(), ms.end());
  const auto at = [&](double q) { return ms[std::min(ms.size() - 1, std::size_t(q * ms.size()))]; };
  return {{"p50_ms", at(0.5)}, {"p99_ms", at(0.99)}, {"max_ms", ms.back()}};
}

// /healthz every 20 ms and the server's RSS, until stopped.
class Probe {
 public:
  explicit Probe(const Options& o) : o_(o) {
    rss_start_kb_ = rss_kb(o.pid);
    thread_ = std::thread([this] {
      while (!done_) {
        const auto [status, ms] =
            ask(o_.port, o_.tls, request("GET", "/healthz", o_.port), "127.0.0.250", 2000);
        {
          std::lock_guard lock(mutex_);
          latencies_.push_back(ms);
          if (status != 200) ++failures_;
          peak_kb_ = std::max(peak_kb_, rss_kb(o_.pid));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  }
  json stop() {
    done_ = true;
    thread_.join();
    json h = percentiles(latencies_);
    h["probes"] = latencies_.size();
    h["failures"] = failures_;
    return {{"healthz", h},
            {"rss_mb", {{"start", rss_start_kb_ / 1024.0}, {"peak", peak_kb_ / 1024.0}}}};
  }

 private:
  const Options& o_;
  std::atomic<bool> done_{false};
  std::thread thread_;
  std::mutex mutex_;
  std::vector<double> latencies_;
  int failures_ = 0;
  long rss_start_kb_ = 0;
  long peak_kb_ = 0;
};

// Times GET /v1/clusters with another token while an attack runs.
class OtherToken {
 public:
  explicit OtherToken(const Options& o) : o_(o) {
    if (o.other_token.empty()) return;
    thread_ = std::thread([this] {
      while (!done_) {
        const auto [status, ms] =
            ask(o_.port, o_.tls, request("GET", "/v1/clusters", o_.port, o_.other_token),
                "127.0.0.251", 30000);
        std::lock_guard lock(mutex_);
        ms_.push_back(status == 200 ? ms : 30000.0);
      }
    });
  }
  void add_to(json& out) {
    if (!thread_.joinable()) return;
    done_ = true;
    thread_.join();
    out["other_token_ms"] = percentiles(ms_);
  }

 private:
  const Options& o_;
  std::atomic<bool> done_{false};
  std::thread thread_;
  std::mutex mutex_;
  std::vector<double> ms_;
};

std::string source_address(int i) {
  return "127.0." + std::to_string(1 + (i / 250) % 250) + "." + std::to_string(1 + i % 250);
}

// N non-blocking connections sending half a head (with --tls, half a TLS handshake record), a
// byte a second, reopened when closed. With `pad`, the first send carries that many more bytes
// of the unfinished head (attack heads).
void attack_slow(const Options& o, json& out, std::size_t pad = 0) {
  const int epoll = ::epoll_create1(0);
  std::vector<int> fds(static_cast<std::size_t>(o.connections), -1);
  std::vector<Clock::time_point> last_byte(fds.size());
  std::uint64_t opened = 0;
  std::uint64_t reopened = 0;
  auto open_one = [&](int i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0) return;
    sockaddr_in local{};
    local.sin_family = AF_INET;
    ::inet_pton(AF_INET, source_address(i).c_str(), &local.sin_addr);
    ::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(o.port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP;
    ev.data.u32 = static_cast<std::uint32_t>(i);
    ::epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &ev);
    fds[static_cast<std::size_t>(i)] = fd;
    last_byte[static_cast<std::size_t>(i)] = Clock::time_point{};
    ++opened;
  };
  for (int i = 0; i < o.connections; ++i) open_one(i);
  // With --tls: a TLS record announcing 16 KiB of handshake and half of it, then a byte a
  // second: a handshake that never ends (the server holds its TLS state meanwhile).
  const std::string head =
      o.tls ? std::string("\x16\x03\x01\x40\x00", 5) + std::string(8192 + pad, '\x01')
            : "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + std::string(pad, 'a');
  const auto until = Clock::now() + std::chrono::duration<double>(o.seconds);
  std::vector<epoll_event> events(1024);
  while (Clock::now() < until) {
    const int n = ::epoll_wait(epoll, events.data(), static_cast<int>(events.size()), 100);
    for (int k = 0; k < n; ++k) {
      const auto i = events[static_cast<std::size_t>(k)].data.u32;
      const int fd = fds[i];
      const auto ev = events[static_cast<std::size_t>(k)].events;
      if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
        char buf[512];
        if ((ev & EPOLLIN) && ::recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0) continue;
        ::close(fd);  // the server closed it: come back at once
        fds[i] = -1;
        open_one(static_cast<int>(i));
        ++reopened;
        continue;
      }
      if ((ev & EPOLLOUT) && last_byte[i] == Clock::time_point{}) {
        ::send(fd, head.data(), head.size(), MSG_NOSIGNAL);
        last_byte[i] = Clock::now();
        epoll_event mod{};
        mod.events = EPOLLIN | EPOLLRDHUP;
        mod.data.u32 = i;
        ::epoll_ctl(epoll, EPOLL_CTL_MOD, fd, &mod);
      }
    }
    const auto now = Clock::now();
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i] >= 0 && last_byte[i] != Clock::time_point{} &&
          now - last_byte[i] > std::chrono::seconds(1)) {
        ::send(fds[i], "a", 1, MSG_NOSIGNAL);  // a byte a second: never a whole head
        last_byte[i] = now;
      }
    }
  }
  for (const int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
  ::close(epoll);
  out["opened"] = opened;
  out["reopened_after_close"] = reopened;
}

void attack_trickle(const Options& o, json& out) {
  std::vector<std::unique_ptr<RawHttpClient>> conns;
  for (int i = 0; i < 64; ++i) {
    conns.push_back(connect_from(o.port, o.tls, source_address(i), 2000));
  }
  const std::string head = "GET /v1/clusters HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaa";
  const auto until = Clock::now() + std::chrono::duration<double>(o.seconds);
  for (std::size_t at = 0; Clock::now() < until; ++at) {
    for (auto& c : conns) c->send(std::string(1, head[at % head.size()]));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  out["connections"] = conns.size();
}

void attack_pipeline(const Options& o, json& out) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(o.port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::fcntl(fd, F_SETFL, O_NONBLOCK);
  std::string blob;
  for (int i = 0; i < 2000; ++i) blob += request("GET", "/ui/js/app.js", o.port);
  std::size_t sent = 0;
  const auto until = Clock::now() + std::chrono::duration<double>(o.seconds);
  while (Clock::now() < until) {
    const std::size_t at = sent % blob.size();
    const long w = ::send(fd, blob.data() + at, blob.size() - at, MSG_NOSIGNAL);
    if (w > 0) {
      sent += static_cast<std::size_t>(w);
      continue;
    }
    if (w < 0 && errno != EAGAIN) break;  // closed by the server
    pollfd p{fd, POLLOUT, 0};
    ::poll(&p, 1, 100);
  }
  ::close(fd);
  out["bytes_sent"] = sent;
}

void attack_methods(const Options& o, json& out) {
  std::map<int, int> statuses;
  const std::string big(60 << 10, 'X');
  for (int i = 0; i < 5000; ++i) {
    const std::string req = big + std::to_string(i) + " /nowhere/" + std::to_string(i) +
                            " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(o.port) + "\r\n\r\n";
    ++statuses[ask(o.port, o.tls, req, source_address(i % 100), 5000).first];
  }
  for (const auto& [status, n] : statuses) out["statuses"][std::to_string(status)] = n;
}

// `threads` clients running `one()` until the time is up (or once each when `once`).
template <typename F>
void in_parallel(int threads, double seconds, bool once, F one) {
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  std::vector<std::thread> ts;
  for (int i = 0; i < threads; ++i) {
    ts.emplace_back([&, i] {
      do {
        one(i);
      } while (!once && Clock::now() < until);
    });
  }
  for (auto& t : ts) t.join();
}

void count(json& out, const std::string& what, int status, std::mutex& m) {
  std::lock_guard lock(m);
  json& counts = out[what];
  if (!counts.is_object()) counts = json::object();  // the first count
  const std::string key = std::to_string(status);
  counts[key] = counts.value(key, 0) + 1;
}

void attack_nested(const Options& o, json& out) {
  const std::string body((1 << 20) - 2, '[');
  std::mutex m;
  in_parallel(32, 0, true, [&](int i) {
    count(out, "statuses",
          ask(o.port, o.tls, request("POST", "/v1/select", o.port, o.token, body),
              source_address(i), 60000)
              .first,
          m);
  });
}

void attack_lists(const Options& o, json& out) {
  std::mutex m;
  in_parallel(16, o.seconds, false, [&](int i) {
    const std::string path = i % 2 == 0 ? "/v1/selections?limit=1000" : "/v1/selections?limit=100";
    count(out, "statuses",
          ask(o.port, o.tls, request("GET", path, o.port, o.token), source_address(i), 60000).first,
          m);
  });
}

void attack_follows(const Options& o, json& out) {
  const auto slash = o.workload.find('/');
  const std::string path = "/v1/workloads/" + o.workload.substr(0, slash) + "/" +
                           o.workload.substr(slash + 1) + "/logs?follow=true";
  std::vector<std::unique_ptr<RawHttpClient>> held;
  std::map<int, int> statuses;
  for (int i = 0; i < 64; ++i) {
    auto c = connect_from(o.port, o.tls, source_address(i), 30000);
    c->send(request("GET", path, o.port, o.token));
    ++statuses[c->read_answer(true).status];
    held.push_back(std::move(c));
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));  // held open
  for (const auto& [status, n] : statuses) out["statuses"][std::to_string(status)] = n;
}

void attack_exports(const Options& o, json& out) {
  const auto slash = o.workload.find('/');
  const json body = {{"cluster", o.workload.substr(0, slash)},
                     {"workload", o.workload.substr(slash + 1)},
                     {"dest", "gs://falcon-logs/hostile"}};
  std::map<int, int> statuses;
  for (int i = 0; i < 300; ++i) {
    ++statuses[ask(o.port, o.tls, request("POST", "/v1/exports", o.port, o.token, body.dump()),
                   source_address(i), 30000)
                   .first];
  }
  for (const auto& [status, n] : statuses) out["statuses"][std::to_string(status)] = n;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--port")
      o.port = std::stoi(value());
    else if (a == "--pid")
      o.pid = std::stoi(value());
    else if (a == "--attack")
      o.attack = value();
    else if (a == "--tls")
      o.tls = true;
    else if (a == "--seconds")
      o.seconds = std::stod(value());
    else if (a == "--connections")
      o.connections = std::stoi(value());
    else if (a == "--token")
      o.token = value();
    else if (a == "--other-token")
      o.other_token = value();
    else if (a == "--workload")
      o.workload = value();
    else
      throw std::invalid_argument("unknown argument " + a);
  }
  if (o.port == 0 || o.pid == 0) throw std::invalid_argument("--port and --pid are required");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &rl);
  Options o;
  try {
    o = parse(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "hostile_bench: " << e.what() << "\n";
    return 2;
  }
  json out = {{"attack", o.attack}, {"seconds", o.seconds}};
  Probe probe(o);
  OtherToken other(o);
  const auto start = Clock::now();
  if (o.attack == "idle") {
    std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  } else if (o.attack == "slow") {
    attack_slow(o, out);
  } else if (o.attack == "heads") {
    attack_slow(o, out, 15'000);
  } else if (o.attack == "trickle") {
    attack_trickle(o, out);
  } else if (o.attack == "pipeline") {
    attack_pipeline(o, out);
  } else if (o.attack == "methods") {
    attack_methods(o, out);
  } else if (o.attack == "nested") {
    attack_nested(o, out);
  } else if (o.attack == "lists") {
    attack_lists(o, out);
  } else if (o.attack == "follows") {
    attack_follows(o, out);
  } else if (o.attack == "exports") {
    attack_exports(o, out);
  } else {
    std::cerr << "hostile_bench: unknown attack " << o.attack << "\n";
    return 2;
  }
  out["attack_s"] = ms_since(start) / 1000.0;
  other.add_to(out);
  out.update(probe.stop());
  out["alive"] = ::kill(o.pid, 0) == 0;
  std::cout << out.dump() << std::endl;
  return 0;
}
