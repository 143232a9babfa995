#include "fleet/manager_api.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "fleet/manager.h"

namespace falcon::fleet {
namespace {

using nlohmann::json;

constexpr const char* kGroup = "kueue.x-k8s.io";
constexpr const char* kConfigMapPath = "/api/v1/namespaces/kueue-system/configmaps";
constexpr const char* kOpenApiPath = "/openapi/v3";
// A watch streams as this type: "application/json" alone would be gzipped by the server
// whenever the client accepts gzip (as kubectl does), and the compressor holds the events back
// until the watch ends. kube-apiserver itself says ";stream=watch" for streaming serializers.
constexpr const char* kWatchContentType = "application/json;stream=watch";

// OpenAPI v3 (kubectl create's validation): the root's index of group versions, and for each
// of the two versions the paths of the Workloads whose PATCH takes fieldValidation, which is
// what kubectl looks for to leave validation to the server (--validate=strict, its default).
// The fleet validates what the manager reads (create_workload); unknown fields are ignored.
std::optional<json> openapi(const std::string& path) {
  if (path == kOpenApiPath || path == std::string(kOpenApiPath) + "/") {
    json paths = json::object();
    for (const char* v : {"v1beta1", "v1beta2"}) {
      paths[fmt::format("apis/{}/{}", kGroup, v)] = {
          {"serverRelativeURL", fmt::format("{}/apis/{}/{}?hash=fleet", kOpenApiPath, kGroup, v)}};
    }
    return json{{"paths", paths}};
  }
  for (const char* v : {"v1beta1", "v1beta2"}) {
    if (path != fmt::format("{}/apis/{}/{}", kOpenApiPath, kGroup, v)) continue;
    const json gvk = {{"group", kGroup}, {"version", v}, {"kind", "Workload"}};
    const json params = json::array(
        {{{"name", "fieldValidation"}, {"in", "query"}, {"schema", {{"type", "string"}}}},
         {{"name", "fieldManager"}, {"in", "query"}, {"schema", {{"type", "string"}}}}});
    const json operation = {{"x-kubernetes-group-version-kind", gvk},
                            {"parameters", params},
                            {"responses", {{"200", {{"description", "OK"}}}}}};
    const std::string base =
        fmt::format("/apis/{}/{}/namespaces/{{namespace}}/workloads", kGroup, v);
    json post = operation;
    post["responses"] = {{"201", {{"description", "Created"}}}};
    return json{{"openapi", "3.0.0"},
                {"info", {{"title", "falcon fleet: the MultiKueue manager"}, {"version", v}}},
                {"paths",
                 {{base, {{"post", post}}},
                  {base + "/{name}", {{"patch", operation}, {"delete", operation}}},
                  {base + "/{name}/status", {{"patch", operation}}}}},
                {"components", {{"schemas", json::object()}}}};
  }
  return std::nullopt;
}

json status_json(int code, const std::string& reason, const std::string& message,
                 const std::string& field = "", const std::string& kind = "") {
  json s = {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
            {"status", "Failure"}, {"message", message}, {"reason", reason},
            {"code", code}};
  if (!kind.empty() || !field.empty()) {
    json details = {{"group", kGroup}, {"kind", kind.empty() ? "workloads" : kind}};
    if (!field.empty()) {
      // The cause says what is wrong with the field (kubectl prints "<field>: <cause>"): the
      // message without its `Workload... "x" is invalid: <field>: ` head.
      const std::string head = " is invalid: " + field + ": ";
      const std::size_t at = message.find(head);
      const std::string cause =
          at == std::string::npos ? message : message.substr(at + head.size());
      details["causes"] =
          json::array({{{"reason", "FieldValueInvalid"}, {"message", cause}, {"field", field}}});
    }
    s["details"] = std::move(details);
  }
  return s;
}

void reply(httplib::Response& res, int code, const json& body) {
  res.status = code;
  res.set_content(body.dump(), "application/json");
}

void fail(httplib::Response& res, int code, const std::string& reason, const std::string& message) {
  reply(res, code, status_json(code, reason, message));
}

// The object as the version asked for shows it.
json relabel(json object, const std::string& version) {
  object["apiVersion"] = std::string(kGroup) + "/" + version;
  return object;
}

json resource(const std::string& name, const std::string& kind, const std::string& singular,
              bool namespaced, std::vector<std::string> verbs,
              std::vector<std::string> short_names = {}) {
  json r = {{"name", name},
            {"singularName", singular},
            {"namespaced", namespaced},
            {"kind", kind},
            {"verbs", verbs}};
  if (!short_names.empty()) r["shortNames"] = short_names;
  return r;
}

std::string age(std::int64_t created_ns, std::int64_t now_ns) {
  const long long s = std::max<long long>(0, (now_ns - created_ns) / 1'000'000'000);
  if (s < 120) return fmt::format("{}s", s);
  if (s < 3600 * 3) return fmt::format("{}m", s / 60);
  if (s < 86400 * 2) return fmt::format("{}h", s / 3600);
  return fmt::format("{}d", s / 86400);
}

std::int64_t created_ns(const json& object) {
  // The manager writes whole seconds, Z; parse "YYYY-MM-DDTHH:MM:SSZ".
  std::tm tm{};
  const std::string t = object["metadata"].value("creationTimestamp", "");
  if (std::sscanf(t.c_str(), "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &tm.tm_sec) != 6) {
    return 0;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<std::int64_t>(timegm(&tm)) * 1'000'000'000;
}

std::string condition_status(const json& object, const char* type) {
  for (const json& c : object["status"].value("conditions", json::array())) {
    if (c.value("type", "") == type) return c.value("status", "");
  }
  return "";
}

json column(const std::string& name, const std::string& type, const std::string& format = "") {
  return {
      {"name", name}, {"type", type}, {"format", format}, {"description", name}, {"priority", 0}};
}

// A meta.k8s.io/v1 Table of `objects` of `resource`, with the CRD's printer columns.
json table(const std::string& resource, const std::vector<json>& objects, std::uint64_t version,
           std::int64_t now_ns) {
  json columns = json::array({column("Name", "string", "name")});
  if (resource == "workloads") {
    for (const char* c : {"Queue", "Reserved in", "Admitted", "Finished"}) {
      columns.push_back(column(c, "string"));
    }
  } else if (resource == "multikueueclusters") {
    columns.push_back(column("Connected", "string"));
  }
  columns.push_back(column("Age", "date"));
  json rows = json::array();
  for (const json& o : objects) {
    json cells = json::array({o["metadata"]["name"]});
    if (resource == "workloads") {
      cells.push_back(o["spec"].value("queueName", ""));
      cells.push_back(o["status"].value("admission", json::object()).value("clusterQueue", ""));
      cells.push_back(condition_status(o, "Admitted"));
      cells.push_back(condition_status(o, "Finished"));
    } else if (resource == "multikueueclusters") {
      cells.push_back(condition_status(o, "Active"));
    }
    cells.push_back(age(created_ns(o), now_ns));
    rows.push_back({{"cells", cells},
                    {"object",
                     {{"kind", "PartialObjectMetadata"},
                      {"apiVersion", "meta.k8s.io/v1"},
                      {"metadata", o["metadata"]}}}});
  }
  return {{"kind", "Table"},
          {"apiVersion", "meta.k8s.io/v1"},
          {"metadata", {{"resourceVersion", std::to_string(version)}}},
          {"columnDefinitions", columns},
          {"rows", rows}};
}

// labelSelector and fieldSelector, the equality-based forms.
struct Selector {
  struct Term {
    std::string key;
    enum class Op { kEquals, kNotEquals, kExists, kNotExists } op = Op::kEquals;
    std::string value;
  };
  std::vector<Term> labels;
  std::vector<Term> fields;  // metadata.name, metadata.namespace

  bool matches(const json& object) const {
    const json& meta = object["metadata"];
    const json labels_of = meta.value("labels", json::object());
    const auto test = [](const Term& t, const std::optional<std::string>& v) {
      switch (t.op) {
        case Term::Op::kEquals:
          return v && *v == t.value;
        case Term::Op::kNotEquals:
          return !v || *v != t.value;
        case Term::Op::kExists:
          return v.has_value();
        case Term::Op::kNotExists:
          return !v.has_value();
      }
      return false;
    };
    for (const Term& t : labels) {
      const auto it = labels_of.find(t.key);
      const std::optional<std::string> v =
          it == labels_of.end() ? std::nullopt : std::optional(it->get<std::string>());
      if (!test(t, v)) return false;
    }
    for (const Term& t : fields) {
      const std::string key = t.key == "metadata.name" ? "name" : "namespace";
      if (!test(t, meta.value(key, ""))) return false;
    }
    return true;
  }
};

std::string trim(std::string s) {
  while (!s.empty() && s.front() == ' ') s.erase(0, 1);
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// Parses `text` into `out`; returns the problem, or nullopt.
std::optional<std::string> parse_terms(const std::string& text, bool fields,
                                       std::vector<Selector::Term>& out) {
  if (text.find('(') != std::string::npos) {
    return "set-based selectors (in, notin) are not supported by the fleet";
  }
  std::size_t i = 0;
  while (i <= text.size()) {
    std::size_t j = text.find(',', i);
    if (j == std::string::npos) j = text.size();
    const std::string part = trim(text.substr(i, j - i));
    i = j + 1;
    if (part.empty()) {
      if (j == text.size()) break;
      continue;
    }
    Selector::Term t;
    std::size_t at = part.find("!=");
    std::size_t len = 2;
    t.op = Selector::Term::Op::kNotEquals;
    if (at == std::string::npos) {
      at = part.find("==");
      t.op = Selector::Term::Op::kEquals;
    }
    if (at == std::string::npos) {
      at = part.find('=');
      len = 1;
    }
    if (at == std::string::npos) {
      if (fields) return fmt::format("invalid field selector '{}'", part);
      t.op = part.front() == '!' ? Selector::Term::Op::kNotExists : Selector::Term::Op::kExists;
      t.key = trim(part.front() == '!' ? part.substr(1) : part);
    } else {
      t.key = trim(part.substr(0, at));
      t.value = trim(part.substr(at + len));
    }
    if (fields && t.key != "metadata.name" && t.key != "metadata.namespace") {
      return fmt::format("field label not supported: {}", t.key);
    }
    out.push_back(std::move(t));
    if (j == text.size()) break;
  }
  return std::nullopt;
}

// What a request path names: /apis/kueue.x-k8s.io/<v>[/namespaces/<ns>]/<resource>[/<name>
// [/<sub>]].
struct Target {
  std::string version;
  std::string namespace_;
  std::string resource;
  std::string name;
  std::string subresource;
};

std::optional<Target> parse_target(const std::string& path) {
  std::vector<std::string> parts;
  for (std::size_t i = 1; i <= path.size();) {
    const std::size_t j = path.find('/', i);
    parts.push_back(path.substr(i, j == std::string::npos ? std::string::npos : j - i));
    if (j == std::string::npos) break;
    i = j + 1;
  }
  if (parts.size() < 4 || parts[0] != "apis" || parts[1] != kGroup ||
      (parts[2] != "v1beta1" && parts[2] != "v1beta2")) {
    return std::nullopt;
  }
  Target t;
  t.version = parts[2];
  std::size_t k = 3;
  if (parts[3] == "namespaces") {
    if (parts.size() < 6 || parts[4].empty()) return std::nullopt;
    t.namespace_ = parts[4];
    k = 5;
  }
  t.resource = parts[k];
  if (parts.size() > k + 1) t.name = parts[k + 1];
  if (parts.size() > k + 2) t.subresource = parts[k + 2];
  if (parts.size() > k + 3) return std::nullopt;
  const bool cluster_scoped = t.resource == "admissionchecks" ||
                              t.resource == "multikueueconfigs" ||
                              t.resource == "multikueueclusters";
  if (cluster_scoped) {
    if (!t.namespace_.empty() || !t.subresource.empty()) return std::nullopt;
  } else if (t.resource != "workloads") {
    return std::nullopt;
  }
  if (!t.subresource.empty() && t.subresource != "status") return std::nullopt;
  return t;
}

const char* kind_of(const std::string& resource) {
  if (resource == "admissionchecks") return "AdmissionCheck";
  if (resource == "multikueueconfigs") return "MultiKueueConfig";
  if (resource == "multikueueclusters") return "MultiKueueCluster";
  return "Workload";
}

json configmap() {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata",
           {{"name", "kueue-manager-config"},
            {"namespace", "kueue-system"},
            {"uid", "6b2c0e1a-0f1e-4c39-9d0a-kueuemanager"},
            {"resourceVersion", "1"},
            {"creationTimestamp", "2026-01-01T00:00:00Z"}}}};
}

void serve_configmap(MultiKueueManager& manager, const std::string& path, httplib::Response& res) {
  json cm = configmap();
  cm["data"] = {
      {"controller_manager_config.yaml", fmt::format("apiVersion: config.kueue.x-k8s.io/v1beta2\n"
                                                     "kind: Configuration\n"
                                                     "namespace: kueue-system\n"
                                                     "multiKueue:\n"
                                                     "  dispatcherName: {}\n",
                                                     manager.spec().dispatcher)}};
  const std::string rest = path.substr(std::string(kConfigMapPath).size());
  if (rest.empty() || rest == "/") {
    reply(res, 200,
          {{"kind", "ConfigMapList"},
           {"apiVersion", "v1"},
           {"metadata", {{"resourceVersion", "1"}}},
           {"items", json::array({cm})}});
  } else if (rest == "/kueue-manager-config") {
    reply(res, 200, cm);
  } else {
    fail(res, 404, "NotFound", fmt::format("configmaps \"{}\" not found", rest.substr(1)));
  }
}

// One watch's state, shared with its content provider.
struct Watch {
  MultiKueueManager* manager = nullptr;
  std::string version;
  Selector selector;
  std::string namespace_;
  bool as_table = false;
  bool bookmarks = false;
  std::chrono::steady_clock::time_point deadline;
  std::uint64_t last = 0;  // the resourceVersion streamed up to
  std::string pending;     // lines to write first
  bool ending = false;     // write `pending`, then end

  std::string line(const std::string& type, const json& object) const {
    json o = relabel(object, version);
    if (as_table) {
      o = table("workloads", {o}, last, manager->now_ns());
    }
    return json{{"type", type}, {"object", std::move(o)}}.dump() + "\n";
  }

  bool wanted(const json& object) const {
    return (namespace_.empty() || object["metadata"]["namespace"] == namespace_) &&
           selector.matches(object);
  }

  std::string gone() const {
    return json{{"type", "ERROR"},
                {"object",
                 status_json(410, "Expired", "too old resource version: " + std::to_string(last))}}
               .dump() +
           "\n";
  }
};

// Whole seconds of a Go duration made of h, m, s and ms parts ("5s", "1m30s", "500ms": 0);
// nullopt when it is empty or not one.
std::optional<int> request_timeout_seconds(const std::string& text) {
  if (text.empty()) return std::nullopt;
  double seconds = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t j = i;
    while (j < text.size() &&
           (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == '.')) {
      ++j;
    }
    if (j == i) return std::nullopt;
    double value = 0;
    try {
      value = std::stod(text.substr(i, j - i));
    } catch (const std::exception&) {
      return std::nullopt;
    }
    std::size_t k = j;
    while (k < text.size() && std::isalpha(static_cast<unsigned char>(text[k]))) ++k;
    const std::string unit = text.substr(j, k - j);
    if (unit == "h") {
      seconds += value * 3600;
    } else if (unit == "m") {
      seconds += value * 60;
    } else if (unit == "s") {
      seconds += value;
    } else if (unit == "ms") {
      seconds += value / 1000;
    } else {
      return std::nullopt;
    }
    i = k;
  }
  return static_cast<int>(std::min<double>(seconds, kWatchTimeoutSeconds));
}

void serve_watch(MultiKueueManager& manager, const Target& target, Selector selector,
                 const httplib::Request& req, httplib::Response& res) {
  std::uint64_t from = 0;
  const std::string rv = req.get_param_value("resourceVersion");
  if (!rv.empty()) {
    try {
      std::size_t used = 0;
      from = std::stoull(rv, &used);
      if (used != rv.size()) throw std::invalid_argument(rv);
    } catch (const std::exception&) {
      fail(res, 400, "BadRequest",
           fmt::format("resourceVersion: Invalid value: \"{}\": must be a number", rv));
      return;
    }
  }
  int timeout = kWatchTimeoutSeconds;
  if (req.has_param("timeoutSeconds")) {
    try {
      timeout =
          std::clamp(std::stoi(req.get_param_value("timeoutSeconds")), 0, kWatchTimeoutSeconds);
    } catch (const std::exception&) {
      fail(res, 400, "BadRequest", "timeoutSeconds must be a number of seconds");
      return;
    }
  }
  // `timeout` (a Go duration: what kubectl's --request-timeout sends) also bounds the watch.
  if (const auto t = request_timeout_seconds(req.get_param_value("timeout"))) {
    timeout = std::min(timeout, *t);
  }
  if (!manager.open_watch()) {
    res.set_header("Retry-After", "1");
    fail(res, 429, "TooManyRequests",
         fmt::format("too many watches of the manager's Workloads (at most {})",
                     MultiKueueManager::kMaxWatches));
    return;
  }
  auto w = std::make_shared<Watch>();
  w->manager = &manager;
  w->version = target.version;
  w->selector = std::move(selector);
  w->namespace_ = target.namespace_;
  w->as_table = req.get_header_value("Accept").find("as=Table") != std::string::npos;
  w->bookmarks = req.get_param_value("allowWatchBookmarks") == "true";
  w->deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout);
  if (from == 0) {
    // The current objects first, then what changes after them.
    for (const auto& o : manager.snapshot(w->last)) {
      if (w->wanted(*o)) w->pending += w->line("ADDED", *o);
    }
  } else {
    w->last = from;
  }
  res.status = 200;
  res.set_chunked_content_provider(
      kWatchContentType,
      [w](std::size_t, httplib::DataSink& sink) {
        const auto write = [&](const std::string& text) {
          return text.empty() || sink.write(text.data(), text.size());
        };
        if (!write(w->pending)) return false;
        w->pending.clear();
        if (w->ending) {
          sink.done();
          return true;
        }
        // Wake at least once a second: the deadline, and a fleet that stops.
        const auto until =
            std::min(w->deadline, std::chrono::steady_clock::now() + std::chrono::seconds(1));
        std::vector<MultiKueueManager::Event> events;
        switch (w->manager->wait_events(w->last, until, events)) {
          case MultiKueueManager::Wait::kEvents:
            for (const auto& e : events) {
              w->last = e.resource_version;
              if (w->wanted(*e.object)) w->pending += w->line(e.type, *e.object);
            }
            if (!write(w->pending)) return false;
            w->pending.clear();
            return true;
          case MultiKueueManager::Wait::kGone:
            w->pending = w->gone();
            w->ending = true;
            return true;
          case MultiKueueManager::Wait::kClosed:
            w->ending = true;
            return true;
          case MultiKueueManager::Wait::kTimeout:
            if (std::chrono::steady_clock::now() < w->deadline) return true;
            if (w->bookmarks) {
              w->pending = json{{"type", "BOOKMARK"},
                                {"object",
                                 {{"kind", "Workload"},
                                  {"apiVersion", std::string(kGroup) + "/" + w->version},
                                  {"metadata", {{"resourceVersion", std::to_string(w->last)}}}}}}
                               .dump() +
                           "\n";
            }
            w->ending = true;
            return true;
        }
        return true;
      },
      [&manager](bool) { manager.close_watch(); });
}

void serve_get(MultiKueueManager& manager, const Target& t, const httplib::Request& req,
               httplib::Response& res) {
  const bool as_table = req.get_header_value("Accept").find("as=Table") != std::string::npos;
  Selector selector;
  if (auto problem = parse_terms(req.get_param_value("labelSelector"), false, selector.labels)) {
    return fail(res, 400, "BadRequest", *problem);
  }
  if (auto problem = parse_terms(req.get_param_value("fieldSelector"), true, selector.fields)) {
    return fail(res, 400, "BadRequest", *problem);
  }
  const bool watch = req.get_param_value("watch") == "true" || req.get_param_value("watch") == "1";
  if (watch && t.name.empty()) {
    if (t.resource != "workloads") {
      return fail(res, 405, "MethodNotAllowed",
                  "the fleet's manager streams watches of workloads only");
    }
    return serve_watch(manager, t, std::move(selector), req, res);
  }
  std::vector<json> objects;
  if (t.resource == "admissionchecks") objects = manager.admission_checks();
  if (t.resource == "multikueueconfigs") objects = manager.multikueue_configs();
  if (t.resource == "multikueueclusters") objects = manager.multikueue_clusters();
  if (t.resource == "workloads") {
    if (!t.name.empty()) {
      if (t.namespace_.empty()) {
        return fail(res, 404, "NotFound", "the server could not find the requested resource");
      }
      json o = manager.workload(t.namespace_, t.name);  // throws 404
      return reply(res, 200,
                   as_table
                       ? table(t.resource, {relabel(o, t.version)},
                               std::stoull(o["metadata"]["resourceVersion"].get<std::string>()),
                               manager.now_ns())
                       : relabel(o, t.version));
    }
    objects = manager.workloads(t.namespace_);
  }
  const std::uint64_t version = manager.resource_version();
  std::vector<json> items;
  for (json& o : objects) {
    if (!t.name.empty() && o["metadata"]["name"] != t.name) continue;
    if (t.name.empty() && !selector.matches(o)) continue;
    items.push_back(relabel(std::move(o), t.version));
  }
  if (!t.name.empty()) {
    if (items.empty()) {
      return fail(res, 404, "NotFound",
                  fmt::format("{}.{} \"{}\" not found", t.resource, kGroup, t.name));
    }
    return reply(res, 200,
                 as_table ? table(t.resource, items, version, manager.now_ns()) : items[0]);
  }
  if (as_table) return reply(res, 200, table(t.resource, items, version, manager.now_ns()));
  reply(res, 200,
        {{"kind", std::string(kind_of(t.resource)) + "List"},
         {"apiVersion", std::string(kGroup) + "/" + t.version},
         {"metadata", {{"resourceVersion", std::to_string(version)}}},
         {"items", items}});
}

}  // namespace

bool is_manager_path(const std::string& path) {
  return path.rfind(kConfigMapPath, 0) == 0 || path.rfind(kOpenApiPath, 0) == 0 ||
         parse_target(path).has_value();
}

json manager_api_resources() {
  const std::vector<std::string> read = {"get", "list", "watch"};
  return json::array(
      {resource("workloads", "Workload", "workload", true,
                {"create", "delete", "get", "list", "patch", "watch"}, {"wl"}),
       resource("workloads/status", "Workload", "", true, {"get", "patch"}),
       resource("admissionchecks", "AdmissionCheck", "admissioncheck", false, read),
       resource("multikueueconfigs", "MultiKueueConfig", "multikueueconfig", false, read),
       resource("multikueueclusters", "MultiKueueCluster", "multikueuecluster", false, read)});
}

void serve_manager_request(MultiKueueManager& manager, const std::string& method,
                           const std::string& path, const httplib::Request& req,
                           httplib::Response& res) {
  if (path.rfind(kConfigMapPath, 0) == 0) {
    if (method != "GET") return fail(res, 405, "MethodNotAllowed", "the ConfigMap is read-only");
    return serve_configmap(manager, path, res);
  }
  if (path.rfind(kOpenApiPath, 0) == 0) {
    if (method != "GET") return fail(res, 405, "MethodNotAllowed", "OpenAPI is read-only");
    if (auto doc = openapi(path)) return reply(res, 200, *doc);
    return fail(res, 404, "NotFound", "the server could not find the requested resource");
  }
  const std::optional<Target> t = parse_target(path);
  if (!t) return fail(res, 404, "NotFound", "the server could not find the requested resource");
  try {
    if (method == "GET") return serve_get(manager, *t, req, res);
    const bool workload = t->resource == "workloads" && !t->namespace_.empty();
    if (method == "POST" && workload && t->name.empty()) {
      if (req.has_param("dryRun")) {
        return fail(res, 400, "BadRequest", "dryRun is not supported by the fleet's manager");
      }
      const std::string type = req.get_header_value("Content-Type");
      if (!type.empty() && type.rfind("application/json", 0) != 0) {
        return fail(res, 415, "UnsupportedMediaType",
                    fmt::format("the body of the request was in an unknown format - accepted "
                                "media types include: application/json (got {})",
                                type));
      }
      const json body = json::parse(req.body, nullptr, false);
      if (body.is_discarded()) {
        return fail(res, 400, "BadRequest", "the body of the request is not JSON");
      }
      return reply(res, 201, relabel(manager.create_workload(t->namespace_, body), t->version));
    }
    if (method == "DELETE" && workload && !t->name.empty() && t->subresource.empty()) {
      return reply(res, 200, relabel(manager.delete_workload(t->namespace_, t->name), t->version));
    }
    if (method == "PATCH" && workload && t->subresource == "status") {
      return reply(
          res, 200,
          relabel(manager.patch_workload_status(t->namespace_, t->name,
                                                req.get_header_value("Content-Type"), req.body),
                  t->version));
    }
    fail(res, 405, "MethodNotAllowed",
         fmt::format("the fleet's manager does not {} {}: it takes GET, POST and DELETE of "
                     "namespaced workloads and PATCH of workloads/<name>/status",
                     method, path));
  } catch (const ManagerError& e) {
    // As kube-apiserver fills details: the kind for Invalid, else the resource; the name of the
    // object (a create's from its body).
    json status = status_json(e.code(), e.reason(), e.what(), e.field(),
                              e.code() == 422 ? kind_of(t->resource) : t->resource);
    std::string name = t->name;
    if (name.empty() && method == "POST") {
      const json body = json::parse(req.body, nullptr, false);
      if (body.is_object() && body.contains("metadata") && body["metadata"].is_object() &&
          body["metadata"].contains("name") && body["metadata"]["name"].is_string()) {
        name = body["metadata"]["name"].get<std::string>();
      }
    }
    if (!name.empty()) status["details"]["name"] = name;
    reply(res, e.code(), status);
  }
}

}  // namespace falcon::fleet
