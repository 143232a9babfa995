#include "kube/kube_client.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace falcon::kube {

std::string kube_server_message(const std::string& body) {
  try {
    const auto j = nlohmann::json::parse(body);
    if (j.is_object() && j.contains("message") && j["message"].is_string()) {
      return j["message"].get<std::string>();
    }
  } catch (const nlohmann::json::exception&) {
  }
  std::string s = body.substr(0, 200);
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

void write_ca_file(const std::filesystem::path& path, const std::string& pem) {
  {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::ostringstream ss;
      ss << in.rdbuf();
      if (ss.str() == pem) return;
    }
  }
  const std::filesystem::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw std::runtime_error(
        fmt::format("cannot write the cluster CA to {}: {}", tmp.string(), std::strerror(errno)));
  }
  const ssize_t n = ::write(fd, pem.data(), pem.size());
  ::close(fd);
  if (n != static_cast<ssize_t>(pem.size()) || std::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    throw std::runtime_error(fmt::format("cannot write the cluster CA to {}", path.string()));
  }
}

namespace {

// Retry-After's delay in seconds (RFC 9110 section 10.2.3's delay-seconds; the Kubernetes API
// server sends no HTTP-date), or nullopt when absent or not a number of seconds.
std::optional<std::chrono::seconds> retry_after(const HttpResponse& resp) {
  const auto value = resp.headers.get("Retry-After");
  if (!value || value->empty() || value->size() > 9) return std::nullopt;
  std::int64_t s = 0;
  for (char c : *value) {
    if (c < '0' || c > '9') return std::nullopt;
    s = s * 10 + (c - '0');
  }
  return std::chrono::seconds(s);
}

}  // namespace

HttpResponse get_retrying_once(HttpClient& http, HttpRequest& req, const Clock& clock,
                               std::chrono::steady_clock::time_point deadline) {
  HttpResponse first;
  std::exception_ptr broke;  // the first try's connection failed before any answer
  try {
    first = http.send(req);
    if (!is_transient_http_status(first.status)) return first;
    if (const auto delay = retry_after(first)) {
      if (clock.steady_now() + *delay >= deadline) return first;
      if (delay->count() > 0) clock.sleep_for(*delay);
    }
  } catch (const HttpTransportError& e) {
    if (e.timed_out() || e.too_large()) throw;
    broke = std::current_exception();
  }
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock.steady_now());
  if (left.count() <= 0) {
    if (broke) std::rethrow_exception(broke);
    return first;
  }
  req.timeout = std::min(req.timeout, left);
  req.connect_timeout = std::min(req.connect_timeout, left);
  return http.send(req);
}

namespace {

std::string status_reason(const std::string& body) {
  try {
    const auto j = nlohmann::json::parse(body);
    if (j.is_object() && j.contains("reason") && j["reason"].is_string()) {
      return j["reason"].get<std::string>();
    }
  } catch (const nlohmann::json::exception&) {
  }
  return "";
}

}  // namespace

KubeClient::KubeClient(KubeClientOptions options)
    : options_(std::move(options)), credentials_(options_.runner, options_.clock) {
  if (!options_.runner || !options_.clock) {
    throw std::invalid_argument("KubeClient: runner and clock must be set");
  }
  target();
}

std::string KubeClient::server() const {
  std::lock_guard lock(mu_);
  return target_ ? target_->kube.server : "";
}

std::shared_ptr<const KubeClient::Target> KubeClient::target() {
  std::error_code ec;
  const auto mtime = std::filesystem::last_write_time(options_.kubeconfig, ec);
  {
    std::lock_guard lock(mu_);
    if (target_ && !ec && target_->mtime == mtime) return target_;
  }
  auto fresh = std::make_shared<Target>();
  fresh->mtime = mtime;
  try {
    fresh->kube = read_kubeconfig(options_.kubeconfig);
    std::string ca_file;
    if (!fresh->kube.ca_pem.empty()) {
      std::filesystem::create_directories(options_.ca_dir);
      ca_file = (options_.ca_dir / "ca.crt").string();
      write_ca_file(ca_file, fresh->kube.ca_pem);
    }
    fresh->http = options_.http_for_ca ? options_.http_for_ca(ca_file)
                                       : make_curl_http_client({.ca_file = ca_file});
  } catch (const std::exception& e) {
    throw KubeError(0, "",
                    fmt::format("kubeconfig {}: {}", options_.kubeconfig.string(), e.what()));
  }
  std::lock_guard lock(mu_);
  if (target_ &&
      (target_->kube.exec != fresh->kube.exec || target_->kube.server != fresh->kube.server)) {
    credentials_.invalidate("manager");
  }
  target_ = fresh;
  return fresh;
}

std::string KubeClient::bearer(const Target& t) {
  if (!t.kube.exec) return t.kube.token;
  try {
    return credentials_.token("manager", *t.kube.exec, t.kube.server, options_.timeout);
  } catch (const std::exception& e) {
    throw KubeError(0, "", fmt::format("credential for {}: {}", t.kube.server, e.what()));
  }
}

HttpResponse KubeClient::send(HttpRequest& req, const std::string& path) {
  for (int attempt = 0;; ++attempt) {
    const auto t = target();
    req.url = t->kube.server + path;
    req.headers.set("Authorization", "Bearer " + bearer(*t));
    HttpResponse resp;
    try {
      // A GET that is not a watch is tried once more when it fails in passing (a watch that
      // breaks is watched again by its caller).
      resp = req.method == "GET" && !req.on_body
                 ? get_retrying_once(*t->http, req, *options_.clock,
                                     options_.clock->steady_now() + req.timeout)
                 : t->http->send(req);
    } catch (const HttpTransportError& e) {
      if (e.too_large()) {
        throw KubeError(0, kTooLarge,
                        fmt::format("Kubernetes API server {}: {}", t->kube.server, e.what()));
      }
      throw KubeError(
          0, e.timed_out() ? kTimedOut : "",
          fmt::format("Kubernetes API server {} is unreachable: {}", t->kube.server, e.what()));
    }
    if (resp.status == 401 && t->kube.exec && attempt == 0) {
      credentials_.invalidate("manager");  // expired early or revoked: one fresh token
      continue;
    }
    if (resp.status != 0 && (resp.status < 200 || resp.status >= 300)) {
      const std::string::size_type q = path.find('?');
      throw KubeError(resp.status, status_reason(resp.body),
                      fmt::format("{} {}{} answered {}: {}", req.method, t->kube.server,
                                  path.substr(0, q), resp.status, kube_server_message(resp.body)));
    }
    return resp;
  }
}

KubeAnswer KubeClient::request(const std::string& method, const std::string& path,
                               const std::string& body, const std::string& content_type) {
  HttpRequest req;
  req.method = method;
  req.body = body;
  req.headers.set("Accept", "application/json");
  if (!content_type.empty()) req.headers.set("Content-Type", content_type);
  req.timeout = options_.timeout;
  req.connect_timeout = std::min(options_.timeout, std::chrono::milliseconds(10'000));
  req.max_body_bytes = kMaxAnswer;
  const HttpResponse resp = send(req, path);
  return {resp.status, resp.body};
}

void KubeClient::watch(const std::string& path,
                       const std::function<bool(std::string_view)>& on_line,
                       const std::function<bool()>& stop, std::chrono::milliseconds timeout) {
  std::string pending;  // a line not complete yet
  bool more = true;
  HttpRequest req;
  req.headers.set("Accept", "application/json");
  req.timeout = timeout;
  req.connect_timeout = std::min(options_.timeout, std::chrono::milliseconds(10'000));
  bool too_long = false;
  req.on_body = [&](std::string_view piece) {
    pending.append(piece);
    if (pending.size() > kMaxWatchLine && pending.find('\n') == std::string::npos) {
      too_long = true;  // a broken or hostile server: no event is this large
      return false;
    }
    std::string::size_type start = 0;
    for (auto nl = pending.find('\n', start); nl != std::string::npos;
         nl = pending.find('\n', start)) {
      const std::string_view line(pending.data() + start, nl - start);
      start = nl + 1;
      if (!line.empty() && !on_line(line)) {
        more = false;
        break;
      }
    }
    pending.erase(0, start);
    return more;
  };
  req.cancelled = stop;
  try {
    send(req, path);
  } catch (const KubeError& e) {
    // A watch that ran to its own timeout is a watch that ended: the caller watches again.
    if (!too_long && e.status() == 0 && e.reason() == kTimedOut) return;
    if (!too_long) throw;
  }
  if (too_long) {
    throw KubeError(
        0, "", fmt::format("the watch {} sent a line longer than {} bytes", path, kMaxWatchLine));
  }
  if (more && !pending.empty()) on_line(pending);
}

bool ListCursor::advance(const std::string& next) {
  const bool fresh = given_.fresh(next);
  if (next.empty()) return false;
  if (given_.pages() >= kMaxListPages) {
    throw KubeError(
        0, kTooLarge,
        fmt::format("{} goes on past {} pages: not following it further", what_, kMaxListPages));
  }
  if (!fresh) {
    throw KubeError(0, "",
                    fmt::format("{} does not advance: page {} gave a continue token it gave "
                                "before",
                                what_, given_.pages()));
  }
  token_ = next;
  return true;
}

}  // namespace falcon::kube
