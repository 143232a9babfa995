// The HTTP side of `falcon serve`: routes, request parsing and limits, auth, error mapping,
// streaming of logs, background exports and metrics.
#include "falcon/api_server.h"

#include <httplib.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "falcon/errors.h"
#include "falcon/fabric.h"
#include "falcon/gcs_uri.h"
#include "falcon/state_store.h"
#include "falcon/supervisor.h"
#include "falcon/workload_manager.h"
#include "serve/dashboard_files.h"
#include "serve/event_server.h"
#include "serve/prometheus_text.h"
#include "serve/select_answer.h"
#include "util/time_format.h"

namespace falcon {

using nlohmann::json;

namespace {

// An error the API answers itself (bad request, auth, unknown id), with its HTTP status.
class HttpError : public std::runtime_error {
 public:
  HttpError(int status, std::string type, const std::string& message, json details = json::object())
      : std::runtime_error(message),
        status_(status),
        type_(std::move(type)),
        details_(std::move(details)) {}
  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const json& details() const { return details_; }

 private:
  int status_;
  std::string type_;
  json details_;
};

HttpError bad_request(const std::string& message) { return {400, "UsageError", message}; }

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace) + "\n",
                  "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& type,
                const std::string& message, json details = json::object()) {
  json error = {{"type", type}, {"message", message}};
  for (auto& [k, v] : details.items()) error[k] = v;
  send_json(res, status, {{"error", error}});
}

// --- Request parsing: every problem names the field or parameter.

json parse_body(const httplib::Request& req, const std::set<std::string>& allowed) {
  json body;
  try {
    body = json::parse(req.body);
  } catch (const json::parse_error& e) {
    throw bad_request(fmt::format("malformed JSON in the request body: {}", e.what()));
  }
  if (!body.is_object()) throw bad_request("the request body must be a JSON object");
  for (const auto& [key, value] : body.items()) {
    if (!allowed.contains(key)) {
      throw bad_request(fmt::format("unknown field '{}' in the request body (known: {})", key,
                                    fmt::join(allowed, ", ")));
    }
  }
  return body;
}

std::optional<std::string> string_field(const json& obj, const std::string& field,
                                        const std::string& where, bool required) {
  const auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) {
    if (required) throw bad_request(fmt::format("{}{}: required", where, field));
    return std::nullopt;
  }
  if (!it->is_string()) throw bad_request(fmt::format("{}{}: must be a string", where, field));
  return it->get<std::string>();
}

// The body of POST /v1/select: {"accelerator_type", "explain"?}. Throws bad_request.
struct SelectRequest {
  std::string accelerator;
  bool explain = false;
};
SelectRequest parse_select_body(const httplib::Request& req) {
  const json body = parse_body(req, {"accelerator_type", "explain"});
  SelectRequest out;
  out.accelerator = *string_field(body, "accelerator_type", "", true);
  if (const auto it = body.find("explain"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) throw bad_request("explain: must be true or false");
    out.explain = it->get<bool>();
  }
  return out;
}

std::vector<std::string> string_list_field(const json& obj, const std::string& field,
                                           const std::string& where, bool required) {
  const auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) {
    if (required) throw bad_request(fmt::format("{}{}: required", where, field));
    return {};
  }
  if (!it->is_array()) {
    throw bad_request(fmt::format("{}{}: must be an array of strings", where, field));
  }
  std::vector<std::string> out;
  for (const auto& item : *it) {
    if (!item.is_string()) {
      throw bad_request(fmt::format("{}{}: must be an array of strings", where, field));
    }
    out.push_back(item.get<std::string>());
  }
  return out;
}

// The body's "managed": {"max_recoveries", "stable_after_s", "recover_on_failure"}, each
// optional (defaults: the server's supervisor settings are applied by the caller).
ManageOptions parse_managed(const json& obj, const SupervisorSettings& defaults) {
  static const std::set<std::string> kFields = {"max_recoveries", "stable_after_s",
                                                "recover_on_failure"};
  if (!obj.is_object()) throw bad_request("managed: must be a JSON object");
  for (const auto& [key, value] : obj.items()) {
    if (!kFields.contains(key)) {
      throw bad_request(
          fmt::format("unknown field 'managed.{}' (known: {})", key, fmt::join(kFields, ", ")));
    }
  }
  ManageOptions o;
  o.max_recoveries = defaults.max_recoveries;
  o.stable_after = std::chrono::milliseconds(
      static_cast<std::int64_t>(std::llround(defaults.stable_after_s * 1000.0)));
  if (const auto it = obj.find("max_recoveries"); it != obj.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<std::int64_t>() < 0 || it->get<std::int64_t>() > 1000) {
      throw bad_request("managed.max_recoveries: must be an integer 0..1000");
    }
    o.max_recoveries = it->get<int>();
  }
  if (const auto it = obj.find("stable_after_s"); it != obj.end() && !it->is_null()) {
    if (!it->is_number() || it->get<double>() < 0 || it->get<double>() > 7 * 86400.0) {
      throw bad_request("managed.stable_after_s: must be a number of seconds 0..604800");
    }
    o.stable_after = std::chrono::milliseconds(
        static_cast<std::int64_t>(std::llround(it->get<double>() * 1000)));
  }
  if (const auto it = obj.find("recover_on_failure"); it != obj.end() && !it->is_null()) {
    if (!it->is_boolean()) throw bad_request("managed.recover_on_failure: must be true or false");
    o.recover_on_failure = it->get<bool>();
  }
  return o;
}

WorkloadSpec parse_spec(const json& obj) {
  static const std::set<std::string> kFields = {
      "name",     "docker_image", "command",   "accelerator_type",
      "priority", "env",          "namespace", "extra_args"};
  if (!obj.is_object()) throw bad_request("spec: must be a JSON object");
  for (const auto& [key, value] : obj.items()) {
    if (!kFields.contains(key)) {
      throw bad_request(
          fmt::format("unknown field 'spec.{}' (known: {})", key, fmt::join(kFields, ", ")));
    }
  }
  WorkloadSpec spec;
  spec.name = *string_field(obj, "name", "spec.", true);
  spec.docker_image = *string_field(obj, "docker_image", "spec.", true);
  spec.command = string_list_field(obj, "command", "spec.", true);
  spec.accelerator_type = *string_field(obj, "accelerator_type", "spec.", true);
  if (auto p = string_field(obj, "priority", "spec.", false)) spec.priority = *p;
  if (const auto it = obj.find("env"); it != obj.end() && !it->is_null()) {
    if (!it->is_object()) throw bad_request("spec.env: must be an object of strings");
    for (const auto& [k, v] : it->items()) {
      if (!v.is_string()) throw bad_request(fmt::format("spec.env.{}: must be a string", k));
      spec.env[k] = v.get<std::string>();
    }
  }
  spec.namespace_ = string_field(obj, "namespace", "spec.", false);
  spec.extra_args = string_list_field(obj, "extra_args", "spec.", false);
  return spec;
}

// Query parameters: unknown ones are refused, so a typo is not silently ignored.
void check_params(const httplib::Request& req, const std::set<std::string>& allowed) {
  for (const auto& [key, value] : req.params) {
    if (!allowed.contains(key)) {
      throw bad_request(
          allowed.empty() ? fmt::format("unknown query parameter '{}' (this route takes none)", key)
                          : fmt::format("unknown query parameter '{}' (known: {})", key,
                                        fmt::join(allowed, ", ")));
    }
  }
}

std::optional<std::string> param(const httplib::Request& req, const std::string& name) {
  if (!req.has_param(name.c_str())) return std::nullopt;
  return req.get_param_value(name.c_str());
}

std::optional<std::int64_t> int_param(const httplib::Request& req, const std::string& name,
                                      std::int64_t min, std::int64_t max) {
  const auto text = param(req, name);
  if (!text) return std::nullopt;
  std::int64_t value = 0;
  const bool digits = !text->empty() && text->size() <= 18 &&
                      text->find_first_not_of("0123456789") == std::string::npos;
  if (digits) value = std::stoll(*text);
  if (!digits || value < min || value > max) {
    throw bad_request(fmt::format("query parameter {}: must be an integer {}..{}, got '{}'", name,
                                  min, max, text->substr(0, 40)));
  }
  return value;
}

bool bool_param(const httplib::Request& req, const std::string& name) {
  const auto text = param(req, name);
  if (!text) return false;
  if (*text == "true" || *text == "1" || text->empty()) return true;
  if (*text == "false" || *text == "0") return false;
  throw bad_request(fmt::format("query parameter {}: must be true or false, got '{}'", name,
                                text->substr(0, 40)));
}

std::int64_t id_from_path(const std::string& text, const std::string& what) {
  if (text.empty() || text.size() > 18 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    throw HttpError(404, "NotFound", fmt::format("no {} '{}'", what, text.substr(0, 40)));
  }
  return std::stoll(text);
}

StoreTime time_param(const std::string& name, const std::string& text, StoreTime now) {
  try {
    const std::string resolved = resolve_since(text, now);
    if (auto t = parse_rfc3339(resolved)) return *t;
  } catch (const std::invalid_argument& e) {
    throw bad_request(fmt::format("query parameter {}: {}", name, e.what()));
  }
  throw bad_request(fmt::format("query parameter {}: not a time: '{}'", name, text.substr(0, 40)));
}

bool is_mutation(const std::string& method) { return method != "GET" && method != "HEAD"; }

// Routes that need no token: the probes of a load balancer, and the dashboard's files (HTML,
// CSS and scripts, the same for everyone and holding no data: every call they make for data
// carries the token the user gave the page), and /v1/whoami, which tells the page whether it
// needs a token and what the one it has may do (no 401 in the browser's console for asking).
bool is_public_route(const std::string& path) {
  return path == "/healthz" || path == "/readyz" || path == "/" || path == "/ui/{path}" ||
         path == "/v1/whoami";
}

std::string bearer_token(const httplib::Request& req) {
  const std::string header = req.get_header_value("Authorization");
  constexpr std::string_view kPrefix = "Bearer ";
  if (header.size() > kPrefix.size() && header.compare(0, kPrefix.size(), kPrefix) == 0) {
    return header.substr(kPrefix.size());
  }
  return "";
}

json submission_json(const SubmissionRow& row) {
  json j = {{"id", row.id},
            {"handle", row.handle},
            {"accelerator_type", row.accelerator_type},
            {"device_class", row.device_class},
            {"project", row.project},
            {"zone", row.zone},
            {"cluster_id", row.cluster_id},
            {"docker_image", row.docker_image},
            {"priority", row.priority},
            {"selection_id", row.selection_id != 0 ? json(row.selection_id) : json(nullptr)},
            {"state", row.state ? json(*row.state) : json(nullptr)},
            {"state_observed_at",
             row.state_observed_at ? json(format_iso8601(*row.state_observed_at)) : json(nullptr)}};
  if (row.spec) j["spec"] = *row.spec;
  return j;
}

json probe_record_json(const ProbeRecord& p) {
  json extra = json::parse(p.extra_json, nullptr, false);
  return {{"id", p.id},
          {"result", p.result},
          {"backend", p.backend},
          {"duration_ms", p.duration_ms},
          {"extra", extra.is_discarded() ? json::object() : extra}};
}

json export_json(const ExportRecord& e) {
  auto parsed = [](const std::string& text) {
    json j = json::parse(text, nullptr, false);
    return j.is_discarded() ? json(text) : j;
  };
  return {{"id", e.id},
          {"workload", e.workload},
          {"cluster", e.cluster},
          {"dest", e.dest},
          {"state", e.state},
          {"progress", parsed(e.progress_json)},
          {"result", parsed(e.result_json)},
          {"started_at", format_iso8601(e.started_at)},
          {"finished_at", e.finished_at ? json(format_iso8601(*e.finished_at)) : json(nullptr)}};
}

// One route as registered: for the route table, metrics and the access log.
struct Route {
  std::string method;
  std::string path;  // OpenAPI spelling: /v1/workloads/{cluster}/{name}
  std::regex pattern;
  std::function<void(const httplib::Request&, httplib::Response&)> handler;
};

// A brief POST /v1/select answered on the event loop: a repeat prepared there, recorded with
// the others of the loop's pass in one commit.
struct LoopSelect {
  std::chrono::steady_clock::time_point start;
  SelectOutcome outcome;
};

struct RequestCounters {
  std::map<std::tuple<std::string, std::string, int>, std::uint64_t> requests;  // route, method,
                                                                                // status
  std::map<std::string, serve::LatencyHistogram> latency;                       // route
  std::map<std::string, std::uint64_t> selections;                              // outcome
};

// Background exports: counted so that stop() can wait for them; shared with their threads so
// that a thread outliving the server (after the grace) touches nothing of it.
struct ExportTracker {
  std::mutex mutex;
  std::condition_variable changed;
  std::set<std::int64_t> running;
  // Exports stop() marked failed after the grace: their thread must not record an end any more.
  std::set<std::int64_t> abandoned;
};

}  // namespace

ProbeSnapshot ControlPlane::fresh_probe(const std::string& cluster) {
  if (auto probe = cached_probe(cluster)) return *probe;
  throw ClusterUnreachableError(cluster, "not probed yet");
}

std::vector<BreakerReport> ControlPlane::breakers(const std::string&) const { return {}; }

SelectOutcome ControlPlane::select_brief(const std::string& accelerator_type) {
  return select(accelerator_type);
}

SelectOutcome ControlPlane::select_excluding(const std::string& accelerator_type,
                                             const std::vector<std::string>& excluded,
                                             const PlacementHints&) {
  SelectOutcome outcome = select(accelerator_type);
  if (std::find(excluded.begin(), excluded.end(), outcome.selection.selected_cluster) !=
      excluded.end()) {
    throw NoAvailableClusterError(fmt::format("no cluster for {} but the excluded {}",
                                              accelerator_type, outcome.selection.selected_cluster),
                                  accelerator_type, outcome.selection.probe_results);
  }
  return outcome;
}

std::optional<SelectOutcome> ControlPlane::prepare_repeat(const std::string&) {
  return std::nullopt;
}

void ControlPlane::record_repeats(const std::vector<SelectOutcome*>&) {}

void ControlPlane::record_cluster_failure(const std::string&) {}

struct ApiServer::Impl {
  ApiServerOptions options;
  // Plain HTTP: the event-driven server. HTTPS: cpp-httplib's (a thread per connection).
  std::unique_ptr<serve::EventServer> event_server;
  std::unique_ptr<httplib::Server> tls_server;
  std::vector<Route> routes;
  std::atomic<bool> stopping{false};
  std::atomic<bool> bound{false};
  std::atomic<int> active_follows{0};
  std::shared_ptr<std::atomic<bool>> stop_flag = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<ExportTracker> exports = std::make_shared<ExportTracker>();
  mutable std::mutex metrics_mutex;
  RequestCounters counters;

  explicit Impl(ApiServerOptions o) : options(std::move(o)) {
    if (!options.control) throw ApiServerError("ApiServer: no control plane");
    if (!options.store) throw ApiServerError("ApiServer: no state store");
    if (!options.clock) options.clock = make_system_clock();
    add_routes();
    if (options.tls_cert.empty() && options.tls_key.empty()) {
      serve::EventServerOptions e;
      e.loops = std::max(1, options.loops);
      e.workers = std::max(2, options.threads);
      e.max_body_bytes = options.max_body_bytes;
      e.on_loop = [this](serve::Exchange& ex) { return on_loop(ex); };
      e.on_loop_batch = [this](std::vector<serve::Exchange*>& batch) { on_loop_batch(batch); };
      e.handle = [this](serve::Exchange& ex) { dispatch(ex.req, ex.res); };
      e.refuse = [this](serve::Exchange& ex, int status, const std::string& message) {
        refuse(ex.req, ex.res, status, message);
      };
      event_server = std::make_unique<serve::EventServer>(std::move(e));
      return;
    }
    if (options.tls_cert.empty() || options.tls_key.empty()) {
      throw ApiServerError("TLS needs both --tls-cert and --tls-key");
    }
    auto ssl =
        std::make_unique<httplib::SSLServer>(options.tls_cert.c_str(), options.tls_key.c_str());
    if (!ssl->is_valid()) {
      throw ApiServerError(fmt::format("TLS: cannot use certificate {} with key {}",
                                       options.tls_cert, options.tls_key));
    }
    tls_server = std::move(ssl);
    const int threads = std::max(2, options.threads);
    tls_server->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    tls_server->set_payload_max_length(options.max_body_bytes);
    tls_server->set_keep_alive_max_count(100000);
    tls_server->set_tcp_nodelay(true);  // small JSON answers: no Nagle delay
    tls_server->set_error_handler(httplib::Server::HandlerWithResponse(
        [this](const httplib::Request& req, httplib::Response& res) {
          if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
          refuse(req, res, res.status,
                 res.status == 413 ? fmt::format("the request body is larger than {} bytes",
                                                 options.max_body_bytes)
                                   : fmt::format("HTTP {}", res.status));
          return httplib::Server::HandlerResponse::Handled;
        }));
    tls_server->set_exception_handler(
        [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
          send_error(res, 500, "InternalError", "internal error");
        });
    // Every request goes through dispatch(), as on the plain server.
    const auto all = [this](const httplib::Request& req, httplib::Response& res) {
      dispatch(req, res);
    };
    tls_server->Get(".*", all);
    tls_server->Post(".*", all);
    tls_server->Delete(".*", all);
    tls_server->Put(".*", all);
    tls_server->Patch(".*", all);
    tls_server->Options(".*", all);
  }

  // The route of `req` answers it; none: 404.
  void dispatch(const httplib::Request& req, httplib::Response& res) {
    // The request is the server's own object, handed over as const by cpp-httplib.
    auto& matches = const_cast<httplib::Request&>(req).matches;
    for (const Route& r : routes) {
      if (r.method == req.method && std::regex_match(req.path, matches, r.pattern)) {
        r.handler(req, res);
        return;
      }
    }
    const std::string message =
        fmt::format("no route {} {}", req.method.substr(0, 16), req.path.substr(0, 200));
    send_error(res, 404, "RouteNotFound", message);
    count(req.method, "(unmatched)", 404, 0);
    if (options.on_request)
      options.on_request({req.method, "(unmatched)", req.path, 404, 0, message});
  }

  // A request refused before any route saw it (malformed, too large, too slow).
  void refuse(const httplib::Request& req, httplib::Response& res, int status,
              const std::string& message) {
    const char* type = status == 413   ? "PayloadTooLarge"
                       : status == 431 ? "HeadersTooLarge"
                       : status == 408 ? "RequestTimeout"
                       : status == 411 ? "LengthRequired"
                       : status == 505 ? "HttpVersionNotSupported"
                       : status == 404 ? "RouteNotFound"
                       : status >= 500 ? "InternalError"
                                       : "BadRequest";
    send_error(res, status, type, message);
    count(req.method.empty() ? "-" : req.method, "(unmatched)", status, 0);
    if (options.on_request) {
      options.on_request({req.method, "(unmatched)", req.path, status, 0, message});
    }
  }

  // The event loop's share: GET /healthz at once, and a brief POST /v1/select that repeats the
  // standing decision: at once when the repeat is not recorded (serve.record_repeats none),
  // else batched (recorded by on_loop_batch on the batcher thread). The others, and anything
  // that throws, go to a worker, whose handler answers them in full.
  serve::LoopAnswer on_loop(serve::Exchange& ex) {
    const httplib::Request& req = ex.req;
    if (!req.params.empty()) return serve::LoopAnswer::kWorker;
    if (req.method == "GET" && req.path == "/healthz") {
      dispatch(req, ex.res);
      return serve::LoopAnswer::kAnswered;
    }
    if (req.method != "POST" || req.path != "/v1/select") return serve::LoopAnswer::kWorker;
    const auto start = std::chrono::steady_clock::now();
    authorize(req, "/v1/select");
    const SelectRequest select = parse_select_body(req);  // throws: the worker answers it
    if (select.explain) return serve::LoopAnswer::kWorker;
    auto repeat = control().prepare_repeat(select.accelerator);
    if (!repeat) return serve::LoopAnswer::kWorker;
    if (repeat->selection_id != 0) {
      answer_repeat(ex, *repeat, start, std::chrono::steady_clock::now());
      return serve::LoopAnswer::kAnswered;
    }
    auto state = std::make_shared<LoopSelect>();
    state->start = start;
    state->outcome = std::move(*repeat);
    ex.state = std::move(state);
    return serve::LoopAnswer::kBatched;
  }

  void on_loop_batch(std::vector<serve::Exchange*>& batch) {
    std::vector<SelectOutcome*> repeats;
    repeats.reserve(batch.size());
    for (serve::Exchange* ex : batch) {
      repeats.push_back(&static_cast<LoopSelect*>(ex->state.get())->outcome);
    }
    control().record_repeats(repeats);  // throws: each goes to a worker
    const auto now = std::chrono::steady_clock::now();
    for (serve::Exchange* ex : batch) {
      const auto& state = *static_cast<LoopSelect*>(ex->state.get());
      if (state.outcome.selection_id == 0) {
        ex->to_worker = true;
        continue;
      }
      answer_repeat(*ex, state.outcome, state.start, now);
    }
  }

  void answer_repeat(serve::Exchange& ex, const SelectOutcome& outcome,
                     std::chrono::steady_clock::time_point start,
                     std::chrono::steady_clock::time_point now) {
    count_selection("repeated");
    ex.res.status = 200;
    ex.res.set_content(serve::brief_select_answer_json(outcome), "application/json");
    const double seconds = std::chrono::duration<double>(now - start).count();
    count("POST", "/v1/select", 200, seconds);
    if (options.on_request) {
      options.on_request({"POST", "/v1/select", ex.req.path, 200, seconds, {}});
    }
  }

  void count(const std::string& method, const std::string& route, int status, double seconds) {
    std::lock_guard lock(metrics_mutex);
    ++counters.requests[{route, method, status}];
    if (route != "(unmatched)") counters.latency[route].observe(seconds);
  }

  void count_selection(const std::string& outcome) {
    std::lock_guard lock(metrics_mutex);
    ++counters.selections[outcome];
  }

  void authorize(const httplib::Request& req, const std::string& path) const {
    if (!options.tokens || is_public_route(path)) return;
    const std::string token = bearer_token(req);
    if (token.empty()) {
      throw HttpError(401, "Unauthorized",
                      "this server needs a bearer token (Authorization: Bearer <token>)");
    }
    const auto role = options.tokens->find(token);
    if (!role) throw HttpError(401, "Unauthorized", "unknown bearer token");
    if (is_mutation(req.method) && *role != TokenRole::kOperate) {
      throw HttpError(403, "Forbidden",
                      fmt::format("{} {} needs a token with role operate", req.method, path));
    }
  }

  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

  // Registers `handler` for `method path` (OpenAPI spelling) under the regex `pattern`.
  void route(const std::string& method, const std::string& path, const std::string& pattern,
             Handler handler) {
    auto wrapped = [this, method, path, handler = std::move(handler)](const httplib::Request& req,
                                                                      httplib::Response& res) {
      const auto start = std::chrono::steady_clock::now();
      std::string error;
      try {
        authorize(req, path);
        handler(req, res);
      } catch (...) {
        error = answer_error(res);
      }
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      count(method, path, res.status, seconds);
      if (options.on_request) {
        options.on_request({method, path, req.path, res.status, seconds, error});
      }
    };
    routes.push_back({method, path, std::regex(pattern), std::move(wrapped)});
  }

  // Answers the exception in flight with its status and the CLI's error shape; returns the
  // message for the log.
  static std::string answer_error(httplib::Response& res) {
    auto falcon_error = [&res](int status, const FalconError& e) {
      json details = json::object();
      e.add_details(details);
      send_error(res, status, e.type_name(), e.what(), details);
      return std::string(e.what());
    };
    try {
      throw;
    } catch (const HttpError& e) {
      send_error(res, e.status(), e.type(), e.what(), e.details());
      return e.what();
    } catch (const ClusterConfigError& e) {
      return falcon_error(400, e);
    } catch (const UnknownClusterError& e) {
      return falcon_error(404, e);
    } catch (const WorkloadNotFoundError& e) {
      return falcon_error(404, e);
    } catch (const NoAvailableClusterError& e) {
      return falcon_error(503, e);
    } catch (const ClusterUnreachableError& e) {
      return falcon_error(503, e);
    } catch (const InvalidWorkloadSpecError& e) {
      return falcon_error(400, e);
    } catch (const WorkloadSubmitError& e) {
      const bool exists = std::string_view(e.what()).find("already exists") != std::string::npos;
      return falcon_error(exists ? 409 : 502, e);
    } catch (const XpkCommandError& e) {
      return falcon_error(502, e);
    } catch (const CommandStartError& e) {
      return falcon_error(502, e);
    } catch (const LogRetrievalError& e) {
      return falcon_error(502, e);
    } catch (const FalconError& e) {
      return falcon_error(500, e);
    } catch (const std::invalid_argument& e) {
      send_error(res, 400, "UsageError", e.what());
      return e.what();
    } catch (const json::exception& e) {
      send_error(res, 400, "UsageError", e.what());
      return e.what();
    } catch (const std::exception& e) {
      const std::string message = fmt::format("internal error: {}", e.what());
      send_error(res, 500, "InternalError", message);
      return message;
    } catch (...) {
      send_error(res, 500, "InternalError", "internal error");
      return "internal error";
    }
  }

  ControlPlane& control() const { return *options.control; }
  StateStore& store() const { return *options.store; }
  StoreTime now() const { return options.clock->now(); }

  void add_routes();
  void send_asset(const httplib::Request& req, httplib::Response& res,
                  const std::string& path) const;
  void start_export(const httplib::Request& req, httplib::Response& res);
  void logs(const httplib::Request& req, httplib::Response& res);
  std::string metrics() const;
};

void ApiServer::Impl::add_routes() {
  constexpr const char* kSeg = "([^/]+)";
  const std::string seg = kSeg;

  route("GET", "/healthz", "/healthz", [](const auto& req, auto& res) {
    check_params(req, {});
    send_json(res, 200, {{"status", "ok"}});
  });
  route("GET", "/readyz", "/readyz", [this](const auto& req, auto& res) {
    check_params(req, {});
    if (stopping) {
      send_error(res, 503, "NotReady", "the server is stopping");
    } else if (!control().ready()) {
      send_error(res, 503, "NotReady", "not every cluster has been probed yet");
    } else {
      send_json(res, 200, {{"status", "ready"}});
    }
  });
  // --- The dashboard (docs/serve.md#the-dashboard): its files, compiled into the binary.
  route("GET", "/", "/", [this](const auto& req, auto& res) {
    check_params(req, {});
    send_asset(req, res, "index.html");
  });
  route("GET", "/ui/{path}", "/ui/(.+)", [this](const auto& req, auto& res) {
    check_params(req, {"v"});  // v: a version the page may add to bust caches
    send_asset(req, res, req.matches[1]);
  });
  route("GET", "/metrics", "/metrics", [this](const auto& req, auto& res) {
    check_params(req, {});
    res.set_content(metrics(), "text/plain; version=0.0.4");
  });
  route("GET", "/v1/openapi.json", "/v1/openapi\\.json", [](const auto& req, auto& res) {
    check_params(req, {});
    send_json(res, 200, ApiServer::openapi());
  });
  route("GET", "/v1/whoami", "/v1/whoami", [this](const auto& req, auto& res) {
    check_params(req, {});
    // Public: the dashboard asks it before it has a token. It shows or hides its actions by the
    // role; the server refuses them to a read token anyway (403).
    if (!options.tokens) {
      send_json(res, 200, {{"role", "operate"}, {"tokens_required", false}, {"token", "none"}});
      return;
    }
    const std::string token = bearer_token(req);
    const auto role = token.empty() ? std::nullopt : options.tokens->find(token);
    send_json(res, 200,
              {{"role", !role                          ? json(nullptr)
                        : *role == TokenRole::kOperate ? json("operate")
                                                       : json("read")},
               {"tokens_required", true},
               {"token", token.empty() ? "missing"
                         : role        ? "valid"
                                       : "unknown"}});
  });
  route("GET", "/v1/config", "/v1/config", [this](const auto& req, auto& res) {
    check_params(req, {});
    const ConfigInfo c = control().config_info();
    send_json(res, 200,
              {{"source_path", c.source_path},
               {"content_hash", c.content_hash},
               {"loaded_at", c.loaded_at},
               {"clusters", c.clusters},
               {"reloads", c.reloads},
               {"reload_failures", c.reload_failures},
               {"last_reload_error",
                c.last_reload_error.empty() ? json(nullptr) : json(c.last_reload_error)},
               {"state", {{"backend", store().backend()}, {"location", store().location()}}}});
  });

  // --- Clusters.
  route("GET", "/v1/clusters", "/v1/clusters", [this](const auto& req, auto& res) {
    check_params(req, {});
    json out = json::array();
    for (const ClusterConfig& c : control().clusters()) {
      const auto probe = control().cached_probe(c.name);
      out.push_back({{"name", c.name},
                     {"config", c},
                     {"probe", probe ? json(*probe) : json(nullptr)},
                     {"breakers", control().breakers(c.name)}});
    }
    send_json(res, 200, {{"clusters", out}});
  });
  route("GET", "/v1/clusters/{name}", "/v1/clusters/" + seg, [this](const auto& req, auto& res) {
    check_params(req, {"since", "limit", "fresh"});
    const std::string name = req.matches[1];
    // fresh=true: no older than serve.max_probe_age_s, probed now if need be (cluster status).
    const auto probe = bool_param(req, "fresh") ? std::optional(control().fresh_probe(name))
                                                : control().cached_probe(name);
    ClusterConfig config;
    for (const ClusterConfig& c : control().clusters()) {
      if (c.name == name) config = c;
    }
    const StoreTime to = now();
    const StoreTime from = time_param("since", param(req, "since").value_or("1h"), to);
    const int limit = static_cast<int>(int_param(req, "limit", 1, 100000).value_or(1000));
    json history = json::array();
    for (const ProbeRecord& p :
         store().probe_history(name, from, to + std::chrono::seconds(1), limit)) {
      history.push_back(probe_record_json(p));
    }
    send_json(res, 200,
              {{"name", name},
               {"config", config},
               {"probe", probe ? json(*probe) : json(nullptr)},
               {"breakers", control().breakers(name)},
               {"history", history},
               {"history_since", format_iso8601(from)}});
  });

  // --- Selection.
  route("POST", "/v1/select", "/v1/select", [this](const auto& req, auto& res) {
    check_params(req, {});
    const auto [accelerator, explain] = parse_select_body(req);
    SelectOutcome outcome;
    try {
      outcome = explain ? control().select(accelerator) : control().select_brief(accelerator);
    } catch (const NoAvailableClusterError&) {
      count_selection("no_cluster");
      throw;
    } catch (...) {
      count_selection("error");
      throw;
    }
    count_selection(outcome.same_as != 0 ? "repeated" : "selected");
    res.status = 200;
    res.set_content(
        explain ? serve::select_answer_json(outcome) : serve::brief_select_answer_json(outcome),
        "application/json");
  });
  route("GET", "/v1/selections", "/v1/selections", [this](const auto& req, auto& res) {
    check_params(req, {"limit", "accelerator", "summary"});
    const int limit = static_cast<int>(int_param(req, "limit", 1, 1000).value_or(50));
    json out = json::array();
    if (bool_param(req, "summary")) {
      for (const SelectionSummary& s :
           store().list_selection_summaries(limit, param(req, "accelerator"))) {
        json j = {{"selection_id", s.id},
                  {"accelerator", s.accelerator},
                  {"selected_cluster", s.selected_cluster},
                  {"decided_at", s.decided_at},
                  {"policy", s.policy},
                  {"reason", s.reason}};
        if (s.same_as != 0) j["same_as"] = s.same_as;
        out.push_back(std::move(j));
      }
      send_json(res, 200, {{"selections", out}});
      return;
    }
    for (const SelectionRecord& r : store().list_selections(limit, param(req, "accelerator"))) {
      json j = r.selection;
      j["selection_id"] = r.id;
      out.push_back(j);
    }
    send_json(res, 200, {{"selections", out}});
  });
  route("GET", "/v1/selections/{id}", "/v1/selections/" + seg, [this](const auto& req, auto& res) {
    check_params(req, {});
    const std::int64_t id = id_from_path(req.matches[1], "selection");
    const auto record = store().get_selection(id);
    if (!record) throw HttpError(404, "NotFound", fmt::format("no selection {}", id));
    json j = record->selection;
    j["selection_id"] = record->id;
    send_json(res, 200, j);
  });

  // --- Workloads.
  route("POST", "/v1/workloads", "/v1/workloads", [this](const auto& req, auto& res) {
    check_params(req, {});
    const json body = parse_body(req, {"cluster", "spec", "managed"});
    const auto cluster_field = string_field(body, "cluster", "", false);
    if (!body.contains("spec")) throw bad_request("spec: required");
    const WorkloadSpec spec = parse_spec(body["spec"]);
    std::optional<ManageOptions> managed;
    if (const auto it = body.find("managed"); it != body.end() && !it->is_null()) {
      managed = parse_managed(*it, control().supervisor_defaults());
    }
    json out = json::object();
    std::string cluster;
    std::int64_t selection_id = 0;
    if (cluster_field) {
      cluster = *cluster_field;
    } else {
      SelectOutcome outcome;
      try {
        outcome = control().select(spec.accelerator_type);
      } catch (const NoAvailableClusterError&) {
        count_selection("no_cluster");
        throw;
      }
      count_selection("selected");
      cluster = outcome.selection.selected_cluster;
      selection_id = outcome.selection_id;
      out["selection_id"] = outcome.selection_id;
      out["selection"] = outcome.selection;
    }
    WorkloadHandle handle;
    if (managed) {
      handle = submit_managed(control(), store(), *options.clock, cluster, spec, *managed);
      out["handle"] = handle;
      out["managed"] = {
          {"name", spec.name},
          {"max_recoveries", managed->max_recoveries},
          {"stable_after_s", static_cast<double>(managed->stable_after.count()) / 1000.0},
          {"recover_on_failure", managed->recover_on_failure}};
    } else {
      handle = control().submit(cluster, spec);
      out["handle"] = handle;
    }
    if (selection_id != 0) {
      // The submission names the decision that chose its cluster (the dashboard's "why this
      // cluster"). Best effort: the workload is submitted either way, and says so.
      try {
        if (auto row = store().find_submission(handle.cluster, handle.workload_name)) {
          row->selection_id = selection_id;
          store().record_submission(*row);
        }
      } catch (const std::exception& e) {
        out["warning"] = fmt::format("the submission could not be linked to selection {}: {}",
                                     selection_id, e.what());
      }
    }
    send_json(res, 201, out);
  });
  route("GET", "/v1/workloads", "/v1/workloads", [this](const auto& req, auto& res) {
    check_params(
        req, {"cluster", "state", "name", "from", "before", "limit", "cursor", "live", "total"});
    const auto state = param(req, "state");
    if (state && !is_valid_state(*state)) {
      throw bad_request(fmt::format(
          "query parameter state: '{}' is not one of QUEUED, RUNNING, COMPLETED, FAILED, UNKNOWN",
          state->substr(0, 40)));
    }
    if (bool_param(req, "live")) {
      for (const char* p : {"name", "from", "before", "limit", "cursor", "total"}) {
        if (req.has_param(p)) {
          throw bad_request(fmt::format("query parameter {}: not with live=true", p));
        }
      }
      std::vector<std::string> clusters;
      if (const auto c = param(req, "cluster")) {
        clusters.push_back(*c);
      } else {
        for (const ClusterConfig& config : control().clusters()) clusters.push_back(config.name);
      }
      json out = json::array();
      for (const std::string& c : clusters) {
        json entry = {{"cluster", c}};
        try {
          entry["workloads"] = control().list_live(c, state);
        } catch (const UnknownClusterError&) {
          throw;
        } catch (const FalconError& e) {
          entry["error"] = {{"type", e.type_name()}, {"message", e.what()}};
          e.add_details(entry["error"]);
        }
        out.push_back(entry);
      }
      send_json(res, 200, {{"clusters", out}});
      return;
    }
    SubmissionQuery query;
    query.cluster = param(req, "cluster");
    query.state = state;
    query.name_contains = param(req, "name");
    if (const auto t = param(req, "from")) query.submitted_from = time_param("from", *t, now());
    if (const auto t = param(req, "before")) {
      query.submitted_before = time_param("before", *t, now());
    }
    query.limit = static_cast<int>(int_param(req, "limit", 1, 1000).value_or(100));
    query.cursor = param(req, "cursor").value_or("");
    query.with_total = bool_param(req, "total");
    SubmissionPage page;
    try {
      page = store().list_submissions(query);
    } catch (const std::invalid_argument& e) {
      throw bad_request(fmt::format("query parameter cursor: {}", e.what()));
    }
    json rows = json::array();
    for (const SubmissionRow& row : page.rows) rows.push_back(submission_json(row));
    json out = {{"workloads", rows},
                {"next_cursor", page.next_cursor.empty() ? json(nullptr) : json(page.next_cursor)}};
    if (query.with_total) out["total"] = page.total;
    send_json(res, 200, out);
  });
  const std::string workload_path = "/v1/workloads/" + seg + "/" + seg;
  route("GET", "/v1/workloads/{cluster}/{name}", workload_path, [this](const auto& req, auto& res) {
    check_params(req, {});
    const WorkloadHandle handle = control().handle_for(req.matches[1], req.matches[2]);
    const WorkloadStatus status = control().status(handle);
    json out = {{"handle", handle}, {"status", status}};
    json events = json::array();
    for (const WorkloadEvent& e :
         store().list_workload_events(handle.cluster, handle.workload_name, 100)) {
      events.push_back({{"state", e.state},
                        {"observed_at", format_iso8601(e.observed_at)},
                        {"detail", e.detail}});
    }
    out["events"] = events;
    send_json(res, 200, out);
  });
  route("DELETE", "/v1/workloads/{cluster}/{name}", workload_path,
        [this](const auto& req, auto& res) {
          check_params(req, {});
          const WorkloadHandle handle = control().handle_for(req.matches[1], req.matches[2]);
          // A managed workload's incarnation cancelled by a person: the supervisor lets it go.
          std::optional<std::string> managed_name;
          for (ManagedWorkloadRecord& m : store().list_managed(
                   1000,
                   {kManagedSubmitting, kManagedStarting, kManagedRunning, kManagedRecovering})) {
            if (m.incarnation != handle.workload_name || m.cluster != handle.cluster) continue;
            m.state = kManagedCancelled;
            m.updated_at = now();
            store().update_managed(m);
            managed_name = m.name;
          }
          const bool cancelled = control().cancel(handle);
          json out = {{"handle", handle}, {"cancelled", cancelled}};
          if (managed_name) out["managed"] = *managed_name;
          send_json(res, 200, out);
        });
  route("GET", "/v1/managed", "/v1/managed", [this](const auto& req, auto& res) {
    check_params(req, {"state"});
    std::vector<std::string> states;
    if (const auto state = param(req, "state")) states.push_back(*state);
    json out = json::array();
    for (const ManagedWorkloadRecord& m : store().list_managed(1000, states)) {
      out.push_back(managed_json(m));
    }
    send_json(res, 200, {{"managed", out}});
  });
  route("GET", "/v1/recoveries", "/v1/recoveries", [this](const auto& req, auto& res) {
    check_params(req, {"workload", "limit"});
    const int limit = static_cast<int>(int_param(req, "limit", 1, 1000).value_or(100));
    json out = json::array();
    for (const RecoveryRecord& r : store().list_recoveries(limit, param(req, "workload"))) {
      out.push_back(recovery_json(r));
    }
    send_json(res, 200, {{"recoveries", out}});
  });
  route("GET", "/v1/workloads/{cluster}/{name}/events", workload_path + "/events",
        [this](const auto& req, auto& res) {
          check_params(req, {"limit"});
          const std::string cluster = req.matches[1];
          control().handle_for(cluster, req.matches[2]);  // UnknownClusterError
          const int limit = static_cast<int>(int_param(req, "limit", 1, 100000).value_or(1000));
          json events = json::array();
          for (const WorkloadEvent& e :
               store().list_workload_events(cluster, req.matches[2], limit)) {
            events.push_back({{"state", e.state},
                              {"observed_at", format_iso8601(e.observed_at)},
                              {"detail", e.detail}});
          }
          send_json(res, 200, {{"events", events}});
        });
  route("GET", "/v1/workloads/{cluster}/{name}/logs", workload_path + "/logs",
        [this](const auto& req, auto& res) { logs(req, res); });

  // --- Exports.
  route("POST", "/v1/exports", "/v1/exports",
        [this](const auto& req, auto& res) { start_export(req, res); });
  route("GET", "/v1/exports", "/v1/exports", [this](const auto& req, auto& res) {
    check_params(req, {"limit", "workload"});
    const int limit = static_cast<int>(int_param(req, "limit", 1, 1000).value_or(50));
    json out = json::array();
    for (const ExportRecord& e : store().list_exports(limit, param(req, "workload"))) {
      out.push_back(export_json(e));
    }
    send_json(res, 200, {{"exports", out}});
  });
  route("GET", "/v1/exports/{id}", "/v1/exports/" + seg, [this](const auto& req, auto& res) {
    check_params(req, {});
    const std::int64_t id = id_from_path(req.matches[1], "export");
    const auto record = store().get_export(id);
    if (!record) throw HttpError(404, "NotFound", fmt::format("no export {}", id));
    send_json(res, 200, export_json(*record));
  });
}

void ApiServer::Impl::send_asset(const httplib::Request& req, httplib::Response& res,
                                 const std::string& path) const {
  const serve::DashboardFile* file = serve::find_dashboard_file(path);
  if (file == nullptr) {
    throw HttpError(404, "NotFound", fmt::format("no dashboard file '{}'", path.substr(0, 80)));
  }
  // Revalidated on every load (no-cache) and answered 304 while the ETag (a digest of the
  // bytes) matches: a new binary's files are picked up at once, an unchanged one costs no body.
  res.set_header("ETag", file->etag);
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  if (path == "index.html") {
    res.set_header("Content-Security-Policy",
                   "default-src 'self'; img-src 'self' data:; style-src 'self'; "
                   "script-src 'self'; connect-src 'self'; frame-ancestors 'none'; "
                   "base-uri 'none'; form-action 'none'");
    res.set_header("X-Frame-Options", "DENY");
  }
  if (req.get_header_value("If-None-Match") == file->etag) {
    res.status = 304;
    return;
  }
  res.status = 200;
  res.set_content(file->bytes.data(), file->bytes.size(), file->content_type);
}

void ApiServer::Impl::logs(const httplib::Request& req, httplib::Response& res) {
  check_params(req, {"rank", "slice", "tail", "since", "grep", "follow", "format"});
  const WorkloadHandle handle = control().handle_for(req.matches[1], req.matches[2]);
  const int rank = static_cast<int>(int_param(req, "rank", 0, 100000).value_or(0));
  const int slice = static_cast<int>(int_param(req, "slice", 0, 100000).value_or(0));
  LogFilter filter;
  filter.ranks = std::vector<int>{rank};
  if (const auto tail = int_param(req, "tail", 1, 10000000))
    filter.tail_lines = static_cast<int>(*tail);
  if (const auto since = param(req, "since")) {
    filter.since = format_iso8601(time_param("since", *since, now()));
  }
  filter.grep = param(req, "grep");
  const bool follow = bool_param(req, "follow");
  const std::string format =
      param(req, "format")
          .value_or(req.get_header_value("Accept").find("text/event-stream") != std::string::npos
                        ? "sse"
                        : "text");
  if (format != "text" && format != "sse") {
    throw bad_request(
        fmt::format("query parameter format: must be text or sse, got '{}'", format.substr(0, 40)));
  }
  const bool sse = format == "sse";
  const char* content_type = sse ? "text/event-stream" : "text/plain; charset=utf-8";
  // One line per chunk; in SSE one event per line.
  auto write_line = [sse](httplib::DataSink& sink, const std::string& line) {
    const std::string chunk = sse ? "data: " + line + "\n\n" : line + "\n";
    return sink.write(chunk.data(), chunk.size());
  };
  res.set_header("Cache-Control", "no-store");
  if (follow) {
    // cpp-httplib compresses a text/* answer the client accepts compressed (Accept-Encoding:
    // curl, browsers), and its compressor holds the lines back until a buffer fills: a follow
    // is never compressed. The request is the server's own object, given to handlers as const.
    const_cast<httplib::Request&>(req).headers.erase("Accept-Encoding");
    if (filter.tail_lines) throw bad_request("query parameter tail: not with follow=true");
    auto control_ptr = options.control;
    auto stop_flag = this->stop_flag;
    ++active_follows;
    res.set_chunked_content_provider(
        content_type,
        [control_ptr, stop_flag, handle, rank, filter, slice, write_line, sse](
            std::size_t, httplib::DataSink& sink) {
          bool client_gone = false;
          try {
            control_ptr->follow_log(
                handle, rank, filter, slice,
                [&] { return client_gone || stop_flag->load() || !sink.is_writable(); },
                [&](const std::string& line) {
                  if (!client_gone && !write_line(sink, line)) client_gone = true;
                });
          } catch (const std::exception& e) {
            if (!sse) return false;  // an unterminated chunked body tells the client
            const std::string event =
                fmt::format("event: error\ndata: {}\n\n", json({{"message", e.what()}}).dump());
            sink.write(event.data(), event.size());
          }
          if (client_gone) return false;
          sink.done();
          return true;
        },
        [this](bool) { --active_follows; });
    return;
  }
  // Read the first line here, so that a failure is answered with its status, not a broken body.
  auto lines = std::make_shared<LogLines>(control().read_log(handle, rank, filter, slice));
  auto first = std::make_shared<std::optional<std::string>>(lines->next());
  res.set_chunked_content_provider(
      content_type, [lines, first, write_line](std::size_t, httplib::DataSink& sink) {
        try {
          if (*first) {
            if (!write_line(sink, **first)) return false;
            first->reset();
          }
          for (int i = 0; i < 256; ++i) {  // a batch per call, so a stop is noticed
            auto line = lines->next();
            if (!line) {
              sink.done();
              return true;
            }
            if (!write_line(sink, *line)) return false;
          }
          return true;
        } catch (const std::exception&) {
          return false;
        }
      });
}

void ApiServer::Impl::start_export(const httplib::Request& req, httplib::Response& res) {
  check_params(req, {});
  const json body =
      parse_body(req, {"cluster", "workload", "dest", "ranks", "slice", "since", "grep"});
  const std::string cluster = *string_field(body, "cluster", "", true);
  const std::string workload = *string_field(body, "workload", "", true);
  const std::string dest = *string_field(body, "dest", "", true);
  try {
    (void)parse_gcs_uri(dest);  // the exporter parses it again; refused here as a 400, not a 500
  } catch (const std::invalid_argument& e) {
    throw bad_request(fmt::format("dest: {}", e.what()));
  }
  LogFilter filter;
  if (const auto it = body.find("ranks"); it != body.end() && !it->is_null()) {
    if (!it->is_array()) throw bad_request("ranks: must be an array of integers >= 0");
    std::vector<int> ranks;
    for (const auto& r : *it) {
      if (!r.is_number_integer() || r.get<std::int64_t>() < 0 || r.get<std::int64_t>() > 100000) {
        throw bad_request("ranks: must be an array of integers >= 0");
      }
      ranks.push_back(r.get<int>());
    }
    filter.ranks = ranks;
  }
  int slice = 0;
  if (const auto it = body.find("slice"); it != body.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<std::int64_t>() < 0 ||
        it->get<std::int64_t>() > 100000) {
      throw bad_request("slice: must be an integer >= 0");
    }
    slice = it->get<int>();
  }
  if (const auto since = string_field(body, "since", "", false)) {
    filter.since = format_iso8601(time_param("since", *since, now()));
  }
  filter.grep = string_field(body, "grep", "", false);
  if (stopping) throw HttpError(503, "Stopping", "the server is stopping");
  const WorkloadHandle handle = control().handle_for(cluster, workload);
  ExportRecord record;
  record.workload = workload;
  record.cluster = cluster;
  record.dest = dest;
  record.started_at = now();
  const std::int64_t id = store().start_export(record);
  {
    std::lock_guard lock(exports->mutex);
    exports->running.insert(id);
  }
  auto control_ptr = options.control;
  auto store_ptr = options.store;
  auto clock = options.clock;
  auto tracker = exports;
  auto on_event = options.on_event;
  std::thread([=] {
    std::string state = kExportDone;
    json result;
    try {
      auto progress = std::make_shared<json>(json::object());
      const LogExportResult r =
          control_ptr->export_logs(handle, filter, dest, slice, [&](const ExportProgress& p) {
            (*progress)[std::to_string(p.rank)] = {
                {"lines", p.lines}, {"bytes", p.bytes}, {"done", p.done}};
            try {
              store_ptr->update_export_progress(id, progress->dump());
            } catch (const std::exception&) {
              // Progress is advisory; the result below is what counts.
            }
          });
      result = r;
    } catch (const FalconError& e) {
      state = kExportFailed;
      result = {{"error", {{"type", e.type_name()}, {"message", e.what()}}}};
      e.add_details(result["error"]);
    } catch (const std::exception& e) {
      state = kExportFailed;
      result = {{"error", {{"type", "InternalError"}, {"message", e.what()}}}};
    }
    // Under the tracker's lock: either this end is recorded, or stop() already marked the
    // export failed and nothing is written over that (an export is never reported done after
    // the server said it stopped).
    std::lock_guard lock(tracker->mutex);
    if (tracker->abandoned.contains(id)) return;
    try {
      store_ptr->finish_export(id, state, result.dump(), clock->now());
    } catch (const std::exception& e) {
      if (on_event) on_event(fmt::format("export {}: cannot record its end: {}", id, e.what()));
    }
    if (state == kExportFailed && on_event) {
      on_event(fmt::format("export {} of {}/{} failed: {}", id, handle.cluster,
                           handle.workload_name, result["error"]["message"].get<std::string>()));
    }
    tracker->running.erase(id);
    tracker->changed.notify_all();
  }).detach();
  send_json(res, 202, {{"id", id}, {"state", kExportRunning}, {"handle", handle}});
}

std::string ApiServer::Impl::metrics() const {
  serve::PrometheusText out;
  const std::vector<ClusterConfig> clusters = control().clusters();
  std::vector<std::pair<std::string, std::optional<ProbeSnapshot>>> probes;
  for (const ClusterConfig& c : clusters) {
    try {
      probes.emplace_back(c.name, control().cached_probe(c.name));
    } catch (const std::exception&) {
      probes.emplace_back(c.name, std::nullopt);  // removed by a reload meanwhile
    }
  }
  auto per_cluster = [&](const std::string& name, const char* type, const std::string& help,
                         const std::function<std::optional<double>(const ProbeSnapshot&)>& value) {
    out.family(name, type, help);
    for (const auto& [cluster, probe] : probes) {
      if (!probe) continue;
      if (const auto v = value(*probe)) out.sample(name, {{"cluster", cluster}}, *v);
    }
  };
  per_cluster("falcon_cluster_up", "gauge", "1 when the cluster's latest probe reached it",
              [](const ProbeSnapshot& p) { return p.result.reachable ? 1.0 : 0.0; });
  per_cluster("falcon_cluster_queue_depth", "gauge", "QUEUED workloads at the latest probe",
              [](const ProbeSnapshot& p) -> std::optional<double> {
                if (!p.result.queue_depth) return std::nullopt;
                return *p.result.queue_depth;
              });
  per_cluster("falcon_cluster_running", "gauge", "RUNNING workloads at the latest probe",
              [](const ProbeSnapshot& p) -> std::optional<double> {
                if (!p.result.running_count) return std::nullopt;
                return *p.result.running_count;
              });
  per_cluster("falcon_probe_duration_seconds", "gauge", "How long the latest probe took",
              [](const ProbeSnapshot& p) { return p.duration_ms / 1000.0; });
  per_cluster("falcon_probe_age_seconds", "gauge", "Age of the cached probe",
              [](const ProbeSnapshot& p) { return p.age_ms / 1000.0; });
  per_cluster("falcon_probe_consecutive_failures", "gauge",
              "Failed probes in a row (0 when reachable)",
              [](const ProbeSnapshot& p) { return static_cast<double>(p.consecutive_failures); });

  // Circuit breakers: one sample per breaker key (the cluster's and each cluster x accelerator).
  out.family("falcon_circuit_breaker_state", "gauge",
             "Circuit breaker state: 0 closed, 1 half_open (trial), 2 open");
  std::vector<std::pair<std::string, BreakerReport>> breakers;
  for (const ClusterConfig& c : clusters) {
    try {
      for (BreakerReport& b : control().breakers(c.name)) breakers.emplace_back(c.name, b);
    } catch (const std::exception&) {
      // removed by a reload meanwhile, or the store failed: no sample
    }
  }
  for (const auto& [cluster, b] : breakers) {
    const double v = b.state == kBreakerOpen ? 2.0 : b.state == kBreakerHalfOpen ? 1.0 : 0.0;
    out.sample("falcon_circuit_breaker_state", {{"cluster", cluster}, {"key", b.key}}, v);
  }
  out.family("falcon_circuit_breaker_trips", "gauge",
             "Trips in a row of each circuit breaker (0 once it has stayed closed)");
  for (const auto& [cluster, b] : breakers) {
    out.sample("falcon_circuit_breaker_trips", {{"cluster", cluster}, {"key", b.key}},
               static_cast<double>(b.trips));
  }
  out.family("falcon_circuit_breaker_consecutive_failures", "gauge",
             "Consecutive failures each circuit breaker has counted");
  for (const auto& [cluster, b] : breakers) {
    out.sample("falcon_circuit_breaker_consecutive_failures",
               {{"cluster", cluster}, {"key", b.key}}, static_cast<double>(b.consecutive_failures));
  }

  out.family("falcon_probe_cache_oldest_age_seconds", "gauge",
             "Age of the oldest cached probe (clusters with one)");
  {
    double oldest = 0;
    for (const auto& [cluster, probe] : probes) {
      if (probe) oldest = std::max(oldest, probe->age_ms / 1000.0);
    }
    out.sample("falcon_probe_cache_oldest_age_seconds", {}, oldest);
  }

  const FabricCounters::Snapshot fabric = control().fabric_counters();
  out.family("falcon_xpk_calls_total", "counter",
             "xpk invocations by verb and result (ok, failed, timeout, start_error)");
  for (const auto& [key, n] : fabric.xpk_calls) {
    out.sample("falcon_xpk_calls_total", {{"verb", key.first}, {"result", key.second}},
               static_cast<double>(n));
  }
  out.family("falcon_logging_reads_total", "counter",
             "Cloud Logging entries:list requests by result (ok, rate_limited: HTTP 429, failed)");
  out.sample("falcon_logging_reads_total", {{"result", "ok"}},
             static_cast<double>(fabric.logging_ok));
  out.sample("falcon_logging_reads_total", {{"result", "rate_limited"}},
             static_cast<double>(fabric.logging_rate_limited));
  out.sample("falcon_logging_reads_total", {{"result", "failed"}},
             static_cast<double>(fabric.logging_failed));
  out.family("falcon_upload_bytes_total", "counter",
             "Bytes sent to Cloud Storage uploads (log exports)");
  out.sample("falcon_upload_bytes_total", {}, static_cast<double>(fabric.upload_bytes));
  out.family("falcon_upload_requests_total", "counter", "Cloud Storage upload requests sent");
  out.sample("falcon_upload_requests_total", {}, static_cast<double>(fabric.upload_requests));

  const ProbeCacheStats stats = control().cache_stats();
  out.family("falcon_probes_total", "counter", "Probes run, by who asked (loop or on demand)");
  out.sample("falcon_probes_total", {{"trigger", "loop"}}, static_cast<double>(stats.loop_probes));
  out.sample("falcon_probes_total", {{"trigger", "on_demand"}},
             static_cast<double>(stats.on_demand_probes));
  out.family("falcon_probe_cache_lookups_total", "counter", "Probe cache lookups by result");
  out.sample("falcon_probe_cache_lookups_total", {{"result", "hit"}},
             static_cast<double>(stats.cache_hits));
  out.sample("falcon_probe_cache_lookups_total", {{"result", "miss"}},
             static_cast<double>(stats.cache_misses));
  out.family("falcon_probe_store_failures_total", "counter",
             "Probes that could not be written to the state store");
  out.sample("falcon_probe_store_failures_total", {}, static_cast<double>(stats.store_failures));
  out.family("falcon_probe_downsample_runs_total", "counter",
             "Thinning passes over the probe history, by result");
  out.sample("falcon_probe_downsample_runs_total", {{"result", "ok"}},
             static_cast<double>(stats.downsample_runs));
  out.sample("falcon_probe_downsample_runs_total", {{"result", "failed"}},
             static_cast<double>(stats.downsample_failures));
  out.family("falcon_selections_pruned_total", "counter",
             "Decisions deleted by serve.selection_retention_h");
  out.sample("falcon_selections_pruned_total", {}, static_cast<double>(stats.selections_pruned));

  const ConfigInfo config = control().config_info();
  out.family("falcon_config_reloads_total", "counter", "Configuration reloads by result");
  out.sample("falcon_config_reloads_total", {{"result", "ok"}},
             static_cast<double>(config.reloads));
  out.sample("falcon_config_reloads_total", {{"result", "failed"}},
             static_cast<double>(config.reload_failures));
  out.family("falcon_clusters", "gauge", "Clusters in the configuration in force");
  out.sample("falcon_clusters", {}, config.clusters);

  out.family("falcon_log_follows_active", "gauge", "Log follows streaming now");
  out.sample("falcon_log_follows_active", {}, active_follows.load());
  {
    std::lock_guard lock(exports->mutex);
    out.family("falcon_exports_running", "gauge", "Log exports running in the background");
    out.sample("falcon_exports_running", {}, static_cast<double>(exports->running.size()));
  }

  if (options.supervisor) options.supervisor->write_metrics(out);

  std::lock_guard lock(metrics_mutex);
  out.family("falcon_selections_total", "counter",
             "Selections by outcome (repeated: a brief select that repeated the last decision on "
             "unchanged inputs)");
  for (const char* outcome : {"selected", "repeated", "no_cluster", "error"}) {
    const auto it = counters.selections.find(outcome);
    out.sample("falcon_selections_total", {{"outcome", outcome}},
               it == counters.selections.end() ? 0.0 : static_cast<double>(it->second));
  }
  out.family("falcon_http_requests_total", "counter", "HTTP requests by route, method and status");
  for (const auto& [key, n] : counters.requests) {
    const auto& [route_path, method, status] = key;
    out.sample("falcon_http_requests_total",
               {{"route", route_path}, {"method", method}, {"status", std::to_string(status)}},
               static_cast<double>(n));
  }
  out.family("falcon_http_request_duration_seconds", "histogram",
             "Time to answer a request (to the first byte of a streamed body), by route");
  for (const auto& [route_path, histogram] : counters.latency) {
    histogram.write(out, "falcon_http_request_duration_seconds", {{"route", route_path}});
  }
  return out.text();
}

ApiServer::ApiServer(ApiServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

ApiServer::~ApiServer() { stop(std::chrono::milliseconds(0)); }

int ApiServer::bind(const std::string& host, int port) {
  int bound_port = -1;
  if (impl_->event_server) {
    try {
      bound_port = impl_->event_server->bind(host, port);
    } catch (const std::exception& e) {
      throw ApiServerError(fmt::format("{} (address in use or not local?)", e.what()));
    }
  } else if (port == 0) {
    bound_port = impl_->tls_server->bind_to_any_port(host.c_str());
  } else if (impl_->tls_server->bind_to_port(host.c_str(), port)) {
    bound_port = port;
  }
  if (bound_port <= 0) {
    throw ApiServerError(
        fmt::format("cannot listen on {}:{} (address in use or not local?)", host, port));
  }
  impl_->bound = true;
  return bound_port;
}

void ApiServer::serve() {
  if (!impl_->bound) throw ApiServerError("ApiServer::serve: bind() first");
  if (impl_->stopping) return;
  if (impl_->event_server) {
    impl_->event_server->serve();
  } else {
    impl_->tls_server->listen_after_bind();
  }
}

void ApiServer::stop(std::chrono::milliseconds grace) {
  if (impl_->stopping.exchange(true)) return;
  impl_->stop_flag->store(true);
  if (impl_->event_server) {
    impl_->event_server->stop();
  } else {
    impl_->tls_server->stop();
  }
  // Exports cannot be interrupted: wait for them up to the grace, then mark the rest failed.
  auto& tracker = *impl_->exports;
  std::unique_lock lock(tracker.mutex);
  tracker.changed.wait_for(lock, grace, [&] { return tracker.running.empty(); });
  for (const std::int64_t id : tracker.running) {
    tracker.abandoned.insert(id);
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

std::size_t ApiServer::abandoned_exports() const {
  std::lock_guard lock(impl_->exports->mutex);
  return impl_->exports->abandoned.size();
}

std::vector<std::string> ApiServer::routes() const {
  std::vector<std::string> out;
  for (const Route& r : impl_->routes) out.push_back(r.method + " " + r.path);
  std::sort(out.begin(), out.end());
  return out;
}

std::string ApiServer::metrics_text() const { return impl_->metrics(); }

}  // namespace falcon
