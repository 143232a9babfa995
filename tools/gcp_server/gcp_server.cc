#include "gcp_server/gcp_server.h"

#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <ctime>
#include <filesystem>
#include <functional>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/base64.h"
#include "common/rfc3339.h"
#include "gcp_server/api_error.h"
#include "gcp_server/log_copy.h"
#include "gcp_server/log_store.h"
#include "gcp_server/object_store.h"
#include "gcp_server/token_authority.h"
#include "gcp_server/wire.h"

namespace falcon::fake {

using nlohmann::json;

namespace {

enum class Api { kLogging, kStorage, kOAuth, kMetadata, kControl };

constexpr const char* kJson = "application/json; charset=UTF-8";

std::string canonical_status(int code) {
  switch (code) {
    case 400:
      return "INVALID_ARGUMENT";
    case 401:
      return "UNAUTHENTICATED";
    case 403:
      return "PERMISSION_DENIED";
    case 404:
      return "NOT_FOUND";
    case 408:
      return "DEADLINE_EXCEEDED";
    case 409:
      return "ABORTED";
    case 412:
      return "FAILED_PRECONDITION";
    case 416:
      return "OUT_OF_RANGE";
    case 429:
      return "RESOURCE_EXHAUSTED";
    case 499:
      return "CANCELLED";
    case 501:
      return "UNIMPLEMENTED";
    case 503:
      return "UNAVAILABLE";
    case 504:
      return "DEADLINE_EXCEEDED";
    default:
      return code >= 500 ? "INTERNAL" : "UNKNOWN";
  }
}

std::string storage_reason(int code) {
  switch (code) {
    case 400:
      return "invalid";
    case 401:
      return "required";
    case 403:
      return "forbidden";
    case 404:
      return "notFound";
    case 408:
      return "requestTimeout";
    case 409:
      return "conflict";
    case 412:
      return "conditionNotMet";
    case 429:
      return "rateLimitExceeded";
    case 503:
      return "backendError";
    default:
      return code >= 500 ? "backendError" : "invalid";
  }
}

std::string default_message(Api api, int code) {
  switch (code) {
    case 429:
      return api == Api::kLogging
                 ? "Quota exceeded for quota metric 'Read requests' and limit 'Read requests per "
                   "minute' of service 'logging.googleapis.com' for consumer "
                   "'project_number:000000000000'."
                 : "The rate of change requests to the object exceeds the rate limit. Please "
                   "reduce the rate of create, update, and delete requests.";
    case 500:
      return "Internal error encountered.";
    case 502:
      return "Bad Gateway";
    case 503:
      return "The service is currently unavailable.";
    case 504:
      return "The request timed out. Please try again.";
    case 408:
      return "Request Timeout";
    default:
      return fmt::format("Injected failure with HTTP status {}", code);
  }
}

// The google.rpc.Status body of a Logging error; 429 carries the quota details seen on the
// real service plus a RetryInfo.
json logging_error(int code, const std::string& status, const std::string& message,
                   const std::string& retry_delay, int quota_limit) {
  json err{{"code", code}, {"message", message}, {"status", status}};
  if (code == 429) {
    err["details"] = json::array(
        {json{{"@type", "type.googleapis.com/google.rpc.ErrorInfo"},
              {"reason", "RATE_LIMIT_EXCEEDED"},
              {"domain", "googleapis.com"},
              {"metadata",
               {{"consumer", "projects/000000000000"},
                {"quota_limit", "ReadRequestsPerMinutePerProject"},
                {"quota_limit_value", std::to_string(quota_limit)},
                {"quota_location", "global"},
                {"quota_metric", "logging.googleapis.com/read_requests"},
                {"quota_unit", "1/min/{project}"},
                {"service", "logging.googleapis.com"}}}},
         json{{"@type", "type.googleapis.com/google.rpc.Help"},
              {"links",
               json::array(
                   {json{{"description", "Request a higher quota limit."},
                         {"url", "https://cloud.google.com/docs/quotas/help/request_increase"}}})}},
         json{{"@type", "type.googleapis.com/google.rpc.RetryInfo"}, {"retryDelay", retry_delay}}});
  }
  return json{{"error", err}};
}

json storage_error(int code, const std::string& reason, const std::string& message) {
  json e{
      {"message", message}, {"domain", code == 429 ? "usageLimits" : "global"}, {"reason", reason}};
  if (code == 401) {
    e["locationType"] = "header";
    e["location"] = "Authorization";
  }
  return json{{"error", {{"code", code}, {"message", message}, {"errors", json::array({e})}}}};
}

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  // An error message may quote bytes of a request that are not UTF-8: replace them rather than
  // throw while answering.
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), kJson);
}

void send_error(httplib::Response& res, Api api, int code, const std::string& status,
                const std::string& reason, const std::string& message,
                const std::string& retry_delay = "1s", int quota_limit = 60) {
  switch (api) {
    case Api::kLogging:
      send_json(res, code, logging_error(code, status, message, retry_delay, quota_limit));
      break;
    case Api::kStorage:
      send_json(res, code, storage_error(code, reason, message));
      break;
    case Api::kOAuth: {
      const std::string oauth = code == 503   ? "temporarily_unavailable"
                                : code >= 500 ? "internal_failure"
                                : code == 429 ? "rate_limit_exceeded"
                                              : "invalid_request";
      send_json(res, code, json{{"error", oauth}, {"error_description", message}});
      break;
    }
    case Api::kMetadata:
    case Api::kControl:
      res.status = code;
      res.set_content(message + "\n", "text/plain; charset=utf-8");
      break;
  }
}

std::string raw_path(const httplib::Request& req) {
  const auto q = req.target.find('?');
  return q == std::string::npos ? req.target : req.target.substr(0, q);
}

// The object name in /storage/v1/b/BUCKET/o/NAME, decoded exactly once from the raw target
// (whether or not httplib decoded req.path, `%2F` must become `/` once and `%25` `%` once).
std::string object_name_from_target(const httplib::Request& req) {
  const std::string path = raw_path(req);
  const std::string marker = "/b/" + req.matches[1].str() + "/o/";
  const auto pos = path.find(marker);
  if (pos == std::string::npos) throw ApiError::not_found("No such object");
  return percent_decode(path.substr(pos + marker.size()));
}

std::map<std::string, std::string> parse_form(const std::string& body) {
  std::map<std::string, std::string> out;
  std::size_t i = 0;
  while (i <= body.size()) {
    const auto amp = body.find('&', i);
    const std::string part = body.substr(i, amp == std::string::npos ? std::string::npos : amp - i);
    if (!part.empty()) {
      const auto eq = part.find('=');
      out[percent_decode(part.substr(0, eq), true)] =
          eq == std::string::npos ? std::string() : percent_decode(part.substr(eq + 1), true);
    }
    if (amp == std::string::npos) break;
    i = amp + 1;
  }
  return out;
}

std::optional<std::int64_t> int_param(const httplib::Request& req, const char* name) {
  if (!req.has_param(name)) return std::nullopt;
  try {
    std::size_t used = 0;
    const std::string v = req.get_param_value(name);
    const std::int64_t n = std::stoll(v, &used);
    if (used != v.size()) throw std::invalid_argument(v);
    return n;
  } catch (const std::exception&) {
    throw ApiError::invalid_argument(
        fmt::format("Invalid value for {}: {}", name, req.get_param_value(name)));
  }
}

std::int64_t content_length(const httplib::Request& req) {
  const std::string v = req.get_header_value("Content-Length");
  if (v.empty()) return 0;
  try {
    return std::stoll(v);
  } catch (const std::exception&) {
    throw ApiError::invalid_argument("Invalid Content-Length: " + v);
  }
}

int port_of(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  }
  if (addr.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  }
  return -1;
}

// Drops the connection a request arrived on, as a network failure would: the client sees a
// reset and no response. cpp-httplib does not hand the socket to handlers, so find it among the
// process's descriptors by its (local, peer) port pair. shutdown() alone is not enough: Linux
// keeps delivering bytes the client still sends after SHUT_RD, and httplib would parse the rest
// of the body as new requests. So the descriptor is atomically replaced (dup2) by one end of a
// socket pair whose other end is closed: httplib then reads EOF and closes it as usual, and the
// real connection, losing its last descriptor with SO_LINGER 0, is reset.
void cut_connection(const httplib::Request& req) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    int fd = -1;
    try {
      fd = std::stoi(entry.path().filename().string());
    } catch (const std::exception&) {
      continue;
    }
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage local{}, peer{};
    socklen_t local_len = sizeof local, peer_len = sizeof peer;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
        getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) {
      continue;
    }
    if (port_of(local) == req.local_port && port_of(peer) == req.remote_port) {
      const linger abort_on_close{1, 0};
      setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof abort_on_close);
      int pair[2];
      if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0) {
        close(pair[1]);
        dup3(pair[0], fd, O_CLOEXEC);
        close(pair[0]);
      } else {
        ::shutdown(fd, SHUT_RDWR);
      }
      return;
    }
  }
}

// One request as a route handler sees it.
struct Call {
  const httplib::Request& req;
  httplib::Response& res;
  const httplib::ContentReader* reader = nullptr;
  std::optional<Fault> cut;  // a cut-connection fault for a streaming handler to honour
  bool body_read = false;
  std::string body_text;

  // The whole request body (read on first use).
  const std::string& body() {
    if (!body_read) {
      body_read = true;
      if (reader) {
        (*reader)([this](const char* d, std::size_t n) {
          body_text.append(d, n);
          return true;
        });
      } else {
        body_text = req.body;
      }
    }
    return body_text;
  }
  void drain() {
    if (body_read || !reader) return;
    body_read = true;
    (*reader)([](const char*, std::size_t) { return true; });
  }
};

// IMF-fixdate (RFC 9110 section 5.6.7): "Sun, 06 Nov 1994 08:49:37 GMT".
std::string http_date(std::chrono::system_clock::time_point t) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  ::gmtime_r(&seconds, &tm);
  char text[64];
  std::strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return text;
}

json parse_json_body(Call& call) {
  const std::string& body = call.body();
  if (body.empty()) return json::object();
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) {
    throw ApiError::invalid_argument("Invalid JSON payload received. Unexpected token.");
  }
  if (!j.is_object()) {
    throw ApiError::invalid_argument(
        "Invalid JSON payload received. Expected an object at the top level.");
  }
  return j;
}

// proto3 JSON rejects unknown fields; both lowerCamel and original names are accepted.
void check_fields(const json& body, std::initializer_list<std::string_view> known) {
  for (const auto& [key, v] : body.items()) {
    std::string camel;
    bool up = false;
    for (char c : key) {
      if (c == '_') {
        up = true;
        continue;
      }
      camel += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
      up = false;
    }
    if (std::find(known.begin(), known.end(), camel) == known.end()) {
      throw ApiError::invalid_argument(fmt::format(
          "Invalid JSON payload received. Unknown name \"{}\": Cannot find field.", key));
    }
  }
}

const json* field(const json& body, const char* camel, const char* snake) {
  if (auto it = body.find(camel); it != body.end()) return &*it;
  if (auto it = body.find(snake); it != body.end()) return &*it;
  return nullptr;
}

struct MultipartUpload {
  json metadata;
  std::string content_type;
  std::string data;
};

// multipart/related as the JSON API's uploadType=multipart takes it: a JSON metadata part and
// a media part.
MultipartUpload parse_multipart_related(const std::string& content_type, const std::string& body) {
  auto bpos = content_type.find("boundary=");
  if (bpos == std::string::npos) {
    throw ApiError::invalid_argument("multipart upload without a boundary");
  }
  std::string boundary = content_type.substr(bpos + 9);
  if (auto semi = boundary.find(';'); semi != std::string::npos) boundary.resize(semi);
  // Python's email package (gcloud) single-quotes the boundary; others double-quote it.
  if (boundary.size() >= 2 && (boundary.front() == '"' || boundary.front() == '\'') &&
      boundary.back() == boundary.front()) {
    boundary = boundary.substr(1, boundary.size() - 2);
  }
  const std::string delim = "--" + boundary;
  std::vector<std::string_view> parts;
  std::string_view rest(body);
  auto start = rest.find(delim);
  if (start == std::string_view::npos) throw ApiError::invalid_argument("malformed multipart body");
  rest.remove_prefix(start + delim.size());
  for (;;) {
    if (rest.substr(0, 2) == "--") break;  // closing delimiter
    // Skip the line break after the delimiter.
    if (rest.substr(0, 2) == "\r\n") {
      rest.remove_prefix(2);
    } else if (rest.substr(0, 1) == "\n") {
      rest.remove_prefix(1);
    }
    auto next = rest.find(delim);
    if (next == std::string_view::npos) throw ApiError::invalid_argument("unterminated multipart");
    std::string_view part = rest.substr(0, next);
    if (part.size() >= 2 && part.substr(part.size() - 2) == "\r\n") {
      part.remove_suffix(2);
    } else if (!part.empty() && part.back() == '\n') {
      part.remove_suffix(1);
    }
    parts.push_back(part);
    rest.remove_prefix(next + delim.size());
  }
  if (parts.size() != 2) {
    throw ApiError::invalid_argument("multipart upload must have a metadata and a media part");
  }
  auto split = [](std::string_view part, std::string& headers) {
    auto end = part.find("\r\n\r\n");
    std::size_t skip = 4;
    if (end == std::string_view::npos) {
      end = part.find("\n\n");
      skip = 2;
    }
    if (end == std::string_view::npos) {
      headers = std::string(part);
      return std::string_view();
    }
    headers = std::string(part.substr(0, end));
    return part.substr(end + skip);
  };
  MultipartUpload out;
  std::string h1, h2;
  const std::string_view meta = split(parts[0], h1);
  const std::string_view media = split(parts[1], h2);
  out.metadata = json::parse(meta, nullptr, false);
  if (!out.metadata.is_object()) {
    throw ApiError::invalid_argument("the multipart metadata part is not a JSON object");
  }
  std::string lower;
  for (char c : h2) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (auto p = lower.find("content-type:"); p != std::string::npos) {
    auto e = h2.find_first_of("\r\n", p);
    std::string v = h2.substr(p + 13, e == std::string::npos ? std::string::npos : e - p - 13);
    while (!v.empty() && v.front() == ' ') v.erase(0, 1);
    out.content_type = v;
  }
  out.data = std::string(media);
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

struct GcpServer::Impl {
  explicit Impl(GcpServerOptions opts)
      : options(std::move(opts)),
        clock(options.clock ? options.clock : make_system_clock()),
        logs(options.list_scan_budget),
        read_quota(options.logging_reads_per_minute),
        tokens(clock, options.strict_credentials),
        copies(logs, objects, clock) {
    default_token = "ya29.falcon-fake-default." + random_hex(16);
    tokens.add_fixed(default_token);
    for (const auto& t : options.fixed_tokens) tokens.add_fixed(t);
    if (!options.data_dir.empty()) {
      const std::filesystem::path dir(options.data_dir);
      logs.attach_file(dir / "logging" / "entries.jsonl");
      objects.attach_dir(dir / "storage");
    }
    const int threads = std::max(2, options.threads);
    server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    server.set_keep_alive_max_count(1000);
    server.set_keep_alive_timeout(2);
    install_routes();
  }

  std::int64_t now_ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock->now().time_since_epoch())
        .count();
  }

  void count(const std::string& route) {
    std::lock_guard lock(counts_mutex);
    ++counts[route];
  }

  bool authorized(const httplib::Request& req) const {
    if (!options.require_auth) return true;
    const std::string h = req.get_header_value("Authorization");
    if (h.size() < 7) return false;
    std::string scheme = h.substr(0, 7);
    for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (scheme != "bearer ") return false;
    std::string token = h.substr(7);
    while (!token.empty() && token.front() == ' ') token.erase(0, 1);
    return tokens.valid(token);
  }

  // The scheme and authority clients used to reach us (session URIs are built from it).
  std::string origin(const httplib::Request& req) const {
    const std::string host = req.get_header_value("Host");
    return host.empty() ? base_url : "http://" + host;
  }

  using Handler = std::function<void(Call&)>;
  using RouteName = std::function<std::string(const httplib::Request&)>;

  void handle(const httplib::Request& req, httplib::Response& res,
              const httplib::ContentReader* reader, const std::string& route, Api api,
              bool authenticate, bool streams_body, const Handler& handler) {
    count(route);
    std::optional<Fault> fault = faults.take(route);
    Call call{req, res, reader, std::nullopt, false, {}};
    if (fault && fault->delay.count() > 0) std::this_thread::sleep_for(fault->delay);
    try {
      const bool ok = !authenticate || authorized(req);
      if (fault && fault->cut_connection) {
        if (streams_body && ok) {
          call.cut = fault;
          handler(call);
          return;
        }
        const std::int64_t length = content_length(req);
        std::int64_t limit = fault->cut_after_bytes >= 0 ? fault->cut_after_bytes : length / 2;
        if (reader && limit > 0) {
          (*reader)([&limit](const char*, std::size_t n) {
            limit -= static_cast<std::int64_t>(n);
            return limit > 0;
          });
        }
        cut_connection(req);
        res.status = 500;
        return;
      }
      if (!ok) {
        call.drain();
        if (api == Api::kStorage) {
          send_error(res, api, 401, "UNAUTHENTICATED", "required",
                     "Anonymous caller does not have storage.objects.get access to the Google "
                     "Cloud Storage object. Permission 'storage.objects.get' denied on resource "
                     "(or it may not exist).");
        } else {
          send_error(res, api, 401, "UNAUTHENTICATED", "required",
                     "Request had invalid authentication credentials. Expected OAuth 2 access "
                     "token, login cookie or other valid authentication credential. See "
                     "https://developers.google.com/identity/sign-in/web/devconsole-project.");
        }
        res.set_header("WWW-Authenticate", "Bearer realm=\"https://accounts.google.com/\"");
        return;
      }
      if (fault && fault->status != 0) {
        call.drain();
        const int code = fault->status;
        send_error(res, api, code, canonical_status(code), storage_reason(code),
                   fault->message.empty() ? default_message(api, code) : fault->message,
                   fault->retry_delay);
        return;
      }
      handler(call);
    } catch (const ApiError& e) {
      call.drain();
      send_error(res, api, e.http_status(), e.status(), e.reason(), e.what());
    } catch (const OAuthError& e) {
      call.drain();
      send_json(res, e.http_status(), json{{"error", e.code()}, {"error_description", e.what()}});
    } catch (const std::exception& e) {
      call.drain();
      send_error(res, api, 500, "INTERNAL", "backendError",
                 std::string("Internal error in the local GCP server: ") + e.what());
    }
  }

  void get(const std::string& pattern, RouteName name, Api api, bool auth, Handler h) {
    server.Get(pattern,
               [this, name, api, auth, h](const httplib::Request& req, httplib::Response& res) {
                 handle(req, res, nullptr, name(req), api, auth, false, h);
               });
  }

  // POST, PUT and DELETE routes read their body through a content reader, so that uploads
  // can stream and faults can cut a body half way.
  void with_body(const std::string& method, const std::string& pattern, RouteName name, Api api,
                 bool auth, bool streams, Handler h) {
    auto fn = [this, name, api, auth, streams, h](const httplib::Request& req,
                                                  httplib::Response& res,
                                                  const httplib::ContentReader& reader) {
      handle(req, res, &reader, name(req), api, auth, streams, h);
    };
    if (method == "POST") {
      server.Post(pattern, fn);
    } else if (method == "PUT") {
      server.Put(pattern, fn);
    } else {
      server.Delete(pattern, fn);
    }
  }

  static RouteName fixed(std::string name) {
    return [name](const httplib::Request&) { return name; };
  }

  void install_routes();
  void logging_list(Call& call);
  void logging_write(Call& call);
  void upload_post(Call& call);
  void upload_chunk(Call& call);
  void object_get(Call& call);
  void object_list(Call& call);
  void token(Call& call);
  void control_routes();

  GcpServerOptions options;
  std::shared_ptr<Clock> clock;
  httplib::Server server;
  LogStore logs;
  ReadQuota read_quota;
  ObjectStore objects;
  TokenAuthority tokens;
  LogCopyService copies;
  FaultInjector faults;
  std::string default_token;
  std::string base_url;
  int port = -1;
  std::thread thread;
  std::atomic<bool> listen_returned{false};
  bool started = false;
  bool stopped = false;
  mutable std::mutex counts_mutex;
  std::map<std::string, std::int64_t> counts;
};

// --- Logging ---------------------------------------------------------------------------------

void GcpServer::Impl::logging_list(Call& call) {
  const json body = parse_json_body(call);
  check_fields(body, {"resourceNames", "filter", "orderBy", "pageSize", "pageToken"});
  LogListRequest r;
  const json* names = field(body, "resourceNames", "resource_names");
  if (!names || !names->is_array() || names->empty()) {
    throw ApiError::invalid_argument("resourceNames: at least one resource name is required");
  }
  if (names->size() > 100) {
    throw ApiError::invalid_argument("resourceNames: at most 100 resource names are allowed");
  }
  for (const auto& n : *names) {
    if (!n.is_string()) throw ApiError::invalid_argument("resourceNames must be strings");
    r.resource_names.push_back(n.get<std::string>());
  }
  if (const json* f = field(body, "filter", "filter")) {
    if (!f->is_string()) throw ApiError::invalid_argument("filter must be a string");
    r.filter = f->get<std::string>();
    if (r.filter.size() > 20000) {
      throw ApiError::invalid_argument("filter: the maximum length of a filter is 20000");
    }
  }
  if (const json* o = field(body, "orderBy", "order_by")) {
    if (!o->is_string()) throw ApiError::invalid_argument("orderBy must be a string");
    std::string order;
    for (char c : o->get<std::string>()) {
      order += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    while (!order.empty() && order.back() == ' ') order.pop_back();
    while (!order.empty() && order.front() == ' ') order.erase(0, 1);
    if (order == "timestamp desc") {
      r.descending = true;
    } else if (!order.empty() && order != "timestamp asc" && order != "timestamp") {
      throw ApiError::invalid_argument(fmt::format(
          "orderBy: only \"timestamp asc\" and \"timestamp desc\" are supported, got \"{}\"",
          o->get<std::string>()));
    }
  }
  if (const json* p = field(body, "pageSize", "page_size")) {
    // proto3 JSON takes an int32 as a number or a decimal string.
    std::optional<std::int64_t> size;
    if (p->is_number_integer()) {
      size = p->get<std::int64_t>();
    } else if (p->is_string()) {
      try {
        std::size_t used = 0;
        const std::string s = p->get<std::string>();
        size = std::stoll(s, &used);
        if (used != s.size()) size.reset();
      } catch (const std::exception&) {
      }
    }
    if (!size) throw ApiError::invalid_argument("pageSize must be an integer");
    if (*size < 0 || *size > 1000) {
      throw ApiError::invalid_argument(
          fmt::format("pageSize: must be between 0 and 1000, got {}", *size));
    }
    r.page_size = *size == 0 ? 50 : static_cast<int>(*size);
  }
  if (const json* t = field(body, "pageToken", "page_token")) {
    if (!t->is_string()) throw ApiError::invalid_argument("pageToken must be a string");
    r.page_token = t->get<std::string>();
  }
  // The server's time, as Google's front ends send it: an HTTP-date of when the search began,
  // on the clock of receiveTimestamp (follow uses it to ask only for what arrived since).
  if (const auto wait = read_quota.admit(quota_project(r.resource_names.front()), clock->now())) {
    // Google rounds its RetryInfo to whole seconds; round up so the call after it succeeds.
    const auto seconds = std::chrono::ceil<std::chrono::seconds>(*wait).count();
    const int limit = read_quota.limit();
    send_error(call.res, Api::kLogging, 429, "RESOURCE_EXHAUSTED", "rateLimitExceeded",
               fmt::format("Quota exceeded for quota metric 'Read requests' and limit 'Read "
                           "requests per minute' of service 'logging.googleapis.com' for "
                           "consumer 'project_number:000000000000' ({} per minute).",
                           limit),
               fmt::format("{}s", std::max<std::int64_t>(seconds, 1)), limit);
    return;
  }
  call.res.set_header("Date", http_date(clock->now()));
  const LogListResult result = logs.list(r);
  std::string out = "{";
  if (!result.entries.empty()) {
    std::size_t total = 16;
    for (const auto& e : result.entries) total += e.size() + 1;
    out.reserve(total + 64);
    out += "\"entries\":[";
    for (std::size_t i = 0; i < result.entries.size(); ++i) {
      if (i) out += ',';
      out += result.entries[i];
    }
    out += ']';
  }
  if (!result.next_page_token.empty()) {
    if (out.size() > 1) out += ',';
    out += "\"nextPageToken\":";
    append_json_string(out, result.next_page_token);
  }
  out += '}';
  call.res.status = 200;
  call.res.set_content(out, kJson);
}

void GcpServer::Impl::logging_write(Call& call) {
  const json body = parse_json_body(call);
  check_fields(body, {"logName", "resource", "labels", "entries", "partialSuccess", "dryRun"});
  const json* entries = field(body, "entries", "entries");
  if (!entries || !entries->is_array() || entries->empty()) {
    throw ApiError::invalid_argument("entries: at least one log entry is required");
  }
  const json* log_name = field(body, "logName", "log_name");
  const json* resource = field(body, "resource", "resource");
  const json* labels = field(body, "labels", "labels");
  const json* dry = field(body, "dryRun", "dry_run");
  if (dry && dry->is_boolean() && dry->get<bool>()) {
    // Validate without storing: run the normalisation on a scratch store.
    LogStore scratch;
    scratch.write(entries->get<std::vector<json>>(), log_name ? *log_name : json(),
                  resource ? *resource : json(), labels ? *labels : json(), now_ns());
  } else {
    logs.write(entries->get<std::vector<json>>(), log_name ? *log_name : json(),
               resource ? *resource : json(), labels ? *labels : json(), now_ns());
  }
  send_json(call.res, 200, json::object());
}

// --- Storage ---------------------------------------------------------------------------------

void GcpServer::Impl::upload_post(Call& call) {
  const auto& req = call.req;
  const std::string bucket = req.matches[1];
  std::string upload_type = req.get_param_value("uploadType");
  if (upload_type.empty() && req.get_header_value("X-Goog-Upload-Protocol") == "resumable") {
    upload_type = "resumable";
  }
  std::optional<std::int64_t> if_generation_match = int_param(req, "ifGenerationMatch");
  const std::string query_name = req.get_param_value("name");
  if (upload_type == "resumable") {
    const json meta = parse_json_body(call);
    std::string name = query_name;
    if (meta.contains("name")) {
      const std::string body_name = meta.value("name", "");
      if (!query_name.empty() && body_name != query_name) {
        throw ApiError::invalid_argument(fmt::format(
            "Value '{}' in content does not agree with value '{}'.", body_name, query_name));
      }
      name = body_name;
    }
    if (name.empty()) throw ApiError(400, "INVALID_ARGUMENT", "required", "Required");
    std::string content_type = req.get_header_value("X-Upload-Content-Type");
    if (content_type.empty()) content_type = meta.value("contentType", "");
    const std::string id = objects.start_upload(
        bucket, name, content_type, meta.value("metadata", json()), if_generation_match, now_ns());
    call.res.status = 200;
    call.res.set_header("Location",
                        fmt::format("{}/upload/storage/v1/b/{}/o?uploadType=resumable&name={}"
                                    "&upload_id={}",
                                    origin(req), bucket, percent_encode(name), id));
    call.res.set_header("X-GUploader-UploadID", id);
    return;
  }
  std::shared_ptr<const StoredObject> object;
  if (upload_type == "media") {
    if (query_name.empty()) throw ApiError(400, "INVALID_ARGUMENT", "required", "Required");
    std::string data = call.body();
    object =
        objects.insert(bucket, query_name, std::move(data), req.get_header_value("Content-Type"),
                       json(), if_generation_match, now_ns());
  } else if (upload_type == "multipart") {
    MultipartUpload up = parse_multipart_related(req.get_header_value("Content-Type"), call.body());
    std::string name = up.metadata.value("name", query_name);
    if (!query_name.empty() && name != query_name) {
      throw ApiError::invalid_argument(
          fmt::format("Value '{}' in content does not agree with value '{}'.", name, query_name));
    }
    std::string content_type = up.metadata.value("contentType", up.content_type);
    object = objects.insert(bucket, name, std::move(up.data), content_type,
                            up.metadata.value("metadata", json()), if_generation_match, now_ns());
  } else {
    throw ApiError::invalid_argument(fmt::format(
        "Invalid upload type: '{}' (expected resumable, media or multipart)", upload_type));
  }
  send_json(call.res, 200, object->to_json(origin(req)));
}

void GcpServer::Impl::upload_chunk(Call& call) {
  const auto& req = call.req;
  const std::string id = req.get_param_value("upload_id");
  if (id.empty()) throw ApiError::invalid_argument("upload_id is required");
  const std::int64_t length = content_length(req);
  ContentRange range;
  if (req.has_header("Content-Range")) {
    auto parsed = parse_content_range(req.get_header_value("Content-Range"));
    if (!parsed) {
      throw ApiError::invalid_argument("Failed to parse Content-Range header: " +
                                       req.get_header_value("Content-Range"));
    }
    range = *parsed;
  } else if (length > 0) {
    // No Content-Range: the body is the whole object.
    range.first = 0;
    range.last = length - 1;
    range.total = length;
  } else {
    range.total = 0;
  }
  const std::int64_t expected = range.first ? *range.last - *range.first + 1 : 0;
  if (length != expected) {
    throw ApiError::invalid_argument(fmt::format(
        "Content-Length {} does not match the {} byte(s) of Content-Range", length, expected));
  }
  auto writer = objects.open_chunk(id, range, now_ns());
  auto respond = [&](const UploadState& st) {
    call.res.set_header("X-GUploader-UploadID", id);
    if (st.done) {
      send_json(call.res, 200, st.object->to_json(origin(req)));
      return;
    }
    call.res.status = 308;
    if (st.persisted > 0) call.res.set_header("Range", fmt::format("bytes=0-{}", st.persisted - 1));
    call.res.set_header("Content-Length", "0");
  };
  if (writer->already_done()) {
    call.drain();
    respond(writer->state());
    return;
  }
  std::int64_t limit = -1;
  if (call.cut) limit = call.cut->cut_after_bytes >= 0 ? call.cut->cut_after_bytes : length / 2;
  std::int64_t got = 0;
  bool complete = true;
  call.body_read = true;
  if (length > 0 && limit != 0) {
    complete = (*call.reader)([&](const char* d, std::size_t n) {
      std::size_t take = n;
      if (limit >= 0)
        take = static_cast<std::size_t>(
            std::min<std::int64_t>(static_cast<std::int64_t>(n), limit - got));
      writer->append(d, take);
      got += static_cast<std::int64_t>(take);
      return limit < 0 || got < limit;
    });
  }
  if (call.cut) {
    writer->interrupted();
    writer.reset();
    cut_connection(req);
    call.res.status = 500;
    return;
  }
  if (!complete || got != length) {
    // The client went away mid-body: keep what is whole, answer nobody.
    writer->interrupted();
    call.res.status = 400;
    return;
  }
  respond(writer->finish());
}

void GcpServer::Impl::object_get(Call& call) {
  const auto& req = call.req;
  const std::string bucket = req.matches[1];
  const std::string name = object_name_from_target(req);
  auto object = objects.get(bucket, name);
  if (auto gen = int_param(req, "generation"); gen && *gen != object->generation) {
    throw ApiError::not_found(fmt::format("No such object: {}/{}", bucket, name));
  }
  const bool media =
      req.get_param_value("alt") == "media" || raw_path(req).rfind("/download/", 0) == 0;
  if (!media) {
    send_json(call.res, 200, object->to_json(origin(req)));
    return;
  }
  auto& res = call.res;
  // Status left unset: httplib answers 200, or 206 when the request carries a Range.
  res.set_header("x-goog-hash",
                 fmt::format("crc32c={},md5={}", object->crc32c_base64, object->md5_base64));
  res.set_header("x-goog-generation", std::to_string(object->generation));
  res.set_header("x-goog-metageneration", std::to_string(object->metageneration));
  res.set_header("x-goog-stored-content-length", std::to_string(object->data->size()));
  res.set_header("x-goog-stored-content-encoding", "identity");
  res.set_header("ETag", "\"" + tools::base64_encode(std::to_string(object->generation)) + "\"");
  // Object bytes go out as stored: never let the HTTP layer gzip them on the fly.
  const_cast<httplib::Request&>(req).headers.erase("Accept-Encoding");
  std::shared_ptr<const std::string> data = object->data;
  // A Range reaching past the end gets the bytes there are, as GCS answers (206, Content-Range
  // bytes a-(size-1)/size); httplib would announce the whole range and close short of it.
  for (auto& range : const_cast<httplib::Request&>(req).ranges) {
    const auto last = static_cast<ssize_t>(data->size()) - 1;
    if (range.second > last) range.second = last;
  }
  if (data->empty()) {
    // httplib keeps calling a provider of length 0; an empty body needs none.
    res.set_content("", object->content_type);
    return;
  }
  res.set_content_provider(
      data->size(), object->content_type,
      [data](std::size_t offset, std::size_t length, httplib::DataSink& sink) {
        // A Range reaching past the end must not read past the buffer.
        if (offset >= data->size()) return false;
        const std::size_t n = std::min({length, data->size() - offset, std::size_t{1} << 20});
        return sink.write(data->data() + offset, n);
      });
}

void GcpServer::Impl::object_list(Call& call) {
  const auto& req = call.req;
  const std::string bucket = req.matches[1];
  std::int64_t max = int_param(req, "maxResults").value_or(1000);
  if (max <= 0 || max > 1000) max = 1000;
  auto result =
      objects.list(bucket, req.get_param_value("prefix"), req.get_param_value("delimiter"),
                   req.get_param_value("startOffset"), req.get_param_value("endOffset"),
                   static_cast<std::size_t>(max), req.get_param_value("pageToken"));
  json out{{"kind", "storage#objects"}};
  if (!result.items.empty()) {
    json items = json::array();
    for (const auto& o : result.items) items.push_back(o->to_json(origin(req)));
    out["items"] = std::move(items);
  }
  if (!result.prefixes.empty()) out["prefixes"] = result.prefixes;
  if (!result.next_page_token.empty()) out["nextPageToken"] = result.next_page_token;
  send_json(call.res, 200, out);
}

// --- OAuth -----------------------------------------------------------------------------------

void GcpServer::Impl::token(Call& call) {
  std::map<std::string, std::string> form;
  const std::string content_type = call.req.get_header_value("Content-Type");
  if (content_type.rfind("application/json", 0) == 0) {
    const json j = parse_json_body(call);
    for (const auto& [k, v] : j.items()) {
      if (v.is_string()) form[k] = v.get<std::string>();
    }
  } else {
    form = parse_form(call.body());
  }
  std::vector<std::string> urls{base_url + "/token", origin(call.req) + "/token",
                                fmt::format("http://localhost:{}/token", port)};
  send_json(call.res, 200, tokens.grant(form, urls));
}

// --- Routes ----------------------------------------------------------------------------------

void GcpServer::Impl::install_routes() {
  // Logging.
  with_body("POST", "/v2/entries:list", fixed("logging.list"), Api::kLogging, true, false,
            [this](Call& c) { logging_list(c); });
  with_body("POST", "/v2/entries:write", fixed("logging.write"), Api::kLogging, true, false,
            [this](Call& c) { logging_write(c); });
  // entries:copy and its long-running operations; log buckets and settings (log_copy.h).
  with_body("POST", "/v2/entries:copy", fixed("logging.copy"), Api::kLogging, true, false,
            [this](Call& c) { send_json(c.res, 200, copies.start(parse_json_body(c))); });
  const std::string operations = R"(/v2/(projects/[^/]+/locations/[^/]+)/operations)";
  get(operations + R"(/([^/:]+))", fixed("logging.operations_get"), Api::kLogging, true,
      [this](Call& c) {
        send_json(c.res, 200,
                  copies.get(c.req.matches[1].str() + "/operations/" + c.req.matches[2].str()));
      });
  with_body("POST", operations + R"(/([^/:]+):cancel)", fixed("logging.operations_cancel"),
            Api::kLogging, true, false, [this](Call& c) {
              c.drain();
              copies.cancel(c.req.matches[1].str() + "/operations/" + c.req.matches[2].str());
              send_json(c.res, 200, json::object());
            });
  get(operations, fixed("logging.operations_list"), Api::kLogging, true, [this](Call& c) {
    send_json(c.res, 200, copies.list(c.req.matches[1].str(), c.req.get_param_value("filter")));
  });
  get(R"(/v2/(projects/[^/]+/locations/[^/]+/buckets/[^/]+))", fixed("logging.bucket_get"),
      Api::kLogging, true,
      [this](Call& c) { send_json(c.res, 200, copies.log_bucket(c.req.matches[1].str())); });
  get(R"(/v2/projects/([^/]+)/settings)", fixed("logging.settings_get"), Api::kLogging, true,
      [this](Call& c) {
        send_json(c.res, 200, LogCopyService::settings_of(c.req.matches[1].str()));
      });

  // Storage uploads.
  // gcloud (apitools) starts resumable uploads on /resumable/upload/...; GCS serves both.
  for (const std::string upload :
       {R"(/upload/storage/v1/b/([^/]+)/o)", R"(/resumable/upload/storage/v1/b/([^/]+)/o)"}) {
    with_body(
        "POST", upload,
        [](const httplib::Request& req) {
          if (req.has_param("upload_id")) return std::string("storage.upload_chunk");
          const std::string t = req.get_param_value("uploadType");
          return std::string(t == "resumable" ||
                                     req.get_header_value("X-Goog-Upload-Protocol") == "resumable"
                                 ? "storage.upload_init"
                                 : "storage.upload_media");
        },
        Api::kStorage, true, true,
        [this](Call& c) {
          if (c.req.has_param("upload_id")) {
            upload_chunk(c);
          } else {
            upload_post(c);
          }
        });
    with_body("PUT", upload, fixed("storage.upload_chunk"), Api::kStorage, true, true,
              [this](Call& c) { upload_chunk(c); });
    with_body("DELETE", upload, fixed("storage.upload_cancel"), Api::kStorage, true, false,
              [this](Call& c) {
                const std::string id = c.req.get_param_value("upload_id");
                if (!objects.cancel_upload(id)) {
                  throw ApiError::not_found("No such upload session");
                }
                c.res.status = 499;
                c.res.set_header("Content-Length", "0");
              });
  }

  // Storage objects and buckets.
  const std::string object = R"(/storage/v1/b/([^/]+)/o/(.+))";
  get(object, fixed("storage.get"), Api::kStorage, true, [this](Call& c) { object_get(c); });
  get(R"(/download/storage/v1/b/([^/]+)/o/(.+))", fixed("storage.get"), Api::kStorage, true,
      [this](Call& c) { object_get(c); });
  with_body("DELETE", object, fixed("storage.delete"), Api::kStorage, true, false, [this](Call& c) {
    objects.remove(c.req.matches[1], object_name_from_target(c.req));
    c.res.status = 204;
  });
  get(R"(/storage/v1/b/([^/]+)/iam)", fixed("storage.iam_get"), Api::kStorage, true,
      [this](Call& c) { send_json(c.res, 200, objects.get_iam_policy(c.req.matches[1])); });
  with_body("PUT", R"(/storage/v1/b/([^/]+)/iam)", fixed("storage.iam_set"), Api::kStorage, true,
            false, [this](Call& c) {
              send_json(c.res, 200, objects.set_iam_policy(c.req.matches[1], parse_json_body(c)));
            });
  get(R"(/storage/v1/b/([^/]+)/o)", fixed("storage.list"), Api::kStorage, true,
      [this](Call& c) { object_list(c); });
  get(R"(/storage/v1/b/([^/]+))", fixed("storage.bucket_get"), Api::kStorage, true,
      [this](Call& c) { send_json(c.res, 200, objects.get_bucket(c.req.matches[1])); });
  get("/storage/v1/b", fixed("storage.bucket_list"), Api::kStorage, true, [this](Call& c) {
    json out{{"kind", "storage#buckets"}};
    auto items = objects.list_buckets();
    if (!items.empty()) out["items"] = items;
    send_json(c.res, 200, out);
  });
  with_body("POST", "/storage/v1/b", fixed("storage.bucket_create"), Api::kStorage, true, false,
            [this](Call& c) {
              const json body = parse_json_body(c);
              const std::string name = body.value("name", "");
              if (name.empty()) throw ApiError(400, "INVALID_ARGUMENT", "required", "Required");
              send_json(c.res, 200,
                        objects.create_bucket(name, c.req.get_param_value("project"), now_ns()));
            });

  // OAuth.
  for (const char* path : {"/token", "/oauth2/v4/token"}) {
    with_body("POST", path, fixed("oauth.token"), Api::kOAuth, false, false,
              [this](Call& c) { token(c); });
  }

  // Metadata server.
  auto metadata = [this](std::function<void(Call&)> body) {
    return [this, body](Call& c) {
      c.res.set_header("Metadata-Flavor", "Google");
      if (c.req.get_header_value("Metadata-Flavor") != "Google") {
        c.res.status = 403;
        c.res.set_content("Missing required header \"Metadata-Flavor\": \"Google\"\n",
                          "text/html; charset=UTF-8");
        return;
      }
      body(c);
    };
  };
  get(R"(/computeMetadata/v1/instance/service-accounts/([^/]+)/token)", fixed("metadata.token"),
      Api::kMetadata, false,
      metadata([this](Call& c) { send_json(c.res, 200, tokens.metadata_token()); }));
  get(R"(/computeMetadata/v1/instance/service-accounts/([^/]+)/?)", fixed("metadata.other"),
      Api::kMetadata, false, metadata([this](Call& c) {
        send_json(
            c.res, 200,
            json{{"aliases", json::array({"default"})},
                 {"email", options.service_account_email},
                 {"scopes", json::array({"https://www.googleapis.com/auth/cloud-platform"})}});
      }));
  get(R"(/computeMetadata/v1/instance/service-accounts/([^/]+)/email)", fixed("metadata.other"),
      Api::kMetadata, false, metadata([this](Call& c) {
        c.res.set_content(options.service_account_email, "application/text");
      }));
  get("/computeMetadata/v1/project/project-id", fixed("metadata.other"), Api::kMetadata, false,
      metadata([this](Call& c) { c.res.set_content(options.project_id, "application/text"); }));
  get("/", fixed("metadata.other"), Api::kMetadata, false, [](Call& c) {
    // The detection ping of google-auth: any 200 with the Metadata-Flavor header.
    c.res.set_header("Metadata-Flavor", "Google");
    c.res.set_content("computeMetadata/\n", "application/text");
  });

  control_routes();
}

void GcpServer::Impl::control_routes() {
  auto json_body = [](const httplib::Request& req) {
    if (req.body.empty()) return json::object();
    json j = json::parse(req.body, nullptr, false);
    if (j.is_discarded()) throw std::invalid_argument("the body is not JSON");
    return j;
  };
  auto guarded = [](std::function<void(const httplib::Request&, httplib::Response&)> fn) {
    return [fn](const httplib::Request& req, httplib::Response& res) {
      try {
        fn(req, res);
      } catch (const std::exception& e) {
        send_json(res, 400, json{{"error", e.what()}});
      }
    };
  };
  server.Get("/_fake/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  server.Get("/_fake/counters", [this](const httplib::Request&, httplib::Response& res) {
    json requests = json::object();
    {
      std::lock_guard lock(counts_mutex);
      for (const auto& [k, v] : counts) requests[k] = v;
    }
    send_json(res, 200,
              json{{"requests", requests},
                   {"log_entries", logs.size()},
                   {"log_entries_examined", logs.examined()},
                   {"logging_quota_rejections", read_quota.rejected()},
                   {"objects", objects.object_count()}});
  });
  // entries:copy's behaviour (log_copy.h CopySettings): GET shows it, POST changes the fields
  // given.
  server.Get("/_fake/copy", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, to_json(copies.copy_settings()));
  });
  server.Post("/_fake/copy",
              guarded([this, json_body](const httplib::Request& req, httplib::Response& res) {
                CopySettings s = copies.copy_settings();
                apply_copy_settings(json_body(req), s);
                copies.set_copy_settings(s);
                send_json(res, 200, to_json(s));
              }));
  // {"name": "projects/P/locations/L/buckets/B", "kms_key_name": "..."} ("" removes it).
  server.Post("/_fake/log_buckets",
              guarded([this, json_body](const httplib::Request& req, httplib::Response& res) {
                const json j = json_body(req);
                copies.set_cmek(j.at("name").get<std::string>(),
                                j.value("kms_key_name", std::string()));
                send_json(res, 200, copies.log_bucket(j.at("name").get<std::string>()));
              }));
  // {"project", "bucket", "until" (RFC 3339; default now), "shard_entries" (default 100000),
  // "duplicate_every" (default 0)}: what a sink of the project to the bucket wrote by then.
  server.Post("/_fake/sink_archive",
              guarded([this, json_body](const httplib::Request& req, httplib::Response& res) {
                const json j = json_body(req);
                std::int64_t until = now_ns();
                if (j.contains("until")) {
                  const auto parsed = tools::parse_rfc3339_nanos(j.at("until").get<std::string>());
                  if (!parsed) throw std::invalid_argument("until is not an RFC 3339 time");
                  until = *parsed;
                }
                const std::int64_t written = copies.write_sink_archive(
                    j.at("project").get<std::string>(), j.at("bucket").get<std::string>(), until,
                    std::max<std::int64_t>(1, j.value("shard_entries", std::int64_t{100000})),
                    j.value("duplicate_every", std::int64_t{0}));
                send_json(res, 200, json{{"objects", written}});
              }));
  server.Post("/_fake/reset", [this](const httplib::Request&, httplib::Response& res) {
    faults.clear();
    copies.clear();
    {
      std::lock_guard lock(counts_mutex);
      counts.clear();
    }
    logs.clear();
    read_quota.reset();
    objects.clear();
    send_json(res, 200, json::object());
  });
  // The read quota, changed while serving: {"logging_reads_per_minute": N} (0: none).
  server.Post("/_fake/quota", [this](const httplib::Request& req, httplib::Response& res) {
    const json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object() || !body.contains("logging_reads_per_minute") ||
        !body["logging_reads_per_minute"].is_number_integer() ||
        body["logging_reads_per_minute"].get<std::int64_t>() < 0) {
      send_json(res, 400,
                json{{"error", "expected {\"logging_reads_per_minute\": N} with N >= 0"}});
      return;
    }
    read_quota.set_limit(body["logging_reads_per_minute"].get<int>());
    send_json(res, 200, json{{"logging_reads_per_minute", read_quota.limit()}});
  });
  server.Get("/_fake/faults", [this](const httplib::Request&, httplib::Response& res) {
    json out = json::array();
    for (const auto& f : faults.pending()) out.push_back(f.to_json());
    send_json(res, 200, json{{"faults", out}});
  });
  server.Post("/_fake/faults",
              guarded([this, json_body](const httplib::Request& req, httplib::Response& res) {
                const json j = json_body(req);
                // One fault object, an array of them, or {"faults":[...]}.
                const json list = j.is_array()                            ? j
                                  : j.is_object() && j.contains("faults") ? j["faults"]
                                                                          : json::array({j});
                std::vector<Fault> parsed;
                for (const auto& f : list) parsed.push_back(Fault::from_json(f));
                for (auto& f : parsed) faults.add(std::move(f));
                send_json(res, 200, json{{"added", parsed.size()}});
              }));
  server.Delete("/_fake/faults", [this](const httplib::Request&, httplib::Response& res) {
    faults.clear();
    send_json(res, 200, json::object());
  });
  server.Post("/_fake/tokens",
              guarded([this, json_body](const httplib::Request& req, httplib::Response& res) {
                const json j = json_body(req);
                std::string token = j.value("token", "");
                if (token.empty()) token = tokens.issue();
                tokens.add_fixed(token);
                send_json(res, 200, json{{"token", token}});
              }));
  server.Post("/_fake/service_accounts",
              guarded([this, json_body](const httplib::Request& req, httplib::Response& res) {
                const json j = json_body(req);
                const std::string email =
                    j.value("client_email", "falcon-test@falcon-local.iam.gserviceaccount.com");
                send_json(res, 200, tokens.create_service_account(email, base_url + "/token"));
              }));
  server.Post("/_fake/authorized_users", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, tokens.create_authorized_user(base_url + "/token"));
  });
}

// ---------------------------------------------------------------------------------------------

GcpServer::GcpServer(GcpServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

GcpServer::~GcpServer() { stop(); }

httplib::Server& GcpServer::http() { return impl_->server; }

void GcpServer::start() {
  Impl& s = *impl_;
  if (s.started) throw std::runtime_error("GcpServer::start called twice");
  if (s.options.port == 0) {
    s.port = s.server.bind_to_any_port(s.options.host);
  } else {
    s.port = s.server.bind_to_port(s.options.host, s.options.port) ? s.options.port : -1;
  }
  if (s.port <= 0) {
    throw std::runtime_error(fmt::format("cannot bind {}:{}", s.options.host, s.options.port));
  }
  const bool v6 = s.options.host.find(':') != std::string::npos;
  s.base_url =
      fmt::format("http://{}:{}", v6 ? "[" + s.options.host + "]" : s.options.host, s.port);
  s.started = true;
  s.thread = std::thread([&s] {
    s.server.listen_after_bind();
    s.listen_returned = true;
  });
  // The socket already listens (connections queue in its backlog); wait until the accept loop
  // runs too, so that stop() is never missed.
  while (!s.server.is_running() && !s.listen_returned) std::this_thread::yield();
}

void GcpServer::stop() {
  Impl& s = *impl_;
  if (!s.started || s.stopped) return;
  s.stopped = true;
  s.server.stop();
  if (s.thread.joinable()) s.thread.join();
}

int GcpServer::port() const { return impl_->port; }
std::string GcpServer::base_url() const { return impl_->base_url; }
std::string GcpServer::valid_token() const { return impl_->default_token; }

void GcpServer::write_log_entries(const std::vector<json>& entries) {
  impl_->logs.write(entries, json(), json(), json(), impl_->now_ns());
}

void GcpServer::write_log_entries(std::vector<json>&& entries) {
  impl_->logs.write(std::move(entries), json(), json(), json(), impl_->now_ns());
}

void GcpServer::write_text_entries(const json& shared, std::vector<LogLine> lines) {
  impl_->logs.write_text(shared, std::move(lines), impl_->now_ns());
}

void GcpServer::ensure_bucket(const std::string& name, const std::string& project) {
  try {
    impl_->objects.create_bucket(name, project, impl_->now_ns());
  } catch (const ApiError& e) {
    if (e.http_status() != 409) throw;  // it exists already
  }
}

std::size_t GcpServer::log_entry_count() const { return impl_->logs.size(); }
std::uint64_t GcpServer::log_entries_examined() const { return impl_->logs.examined(); }
std::size_t GcpServer::object_count() const { return impl_->objects.object_count(); }
std::optional<std::string> GcpServer::object_data(const std::string& bucket,
                                                  const std::string& name) const {
  try {
    const auto object = impl_->objects.get(bucket, name);
    if (!object || !object->data) return std::nullopt;
    return *object->data;
  } catch (const ApiError&) {
    return std::nullopt;  // 404: no such bucket or object
  }
}
std::int64_t GcpServer::logging_quota_rejections() const { return impl_->read_quota.rejected(); }

FaultInjector& GcpServer::faults() { return impl_->faults; }
LogCopyService& GcpServer::copies() { return impl_->copies; }

std::map<std::string, std::int64_t> GcpServer::request_counts() const {
  std::lock_guard lock(impl_->counts_mutex);
  return impl_->counts;
}

void GcpServer::reset() {
  impl_->faults.clear();
  impl_->copies.clear();
  {
    std::lock_guard lock(impl_->counts_mutex);
    impl_->counts.clear();
  }
  impl_->logs.clear();
  impl_->read_quota.reset();
  impl_->objects.clear();
}

void GcpServer::add_token(const std::string& token) { impl_->tokens.add_fixed(token); }

std::string GcpServer::create_service_account_key(const std::string& client_email) const {
  return impl_->tokens.create_service_account(client_email, impl_->base_url + "/token").dump(2);
}

std::string GcpServer::create_authorized_user() const {
  return impl_->tokens.create_authorized_user(impl_->base_url + "/token").dump(2);
}

}  // namespace falcon::fake
