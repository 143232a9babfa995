// The HTTP side of `falcon serve`: every request passes the same checks (route, Host, browser
// safety, auth, the caller's share), then its route runs; errors are mapped to statuses in one
// place; metrics have labels from closed sets. The routes are in api_routes.cc, the HTTP
// server in http_server.cc.
#include "serve/api_server.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <system_error>
#include <thread>

#include "falcon/errors.h"
#include "falcon/exit_codes.h"
#include "falcon/values.h"
#include "falcon/workload_manager.h"
#include "serve/api_server_impl.h"
#include "serve/supervisor.h"

namespace falcon {

using nlohmann::json;
using serve::HttpError;
using serve::Refusal;
using serve::Request;
using serve::Response;

namespace {

bool is_mutation(const std::string& method) { return method != "GET" && method != "HEAD"; }

// The method as a metric label: one of the methods served, else "other" (a label set a client
// cannot grow).
std::string method_label(const Request& req) {
  if (req.head) return "HEAD";
  return serve::is_known_method(req.method) ? req.method : "other";
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// "host:port" as a Host header names it, IPv6 in brackets.
std::string host_port(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos && host.front() != '[';
  return lower(fmt::format("{}{}{}:{}", v6 ? "[" : "", host, v6 ? "]" : "", port));
}

// The addresses of this machine's interfaces, for a server listening on all of them.
std::vector<std::string> interface_addresses() {
  std::vector<std::string> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    const int family = a->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    char text[NI_MAXHOST];
    const socklen_t size = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    if (::getnameinfo(a->ifa_addr, size, text, sizeof text, nullptr, 0, NI_NUMERICHOST) == 0) {
      std::string address = text;
      if (const auto pct = address.find('%'); pct != std::string::npos) address.erase(pct);
      out.push_back(address);
    }
  }
  ::freeifaddrs(list);
  return out;
}

std::string bearer_token(const Request& req) {
  const std::string_view header = req.header("Authorization").value_or("");
  constexpr std::string_view kPrefix = "Bearer ";
  if (header.size() > kPrefix.size() && header.substr(0, kPrefix.size()) == kPrefix) {
    return std::string(header.substr(kPrefix.size()));
  }
  return "";
}

std::chrono::milliseconds seconds_to_ms(double s) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(s * 1000.0));
}

}  // namespace

// --- ShareLimiter and ExportTracker.

std::shared_ptr<void> ShareLimiter::try_acquire(const std::string& key) {
  {
    std::lock_guard lock(mutex_);
    int& held = held_[key];
    if (held >= per_key_) return nullptr;
    ++held;
  }
  static char held;  // the handle points somewhere: a null one would read as "refused"
  return std::shared_ptr<void>(&held,
                               [self = shared_from_this(), key](void*) { self->release(key); });
}

void ShareLimiter::release(const std::string& key) {
  std::lock_guard lock(mutex_);
  if (const auto it = held_.find(key); it != held_.end() && --it->second <= 0) held_.erase(it);
}

std::optional<bool> ExportTracker::reserve() {
  std::lock_guard lock(mutex_);
  if (stopped_) return std::nullopt;
  const std::size_t admitted = running_.size() + reserved_;
  const std::size_t waiting =
      queue_.size() + (admitted > max_running_ ? admitted - max_running_ : 0);
  if (admitted >= max_running_ && waiting >= max_queued_) return std::nullopt;
  ++reserved_;
  return admitted < max_running_ && queue_.empty();
}

void ExportTracker::unreserve() {
  std::lock_guard lock(mutex_);
  --reserved_;
}

bool ExportTracker::place(std::int64_t id, std::function<void()> job) {
  std::lock_guard lock(mutex_);
  --reserved_;
  if (stopped_) return false;
  if (running_.size() < max_running_ && queue_.empty()) return start_locked(id, std::move(job));
  queue_.emplace_back(id, std::move(job));
  return true;
}

bool ExportTracker::start_locked(std::int64_t id, std::function<void()> job) {
  running_.insert(id);
  try {
    std::thread(std::move(job)).detach();
    return true;
  } catch (const std::system_error&) {  // no thread to be had
    running_.erase(id);
    return false;
  }
}

void ExportTracker::end(std::int64_t id, const std::function<void()>& record) {
  std::lock_guard lock(mutex_);
  if (abandoned_.contains(id)) return;
  record();
  running_.erase(id);
  // The next one waiting takes the slot; one that cannot get a thread waits for the next end.
  while (!stopped_ && !queue_.empty() && running_.size() < max_running_) {
    auto next = std::move(queue_.front());
    queue_.pop_front();
    if (!start_locked(next.first, next.second)) {
      queue_.push_front(std::move(next));
      break;
    }
  }
  changed_.notify_all();
}

std::size_t ExportTracker::position(std::int64_t id) {
  std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < queue_.size(); ++i) {
    if (queue_[i].first == id) return i + 1;
  }
  return 0;
}

std::size_t ExportTracker::running() {
  std::lock_guard lock(mutex_);
  return running_.size();
}

std::size_t ExportTracker::queued() {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

std::vector<std::int64_t> ExportTracker::stop(std::chrono::milliseconds grace) {
  std::unique_lock lock(mutex_);
  stopped_ = true;
  std::vector<std::int64_t> given_up;
  for (const auto& [id, job] : queue_) given_up.push_back(id);
  queue_.clear();
  changed_.wait_for(lock, grace, [&] { return running_.empty(); });
  for (const std::int64_t id : running_) {
    abandoned_.insert(id);
    given_up.push_back(id);
  }
  return given_up;
}

std::size_t ExportTracker::abandoned() {
  std::lock_guard lock(mutex_);
  return abandoned_.size();
}

// --- ControlPlane's defaults.

ProbeSnapshot ControlPlane::fresh_probe(const std::string& cluster) {
  if (auto probe = cached_probe(cluster)) return *probe;
  throw ClusterUnreachableError(cluster, "not probed yet");
}

std::vector<BreakerReport> ControlPlane::breakers(const std::string&) const { return {}; }

ClusterHealth ControlPlane::cluster_health(const std::string& cluster) {
  ClusterHealth out;
  out.probe = fresh_probe(cluster).result;
  out.breakers = breakers(cluster);  // after this probe fed them
  return out;
}

Decision ControlPlane::select_brief(const std::string& accelerator_type) {
  Decision out = select_explained(accelerator_type);
  out.brief = true;
  return out;
}

Decision ControlPlane::select(const SelectRequest& request) {
  if (request.policy) {
    throw InvalidValueError("--policy", "a server decides under its own selection.policy");
  }
  return request.explain ? select_explained(request.accelerator_type)
                         : select_brief(request.accelerator_type);
}

Decision ControlPlane::select_excluding(const std::string& accelerator_type,
                                        const std::vector<std::string>& excluded,
                                        const PlacementHints&) {
  Decision outcome = select_explained(accelerator_type);
  if (std::find(excluded.begin(), excluded.end(), outcome.selection.selected_cluster) !=
      excluded.end()) {
    throw NoAvailableClusterError(fmt::format("no cluster for {} but the excluded {}",
                                              accelerator_type, outcome.selection.selected_cluster),
                                  accelerator_type, outcome.selection.probe_results);
  }
  return outcome;
}

std::optional<Decision> ControlPlane::prepare_repeat(const std::string&) { return std::nullopt; }

void ControlPlane::record_cluster_failure(const std::string&) {}

std::optional<FenceTicket> ControlPlane::advance_fence(const std::string&) { return std::nullopt; }

void ControlPlane::check_export(const WorkloadHandle&,
                                const std::optional<std::vector<int>>&) const {}

// --- The server.

ApiServer::Impl::Impl(ApiServerOptions o) : options(std::move(o)) {
  if (!options.control) throw ApiServerError("ApiServer: no control plane");
  if (!options.store) throw ApiServerError("ApiServer: no state store");
  if (!options.clock) options.clock = make_system_clock();
  tokens = options.tokens;
  const ServeLimits& l = options.limits;
  request_shares = std::make_shared<ShareLimiter>(l.max_requests_per_token);
  stream_shares = std::make_shared<ShareLimiter>(l.max_streams_per_token);
  exports = std::make_shared<ExportTracker>(static_cast<std::size_t>(l.max_exports),
                                            static_cast<std::size_t>(l.max_queued_exports));
  for (const std::string& origin : options.allowed_origins) allowed_origins.insert(lower(origin));
  add_routes();

  serve::HttpServerOptions h;
  h.limits.max_target_bytes = static_cast<std::size_t>(l.max_target_bytes);
  h.limits.max_header_bytes = static_cast<std::size_t>(l.max_header_bytes);
  h.limits.max_header_fields = static_cast<std::size_t>(l.max_header_fields);
  h.limits.max_body_bytes = static_cast<std::size_t>(l.max_body_bytes);
  h.max_connections = static_cast<std::size_t>(l.connection_limit(!options.tls_cert.empty()));
  h.max_connections_per_address = static_cast<std::size_t>(l.max_connections_per_address);
  h.max_handshakes = static_cast<std::size_t>(l.max_tls_handshakes);
  h.idle_timeout = seconds_to_ms(l.idle_timeout_s);
  h.header_timeout = seconds_to_ms(l.header_timeout_s);
  h.body_timeout = seconds_to_ms(l.body_timeout_s);
  h.write_timeout = seconds_to_ms(l.write_timeout_s);
  h.io_threads = std::max(1, options.loops);
  h.workers = std::max(2, options.threads);
  h.max_queued = static_cast<std::size_t>(l.max_queued_requests);
  h.max_streams = static_cast<std::size_t>(l.max_streams);
  h.max_body_bytes_in_flight = static_cast<std::size_t>(l.max_body_bytes_in_flight);
  h.max_header_bytes_in_flight = static_cast<std::size_t>(l.max_header_bytes_in_flight);
  h.on_head = [this](Request& req) { return on_head(req); };
  h.on_request = [this](Request& req, Response& res) { return on_request(req, res); };
  h.handle = [this](Request& req, Response& res) { run(req, res); };
  h.refuse = [this](const Request& req, Response& res, const Refusal& why) {
    refuse(req, res, why);
  };
  http = std::make_unique<serve::HttpServer>(std::move(h));
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    throw ApiServerError("TLS needs both --tls-cert and --tls-key");
  }
  if (!options.tls_cert.empty()) {
    try {
      http->use_tls(options.tls_cert, options.tls_key);
    } catch (const std::exception& e) {
      throw ApiServerError(e.what());
    }
  }
}

void ApiServer::Impl::route(const std::string& method, const std::string& path,
                            RouteHandler handler, RouteOptions route_options) {
  const std::size_t index = router.add(method, path, route_options.rest);
  routes.resize(std::max(routes.size(), index + 1));
  routes[index] = {std::move(handler), route_options};
}

// Before the body is read: the route, the Host, the browser checks, the token. What fails here
// costs no more than the request's head.
std::optional<Refusal> ApiServer::Impl::on_head(Request& req) {
  const auto match = router.match(req.method, req.segments, req.params);
  if (match.kind == serve::Router::Match::kNoRoute) {
    return Refusal{404, fmt::format("no route {} {}", method_label(req), printable(req.path, 200)),
                   "RouteNotFound"};
  }
  if (match.kind == serve::Router::Match::kWrongMethod) {
    Refusal r{405,
              fmt::format("{} takes {}", printable(req.path, 200), fmt::join(match.allowed, ", ")),
              "MethodNotAllowed"};
    r.headers.set("Allow", fmt::format("{}", fmt::join(match.allowed, ", ")));
    return r;
  }
  req.route = static_cast<int>(match.route);
  const Route& r = routes[match.route];
  if (r.options.checks_host) {
    if (auto why = check_host(req)) return why;
  }
  if (auto why = check_browser_safety(req)) return why;
  return authorize(req, r);
}

// DNS rebinding: a page of evil.example whose name now resolves to this address reaches the API
// with Host: evil.example. Only the names this server is reached by are answered.
std::optional<Refusal> ApiServer::Impl::check_host(const Request& req) const {
  if (any_host) return std::nullopt;
  const auto host = req.header("Host");
  if (!host) return std::nullopt;  // HTTP/1.0 without Host: no browser sends that
  std::string h = lower(*host);
  const bool bracketed = !h.empty() && h.front() == '[';
  const std::size_t colon = h.rfind(':');
  const bool has_port = colon != std::string::npos && (!bracketed || colon > h.find(']'));
  if (!has_port) h += http->tls() ? ":443" : ":80";
  if (allowed_hosts.contains(h)) return std::nullopt;
  return Refusal{421,
                 fmt::format("this server does not answer for Host {} (serve.allowed_hosts)",
                             quote_value(*host, 100)),
                 "MisdirectedRequest"};
}

// A page on another origin can make a browser send a "simple" request (a form's POST) with the
// user's network position: a state-changing request must carry JSON (which a form cannot send
// and another origin cannot without the CORS preflight this server never grants), and an Origin
// when it has one that is this server's own or listed in serve.allowed_origins.
std::optional<Refusal> ApiServer::Impl::check_browser_safety(const Request& req) const {
  if (!is_mutation(req.method)) return std::nullopt;
  const auto type = req.header("Content-Type");
  const auto length = req.header("Content-Length");
  const bool has_body = length && length->find_first_not_of('0') != std::string_view::npos;
  if (type || has_body || req.method != "DELETE") {
    const std::string t = lower(type.value_or(""));
    if (!t.starts_with("application/json") || (t.size() > 16 && t[16] != ';' && t[16] != ' ')) {
      return Refusal{415, fmt::format("{} needs Content-Type: application/json", req.method),
                     "UnsupportedMediaType"};
    }
  }
  const auto origin = req.header("Origin");
  if (!origin) return std::nullopt;
  const std::string o = lower(*origin);
  if (allowed_origins.contains(o)) return std::nullopt;
  const std::string own = fmt::format("{}://{}", http->tls() ? "https" : "http",
                                      lower(req.header("Host").value_or("")));
  if (o == own) return std::nullopt;
  return Refusal{403,
                 fmt::format("requests from origin {} may not change anything here "
                             "(serve.allowed_origins)",
                             quote_value(*origin, 100)),
                 "ForbiddenOrigin"};
}

std::optional<Refusal> ApiServer::Impl::authorize(Request& req, const Route& r) const {
  const auto table = current_tokens();
  if (!table) {
    req.principal = "address:" + req.peer;
    return std::nullopt;
  }
  const std::string token = bearer_token(req);
  const auto match = token.empty() ? std::nullopt : table->match(token);
  req.principal = match ? "token:" + match->id : "address:" + req.peer;
  if (!r.options.needs_token) return std::nullopt;
  if (token.empty()) {
    Refusal why{401, "this server needs a bearer token (Authorization: Bearer <token>)",
                "Unauthorized"};
    why.headers.set("WWW-Authenticate", "Bearer");
    return why;
  }
  if (!match) {
    Refusal why{401, "unknown bearer token", "Unauthorized"};
    why.headers.set("WWW-Authenticate", "Bearer");
    return why;
  }
  if (is_mutation(req.method) && match->role != TokenRole::kOperate) {
    return Refusal{403,
                   fmt::format("{} {} needs a token with role operate", req.method,
                               router.path(static_cast<std::size_t>(req.route))),
                   "Forbidden"};
  }
  return std::nullopt;
}

// On the I/O thread, the body read: routes that never block are answered here, and a brief
// select that repeats the standing decision; the rest go to a worker within the caller's share.
bool ApiServer::Impl::on_request(Request& req, Response& res) {
  const auto index = static_cast<std::size_t>(req.route);
  if (routes[index].options.on_io_thread) {
    run(req, res);
    return true;
  }
  if (index == select_route && req.query.empty() && answer_repeat(req, res)) return true;
  req.hold = request_shares->try_acquire(req.principal);
  if (!req.hold) {
    const auto start = std::chrono::steady_clock::now();
    const std::string message = fmt::format(
        "this caller has {} requests running already (serve.limits."
        "max_requests_per_token); try again shortly",
        options.limits.max_requests_per_token);
    serve::send_error(res, 429, "TooManyRequests", message);
    res.headers.set("Retry-After", "1");
    finished(req, 429,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
             message);
    return true;
  }
  return false;
}

// A route's handler with the error mapping, the metrics and the access log.
void ApiServer::Impl::run(Request& req, Response& res) {
  const auto start = std::chrono::steady_clock::now();
  std::string error;
  try {
    routes[static_cast<std::size_t>(req.route)].handler(req, res);
  } catch (...) {
    res = Response{};
    error = answer_error(res);
  }
  // A stream has a share of its own (serve.limits.max_streams_per_token): the worker's share is
  // given back now, not when the stream ends.
  if (res.stream) req.hold.reset();
  finished(req, res.status,
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), error);
}

void ApiServer::Impl::refuse(const Request& req, Response& res, const Refusal& why) {
  serve::send_error(res, why.status,
                    why.type.empty() ? serve::error_type_for_status(why.status) : why.type,
                    why.message);
  finished(req, why.status, 0, why.message);
}

void ApiServer::Impl::finished(const Request& req, int status, double seconds,
                               const std::string& error) {
  const std::string route =
      req.route >= 0 ? router.path(static_cast<std::size_t>(req.route)) : "(unmatched)";
  const std::string method = method_label(req);
  {
    std::lock_guard lock(metrics_mutex);
    ++requests[{route, method, status}];
    if (req.route >= 0) latency[route].observe(seconds);
  }
  if (options.on_request) {
    options.on_request({method, route, printable(req.path, 400), status, seconds, error});
  }
}

// Answers the exception in flight with its status and the CLI's error shape; returns the
// message for the log.
std::string ApiServer::Impl::answer_error(Response& res) {
  try {
    throw;
  } catch (const HttpError& e) {
    serve::send_error(res, e.status(), e.type(), e.what(), e.details());
    for (const auto& [name, value] : e.headers().items()) res.headers.set(name, value);
    return e.what();
  } catch (const FalconError& e) {
    // The status from the one table the CLI and the remote client read too (exit_codes.h): by
    // the error's type, never by its text (a duplicate name is a WorkloadExistsError).
    const ErrorAnswer* answer = find_error_answer(e.type_name());
    const int status = answer ? answer->http_status : 500;
    if (dynamic_cast<const StateStoreError*>(&e) != nullptr) {
      // The database down or refusing writes (a restart, a full disk): the request may succeed
      // shortly, and the reason is the database's own.
      res.headers.set("Retry-After", "1");
    }
    json details = json::object();
    e.add_details(details);
    serve::send_error(res, status, e.type_name(), e.what(), details);
    return e.what();
  } catch (const std::invalid_argument& e) {
    serve::send_error(res, 400, "UsageError", e.what());
    return e.what();
  } catch (const json::exception& e) {
    serve::send_error(res, 400, "UsageError", e.what());
    return e.what();
  } catch (const std::exception& e) {
    const std::string message = fmt::format("internal error: {}", e.what());
    serve::send_error(res, 500, "InternalError", message);
    return message;
  } catch (...) {
    serve::send_error(res, 500, "InternalError", "internal error");
    return "internal error";
  }
}

void ApiServer::Impl::count_selection(const std::string& outcome) {
  std::lock_guard lock(metrics_mutex);
  ++selections[outcome];
}

// --- ApiServer.

ApiServer::ApiServer(ApiServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

ApiServer::~ApiServer() { stop(std::chrono::milliseconds(0)); }

int ApiServer::bind(const std::string& host, int port) {
  int bound = 0;
  try {
    bound = impl_->http->bind(host, port);
  } catch (const std::exception& e) {
    throw ApiServerError(fmt::format("{} (address in use or not local?)", e.what()));
  }
  const std::string address = impl_->http->bound_address();
  impl_->loopback = serve::HttpServer::is_loopback_address(address);
  // The names this server answers for: the listen host as given and the address it resolved
  // to; on loopback the usual names of loopback; on every interface, each interface's address.
  auto& hosts = impl_->allowed_hosts;
  hosts.insert(host_port(host, bound));
  hosts.insert(host_port(address, bound));
  if (impl_->loopback) {
    for (const char* h : {"localhost", "127.0.0.1", "::1"}) hosts.insert(host_port(h, bound));
  }
  if (address == "0.0.0.0" || address == "::") {
    for (const std::string& a : interface_addresses()) hosts.insert(host_port(a, bound));
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) == 0) hosts.insert(host_port(name, bound));
  }
  for (const std::string& h : impl_->options.allowed_hosts) {
    if (h == "*") {
      impl_->any_host = true;
      continue;
    }
    const bool bracketed = !h.empty() && h.front() == '[';
    const std::size_t colon = h.rfind(':');
    const bool has_port = colon != std::string::npos && (!bracketed || colon > h.find(']'));
    hosts.insert(has_port ? lower(h) : host_port(h, bound));
  }
  impl_->bound = true;
  return bound;
}

bool ApiServer::loopback() const { return impl_->loopback; }

void ApiServer::serve() {
  if (!impl_->bound) throw ApiServerError("ApiServer::serve: bind() first");
  if (impl_->stopping) return;
  impl_->http->serve();
}

void ApiServer::stop(std::chrono::milliseconds grace) {
  if (impl_->stopping.exchange(true)) return;
  impl_->stop_flag->store(true);
  impl_->http->stop();
  // Exports cannot be interrupted: the queued ones fail now; the running ones get the grace,
  // then are marked failed too.
  const std::vector<std::int64_t> given_up = impl_->exports->stop(grace);
  impl_->cancel_exports->store(true);  // those still running stop their copies and clean up
  for (const std::int64_t id : given_up) {
    try {
      impl_->options.store->finish_export(
          id, kExportFailed,
          json({{"error", {{"type", "Stopped"}, {"message", "server stopped"}}}}).dump(),
          impl_->options.clock->now());
    } catch (const std::exception&) {
      // Nothing more to do on the way out.
    }
  }
}

bool ApiServer::stopping() const { return impl_->stopping; }

std::size_t ApiServer::abandoned_exports() const { return impl_->exports->abandoned(); }

void ApiServer::set_tokens(std::shared_ptr<const TokenTable> tokens) {
  std::lock_guard lock(impl_->tokens_mutex);
  impl_->tokens = std::move(tokens);
}

void ApiServer::reload_tls(const std::string& cert_file, const std::string& key_file) {
  try {
    impl_->http->use_tls(cert_file, key_file);
  } catch (const std::exception& e) {
    throw ApiServerError(e.what());
  }
}

std::vector<std::string> ApiServer::routes() const {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < impl_->router.size(); ++i) {
    out.push_back(impl_->router.method(i) + " " + impl_->router.path(i));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string ApiServer::metrics_text() const { return impl_->metrics(); }

}  // namespace falcon
