// The routes of `falcon serve`'s API (docs/serve.md): each parses its request, asks the
// control plane or the state store, and writes the answer. The checks every request passes
// before a route runs are in api_server.cc.
#include <fmt/format.h>

#include <cmath>
#include <system_error>
#include <thread>

#include "falcon/client.h"
#include "falcon/errors.h"
#include "falcon/gcs_uri.h"
#include "falcon/scoring.h"
#include "falcon/values.h"
#include "falcon/workload_manager.h"
#include "serve/api_server_impl.h"
#include "serve/dashboard_files.h"
#include "serve/dispatcher.h"
#include "serve/select_answer.h"
#include "serve/supervisor.h"
#include "util/time_format.h"

namespace falcon {

using nlohmann::json;
using serve::bad_request;
using serve::check_params;
using serve::HttpError;
using serve::int_param;
using serve::param;
using serve::Request;
using serve::Response;
using serve::send_json;
using serve::string_field;

namespace {

// Where an export's step is kept in its stored progress, beside the ranks ("0", "1", ...).
constexpr const char* kStatusKey = "status";
// The most ranks an export names: more than any slice has VMs (xpk's largest TPU slice has
// 2,048), and a bound on the work one request can ask for when the workload's shape is unknown.
constexpr std::size_t kMaxExportRanks = 4096;
// Explained decisions listed at once (each up to ~150 KB with 100 candidates).
constexpr std::int64_t kMaxExplainedSelections = 100;

// The body of POST /v1/select: {"accelerator_type", "explain"?}. Throws bad_request.
struct SelectBody {
  std::string accelerator;
  bool explain = false;
};
SelectBody parse_select_body(const Request& req, const ServeLimits& limits) {
  const json body = serve::parse_body(req, {"accelerator_type", "explain"}, limits);
  SelectBody out;
  out.accelerator = *string_field(body, "accelerator_type", "", true);
  if (const auto it = body.find("explain"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) throw bad_request("explain: must be true or false");
    out.explain = it->get<bool>();
  }
  return out;
}

// The body's "managed": {"max_recoveries", "stable_after_s", "recover_on_failure"}, each
// optional (defaults: the server's supervisor settings).
ManageOptions parse_managed(const json& obj, const SupervisorSettings& defaults) {
  static const std::set<std::string> kFields = {"max_recoveries", "stable_after_s",
                                                "recover_on_failure"};
  if (!obj.is_object()) throw bad_request("managed: must be a JSON object");
  for (const auto& [key, value] : obj.items()) {
    if (!kFields.contains(key)) {
      throw bad_request(fmt::format("unknown field 'managed.{}' (known: {})", printable(key, 64),
                                    fmt::join(kFields, ", ")));
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
      throw bad_request(fmt::format("unknown field 'spec.{}' (known: {})", printable(key, 64),
                                    fmt::join(kFields, ", ")));
    }
  }
  WorkloadSpec spec;
  spec.name = *string_field(obj, "name", "spec.", true);
  spec.docker_image = *string_field(obj, "docker_image", "spec.", true);
  spec.command = serve::string_list_field(obj, "command", "spec.", true);
  spec.accelerator_type = *string_field(obj, "accelerator_type", "spec.", true);
  if (auto p = string_field(obj, "priority", "spec.", false)) spec.priority = *p;
  if (const auto it = obj.find("env"); it != obj.end() && !it->is_null()) {
    if (!it->is_object()) throw bad_request("spec.env: must be an object of strings");
    for (const auto& [k, v] : it->items()) {
      if (!v.is_string()) {
        throw bad_request(fmt::format("spec.env.{}: must be a string", printable(k, 64)));
      }
      spec.env[k] = v.get<std::string>();
    }
  }
  spec.namespace_ = string_field(obj, "namespace", "spec.", false);
  spec.extra_args = serve::string_list_field(obj, "extra_args", "spec.", false);
  return spec;
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

json events_json(const std::vector<WorkloadEvent>& events) {
  json out = json::array();
  for (const WorkloadEvent& e : events) {
    out.push_back(
        {{"state", e.state}, {"observed_at", format_iso8601(e.observed_at)}, {"detail", e.detail}});
  }
  return out;
}

// The recorded deletes of a workload, newest first (state store schema 6).
json deletes_json(const std::vector<DeleteRecord>& deletes) {
  json out = json::array();
  for (const DeleteRecord& d : deletes) {
    out.push_back(
        {{"requested_at", format_iso8601(d.requested_at)},
         {"outcome", d.outcome ? json(*d.outcome) : json(nullptr)},
         {"detail", d.detail},
         {"finished_at", d.finished_at ? json(format_iso8601(*d.finished_at)) : json(nullptr)}});
  }
  return out;
}

// A log line as it goes on the wire. SSE: one event, each of the line's own line breaks (CR,
// LF, CRLF) starting a `data:` field of its own, so that no byte of the line can end the event
// or start another one; the client's EventSource joins the fields back with "\n".
void append_line(std::string& out, const std::string& line, bool sse) {
  if (!sse) {
    out += line;
    out += '\n';
    return;
  }
  out += "data: ";
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '\r' || c == '\n') {
      if (c == '\r' && i + 1 < line.size() && line[i + 1] == '\n') ++i;
      out += "\ndata: ";
    } else {
      out += c;
    }
  }
  out += "\n\n";
}

constexpr std::size_t kChunkBytes = 16 << 10;  // a streamed log answer's lines are sent in
                                               // chunks of about this much

}  // namespace

void ApiServer::Impl::add_routes() {
  add_service_routes();
  add_cluster_routes();
  add_selection_routes();
  add_workload_routes();
  add_managed_routes();
  add_export_routes();
}

// --- The probes, the dashboard, metrics, the API's description, the caller and the config.
void ApiServer::Impl::add_service_routes() {
  const RouteOptions probe{.needs_token = false, .checks_host = false, .on_io_thread = true};
  const RouteOptions open{.needs_token = false, .on_io_thread = true};
  route(
      "GET", "/healthz",
      [](Request& req, Response& res) {
        check_params(req, {});
        send_json(res, 200, {{"status", "ok"}});
      },
      probe);
  route(
      "GET", "/readyz",
      [this](Request& req, Response& res) {
        check_params(req, {});
        if (stopping) {
          serve::send_error(res, 503, "NotReady", "the server is stopping");
        } else if (!control().ready()) {
          serve::send_error(res, 503, "NotReady", "not every cluster has been probed yet");
        } else if (const auto problem = control().store_problem()) {
          // Selections, submissions and exports need the store: send traffic elsewhere.
          serve::send_error(res, 503, "NotReady",
                            fmt::format("the state store cannot be written: {}", *problem));
        } else if (const auto why = options.dispatcher ? options.dispatcher->problem()
                                                       : std::optional<std::string>{}) {
          serve::send_error(res, 503, "NotReady", "dispatch: " + *why);
        } else {
          send_json(res, 200, {{"status", "ready"}});
        }
      },
      probe);
  // The dashboard (docs/serve.md#the-dashboard): its files, compiled into the binary.
  route(
      "GET", "/",
      [this](Request& req, Response& res) {
        check_params(req, {});
        send_asset(req, res, "index.html");
      },
      open);
  route("GET", "/ui/{path}",
        [this](Request& req, Response& res) {
          check_params(req, {"v"});  // v: a version the page may add to bust caches
          send_asset(req, res, req.params[0]);
        },
        {.rest = true, .needs_token = false, .on_io_thread = true});
  route("GET", "/metrics", [this](Request& req, Response& res) {
    check_params(req, {});
    res.set_content(metrics(), "text/plain; version=0.0.4");
  });
  route("GET", "/v1/openapi.json",
        [](Request& req, Response& res) {
          check_params(req, {});
          send_json(res, 200, ApiServer::openapi());
        },
        {.on_io_thread = true});
  // Public: the dashboard asks it before it has a token. It shows or hides its actions by the
  // role; the server refuses them to a read token anyway (403).
  route(
      "GET", "/v1/whoami",
      [this](Request& req, Response& res) {
        check_params(req, {});
        const auto table = current_tokens();
        if (!table) {
          send_json(res, 200, {{"role", "operate"}, {"tokens_required", false}, {"token", "none"}});
          return;
        }
        const std::string header(req.header("Authorization").value_or(""));
        const std::string token = header.starts_with("Bearer ") ? header.substr(7) : "";
        const auto role = token.empty() ? std::nullopt : table->find(token);
        send_json(res, 200,
                  {{"role", !role                          ? json(nullptr)
                            : *role == TokenRole::kOperate ? json("operate")
                                                           : json("read")},
                   {"tokens_required", true},
                   {"token", token.empty() ? "missing"
                             : role        ? "valid"
                                           : "unknown"}});
      },
      open);
  route("GET", "/v1/config", [this](Request& req, Response& res) {
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
}

namespace {

// Per accelerator slot, the capacity the probe read for that type as the selector counts it
// (apply_capacity: the flavors named for the type, else those of its GKE accelerator): slots
// with no matching flavor (the xpk backend, capacity not known) are left out.
json slot_capacity(const ClusterConfig& config, const ClusterProbeResult& probe) {
  json out = json::array();
  for (const AcceleratorSlot& slot : config.accelerator_slots) {
    ClusterSignals s;
    apply_capacity(s, probe, slot.type);
    if (!s.free_chips) continue;
    out.push_back({{"type", slot.type},
                   {"slice_chips", *s.slice_chips},
                   {"nominal_chips", *s.nominal_chips},
                   {"free_chips", *s.free_chips},
                   {"largest_free_block",
                    s.largest_free_block ? json(*s.largest_free_block) : json(nullptr)}});
  }
  return out;
}

}  // namespace

void ApiServer::Impl::add_cluster_routes() {
  route("GET", "/v1/clusters", [this](Request& req, Response& res) {
    check_params(req, {});
    json out = json::array();
    for (const ClusterEntry& c : control().list_clusters()) {
      const auto probe = control().cached_probe(c.config.name);
      out.push_back(
          {{"name", c.config.name},
           {"config", c.config},
           {"probe", probe ? json(*probe) : json(nullptr)},
           {"slot_capacity", probe ? slot_capacity(c.config, probe->result) : json::array()},
           {"breakers", c.breakers}});
    }
    send_json(res, 200, {{"clusters", out}});
  });
  route("GET", "/v1/clusters/{name}", [this](Request& req, Response& res) {
    check_params(req, {"since", "limit", "fresh"});
    const std::string& name = req.params[0];
    // fresh=true: no older than serve.max_probe_age_s, probed now if need be (cluster status).
    const auto probe = serve::bool_param(req, "fresh") ? std::optional(control().fresh_probe(name))
                                                       : control().cached_probe(name);
    const ClusterConfig config = control().cluster_config(name);
    const StoreTime to = now();
    const StoreTime from = serve::time_param("since", param(req, "since").value_or("1h"), to);
    const int limit = static_cast<int>(int_param(req, "limit", 1, 10000).value_or(1000));
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
}

// A brief POST /v1/select that repeats the standing decision, answered on the I/O thread when
// the repeat is not recorded (serve.record_repeats none); false leaves the request to a worker
// (an explained select, a decision to make or a repeat to record, an error to answer).
bool ApiServer::Impl::answer_repeat(Request& req, Response& res) {
  const auto start = std::chrono::steady_clock::now();
  SelectBody select;
  try {
    select = parse_select_body(req, options.limits);
  } catch (const std::exception&) {
    return false;  // the worker answers the error
  }
  if (select.explain) return false;
  const auto repeat = control().prepare_repeat(select.accelerator);
  if (!repeat || repeat->selection.selection_id == 0) return false;
  count_selection("repeated");
  res.status = 200;
  res.set_content(serve::brief_select_answer_json(*repeat), "application/json");
  finished(req, 200,
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), {});
  return true;
}

void ApiServer::Impl::add_selection_routes() {
  route("POST", "/v1/select", [this](Request& req, Response& res) {
    check_params(req, {});
    const auto [accelerator, explain] = parse_select_body(req, options.limits);
    Decision outcome;
    try {
      outcome =
          explain ? control().select_explained(accelerator) : control().select_brief(accelerator);
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
  select_route = routes.size() - 1;
  route("GET", "/v1/selections", [this](Request& req, Response& res) {
    check_params(req, {"limit", "accelerator", "summary"});
    const bool summary = serve::bool_param(req, "summary");
    const int limit = static_cast<int>(
        int_param(req, "limit", 1, summary ? 1000 : kMaxExplainedSelections).value_or(50));
    json out = json::array();
    if (summary) {
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
    // Explained decisions are large: the answer stops short of serve.limits.max_answer_bytes
    // ("truncated": true; summary=true lists more).
    std::string body = "{\"selections\":[";
    bool truncated = false;
    bool first = true;
    for (const SelectionRecord& r : store().list_selections(limit, param(req, "accelerator"))) {
      json j = r.selection;
      j["selection_id"] = r.id;
      std::string text = j.dump(-1, ' ', false, json::error_handler_t::replace);
      if (body.size() + text.size() + 64 >
          static_cast<std::size_t>(options.limits.max_answer_bytes)) {
        truncated = true;
        break;
      }
      if (!first) body += ',';
      first = false;
      body += text;
    }
    body += truncated ? "],\"truncated\":true}\n" : "]}\n";
    res.status = 200;
    res.set_content(std::move(body), "application/json");
  });
  route("GET", "/v1/selections/{id}", [this](Request& req, Response& res) {
    check_params(req, {});
    const std::int64_t id = serve::id_from_path(req.params[0], "selection");
    const auto record = store().get_selection(id);
    if (!record) throw HttpError(404, "NotFound", fmt::format("no selection {}", id));
    json j = record->selection;
    j["selection_id"] = record->id;
    send_json(res, 200, j);
  });
}

void ApiServer::Impl::add_workload_routes() {
  route("POST", "/v1/workloads", [this](Request& req, Response& res) { submit(req, res); });
  route("GET", "/v1/workloads", [this](Request& req, Response& res) {
    check_params(
        req, {"cluster", "state", "name", "from", "before", "limit", "cursor", "live", "total"});
    const auto state = param(req, "state");
    if (state && !is_valid_state(*state)) {
      throw bad_request(fmt::format(
          "query parameter state: {} is not one of QUEUED, RUNNING, COMPLETED, FAILED, UNKNOWN",
          quote_value(*state, 40)));
    }
    if (serve::bool_param(req, "live")) {
      for (const char* p : {"name", "from", "before", "limit", "cursor", "total"}) {
        if (req.has_query(p)) {
          throw bad_request(fmt::format("query parameter {}: not with live=true", p));
        }
      }
      std::vector<std::string> clusters;
      if (const auto c = param(req, "cluster")) {
        clusters.push_back(*c);
      } else {
        for (const ClusterEntry& e : control().list_clusters()) clusters.push_back(e.config.name);
      }
      json out = json::array();
      for (const std::string& c : clusters) {
        json entry = {{"cluster", c}};
        try {
          entry["workloads"] = control().list_workloads(c, state);
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
    if (const auto t = param(req, "from"))
      query.submitted_from = serve::time_param("from", *t, now());
    if (const auto t = param(req, "before")) {
      query.submitted_before = serve::time_param("before", *t, now());
    }
    query.limit = static_cast<int>(int_param(req, "limit", 1, 1000).value_or(100));
    query.cursor = param(req, "cursor").value_or("");
    query.with_total = serve::bool_param(req, "total");
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
  route("GET", "/v1/workloads/{cluster}/{name}", [this](Request& req, Response& res) {
    check_params(req, {});
    const WorkloadHandle handle = control().handle_for(req.params[0], req.params[1]);
    const WorkloadStatus status = control().status(handle.cluster, handle.workload_name);
    send_json(res, 200,
              {{"handle", handle},
               {"status", status},
               {"events", events_json(store().list_workload_events(handle.cluster,
                                                                   handle.workload_name, 100))},
               {"deletes",
                deletes_json(store().list_deletes(handle.cluster, handle.workload_name, 10))}});
  });
  route("DELETE", "/v1/workloads/{cluster}/{name}",
        [this](Request& req, Response& res) { cancel(req, res); });
}

// The supervisor's records: managed workloads and their recovery incidents.
void ApiServer::Impl::add_managed_routes() {
  route("GET", "/v1/managed", [this](Request& req, Response& res) {
    check_params(req, {"state", "after"});
    std::vector<ManagedState> states;
    if (const auto state = param(req, "state")) {
      const auto parsed = parse_managed_state(*state);
      if (!parsed) {
        throw bad_request(
            fmt::format("state: '{}' is not one of submitting, starting, running, "
                        "recovering, completed, failed, gave_up, cancelled",
                        printable(*state, 64)));
      }
      states.push_back(*parsed);
    }
    constexpr int kPage = 1000;
    const auto page = store().list_managed(kPage, states, param(req, "after").value_or(""));
    json out = json::array();
    for (const ManagedWorkloadRecord& m : page) out.push_back(managed_json(m));
    // A full page may have more after it: the next starts after its last name.
    const json next = page.size() == std::size_t{kPage} ? json(page.back().name) : json(nullptr);
    send_json(res, 200, {{"managed", out}, {"next_after", next}});
  });
  // The MultiKueue dispatcher: its state and its latest nominations (of one Workload: ?uid=).
  route("GET", "/v1/dispatch", [this](Request& req, Response& res) {
    check_params(req, {"uid", "limit"});
    if (!options.dispatcher) {
      throw HttpError(404, "NotFound",
                      "this server has no dispatcher: set dispatch.manager_kubeconfig");
    }
    const int limit = static_cast<int>(int_param(req, "limit", 1, 1000).value_or(100));
    const DispatchStatus s = options.dispatcher->status();
    json nominations = json::array();
    for (const NominationRecord& n :
         store().list_nominations(param(req, "uid").value_or(""), limit)) {
      nominations.push_back(
          {{"id", n.id},
           {"workload_uid", n.workload_uid},
           {"namespace", n.namespace_},
           {"workload", n.workload},
           {"accelerator", n.accelerator},
           {"clusters", n.clusters},
           {"selection_id", n.selection_id > 0 ? json(n.selection_id) : json(nullptr)},
           {"requested_at", format_iso8601(n.requested_at)},
           {"outcome", n.outcome ? json(*n.outcome) : json(nullptr)},
           {"detail", n.detail},
           {"finished_at", n.finished_at ? json(format_iso8601(*n.finished_at)) : json(nullptr)}});
    }
    const auto opt = [](const auto& v) { return v ? json(*v) : json(nullptr); };
    send_json(res, 200,
              {{"manager", s.manager},
               {"dispatcher_name", s.dispatcher_name},
               {"kueue_dispatcher", opt(s.kueue_dispatcher)},
               {"ready", !s.problem},
               {"problem", opt(s.problem)},
               {"workloads", s.workloads},
               {"waiting", s.waiting},
               {"nominated", s.nominated},
               {"foreign", s.foreign},
               {"counts",
                {{"nominations", s.nominations},
                 {"renominations", s.renominations},
                 {"preemptions", s.preemptions},
                 {"preemptions_unconfirmed", s.preemptions_unconfirmed},
                 {"admitted", s.admitted},
                 {"conflicts", s.conflicts},
                 {"failures", s.failures}}},
               {"latency_ms", {{"p50", opt(s.latency_p50_ms)}, {"p99", opt(s.latency_p99_ms)}}},
               {"held", s.held},
               {"nominations", nominations}});
  });
  route("GET", "/v1/recoveries", [this](Request& req, Response& res) {
    check_params(req, {"workload", "limit"});
    const int limit = static_cast<int>(int_param(req, "limit", 1, 1000).value_or(100));
    json out = json::array();
    for (const RecoveryRecord& r : store().list_recoveries(limit, param(req, "workload"))) {
      out.push_back(recovery_of(r));
    }
    send_json(res, 200, {{"recoveries", out}});
  });
  // A handle from the records only: what a client needs before a log read, no xpk call.
  route("GET", "/v1/workloads/{cluster}/{name}/handle", [this](Request& req, Response& res) {
    check_params(req, {});
    send_json(res, 200, {{"handle", control().handle_for(req.params[0], req.params[1])}});
  });
  route("GET", "/v1/workloads/{cluster}/{name}/events", [this](Request& req, Response& res) {
    check_params(req, {"limit"});
    const std::string& cluster = req.params[0];
    control().handle_for(cluster, req.params[1]);  // UnknownClusterError
    const int limit = static_cast<int>(int_param(req, "limit", 1, 10000).value_or(1000));
    send_json(
        res, 200,
        {{"events", events_json(store().list_workload_events(cluster, req.params[1], limit))}});
  });
  route("GET", "/v1/workloads/{cluster}/{name}/logs",
        [this](Request& req, Response& res) { logs(req, res); });
}

// The body's "selection_id": the recorded decision that chose the body's "cluster" (0 when
// absent). Throws bad_request for an id without a cluster, one the store has no decision for,
// or one whose decision chose another cluster: a submission is never linked to a decision that
// did not choose its cluster.
std::int64_t ApiServer::Impl::parse_selection_link(const json& body,
                                                   const std::optional<std::string>& cluster) {
  const auto it = body.find("selection_id");
  if (it == body.end() || it->is_null()) return 0;
  if (!it->is_number_integer() || it->get<std::int64_t>() < 1) {
    throw bad_request("selection_id: must be an integer >= 1");
  }
  const std::int64_t id = it->get<std::int64_t>();
  if (!cluster) throw bad_request("selection_id: only with cluster (the cluster it chose)");
  const auto record = store().get_selection(id);
  if (!record) throw bad_request(fmt::format("selection_id: no selection {}", id));
  if (record->selection.selected_cluster != *cluster) {
    throw bad_request(fmt::format("selection_id: selection {} chose {}, not {}", id,
                                  quote_value(record->selection.selected_cluster, 80),
                                  quote_value(*cluster, 80)));
  }
  return id;
}

void ApiServer::Impl::submit(Request& req, Response& res) {
  check_params(req, {});
  const json body =
      serve::parse_body(req, {"cluster", "spec", "managed", "selection_id"}, options.limits);
  const auto cluster_field = string_field(body, "cluster", "", false);
  if (!body.contains("spec")) throw bad_request("spec: required");
  const std::int64_t selection_id = parse_selection_link(body, cluster_field);
  const WorkloadSpec spec = parse_spec(body["spec"]);
  std::optional<ManageOptions> managed;
  if (const auto it = body.find("managed"); it != body.end() && !it->is_null()) {
    managed = parse_managed(*it, control().supervisor_defaults());
  }
  Placement placed;
  try {
    placed = place_workload(control(), store(), *options.clock, spec, cluster_field, selection_id,
                            managed);
  } catch (const NoAvailableClusterError&) {
    count_selection("no_cluster");
    throw;
  }
  json out = json::object();
  if (placed.selection) {
    count_selection("selected");
    out["selection_id"] = placed.selection->selection.selection_id;
    out["selection"] = placed.selection->selection;
  }
  if (managed) {
    out["managed"] = {
        {"name", spec.name},
        {"max_recoveries", managed->max_recoveries},
        {"stable_after_s", static_cast<double>(managed->stable_after.count()) / 1000.0},
        {"recover_on_failure", managed->recover_on_failure}};
  }
  out["handle"] = placed.handle;
  send_json(res, 201, out);
}

void ApiServer::Impl::cancel(Request& req, Response& res) {
  check_params(req, {});
  const WorkloadHandle handle = control().handle_for(req.params[0], req.params[1]);
  // A managed workload's incarnation cancelled by a person: the cancel wins over its recovery.
  const CancelOutcome outcome = cancel_workload(control(), store(), *options.clock, handle);
  json out = {{"handle", handle}, {"cancelled", outcome.cancelled}};
  if (outcome.managed) out["managed"] = *outcome.managed;
  send_json(res, 200, out);
}

void ApiServer::Impl::send_asset(const Request& req, Response& res, const std::string& path) const {
  const serve::DashboardFile* file = serve::find_dashboard_file(path);
  if (file == nullptr) {
    throw HttpError(404, "NotFound", fmt::format("no dashboard file {}", quote_value(path, 80)));
  }
  // Revalidated on every load (no-cache) and answered 304 while the ETag (a digest of the
  // bytes) matches: a new binary's files are picked up at once, an unchanged one costs no body.
  res.headers.set("ETag", file->etag);
  res.headers.set("Cache-Control", "no-cache");
  res.headers.set("X-Content-Type-Options", "nosniff");
  res.headers.set("Referrer-Policy", "no-referrer");
  if (path == "index.html") {
    res.headers.set("Content-Security-Policy",
                    "default-src 'self'; img-src 'self' data:; style-src 'self'; "
                    "script-src 'self'; connect-src 'self'; frame-ancestors 'none'; "
                    "base-uri 'none'; form-action 'none'");
    res.headers.set("X-Frame-Options", "DENY");
  }
  if (req.header("If-None-Match").value_or("") == file->etag) {
    res.status = 304;
    return;
  }
  res.status = 200;
  res.set_content(std::string(file->bytes), file->content_type);
}

// One rank's lines, streamed: read on a stream thread of the server's, in chunks of about 16 KiB
// (a follow's as soon as each poll is done), within the caller's share of streams.
void ApiServer::Impl::logs(Request& req, Response& res) {
  check_params(req, {"rank", "slice", "tail", "since", "grep", "follow", "format"});
  const WorkloadHandle handle = control().handle_for(req.params[0], req.params[1]);
  const int rank = static_cast<int>(int_param(req, "rank", 0, 100000).value_or(0));
  const int slice = static_cast<int>(int_param(req, "slice", 0, 100000).value_or(0));
  LogFilter filter;
  filter.ranks = std::vector<int>{rank};
  if (const auto tail = int_param(req, "tail", 1, 10000000)) {
    filter.tail_lines = static_cast<int>(*tail);
  }
  if (const auto since = param(req, "since")) {
    filter.since = format_iso8601(serve::time_param("since", *since, now()));
  }
  filter.grep = param(req, "grep");
  const bool follow = serve::bool_param(req, "follow");
  const std::string accept(req.header("Accept").value_or(""));
  const std::string format =
      param(req, "format")
          .value_or(accept.find("text/event-stream") != std::string::npos ? "sse" : "text");
  if (format != "text" && format != "sse") {
    throw bad_request(fmt::format("query parameter format: must be text or sse, got {}",
                                  quote_value(format, 40)));
  }
  if (follow && filter.tail_lines) throw bad_request("query parameter tail: not with follow=true");
  auto slot = stream_shares->try_acquire(req.principal);
  if (!slot) {
    HttpError e(429, "TooManyStreams",
                fmt::format("this caller has {} log streams open already (serve.limits."
                            "max_streams_per_token)",
                            options.limits.max_streams_per_token));
    e.headers().set("Retry-After", "5");
    throw e;
  }
  const bool sse = format == "sse";
  res.status = 200;
  res.headers.set("Content-Type", sse ? "text/event-stream" : "text/plain; charset=utf-8");
  res.headers.set("Cache-Control", "no-store");
  if (follow) {
    auto control_ptr = options.control;
    auto stop_flag = this->stop_flag;
    ++active_follows;
    LogRequest request{.cluster = handle.cluster,
                       .workload = handle.workload_name,
                       .rank = rank,
                       .slice = slice,
                       .since = filter.since,
                       .grep = filter.grep,
                       .follow = true};
    res.stream = [this, control_ptr, stop_flag, request = std::move(request), sse,
                  slot](serve::ChunkSink& sink) {
      std::string pending;
      bool gone = false;
      const auto flush = [&] {
        if (!pending.empty() && !gone && !sink.write(pending)) gone = true;
        pending.clear();
      };
      try {
        control_ptr->read_logs(
            request,
            [&](const std::string& line) {
              append_line(pending, line, sse);
              if (pending.size() >= kChunkBytes) flush();
            },
            [&] {
              flush();  // asked between polls: what the last poll found goes out now
              return gone || stop_flag->load() || !sink.open();
            });
        flush();
      } catch (const std::exception& e) {
        flush();
        if (sse && !gone) {
          sink.write(fmt::format(
              "event: error\ndata: {}\n\n",
              json({{"message", e.what()}}).dump(-1, ' ', false, json::error_handler_t::replace)));
        }
      }
      --active_follows;
    };
    return;
  }
  // Read the first line here, so that a failure is answered with its status, not a broken body.
  auto lines = std::make_shared<LogLines>(control().read_log(handle, rank, filter, slice));
  auto first = std::make_shared<std::optional<std::string>>(lines->next());
  // A read that fails half way throws out of the stream: the server then leaves the chunked
  // body unterminated, which tells the client.
  res.stream = [lines, first, sse, slot](serve::ChunkSink& sink) {
    std::string pending;
    if (*first) append_line(pending, **first, sse);
    while (auto line = lines->next()) {
      append_line(pending, *line, sse);
      if (pending.size() >= kChunkBytes) {
        if (!sink.write(pending)) return;
        pending.clear();
      }
    }
    if (!pending.empty()) sink.write(pending);
  };
}

json ApiServer::Impl::export_json(const ExportRecord& e) const {
  auto parsed = [](const std::string& text) {
    json j = json::parse(text, nullptr, false);
    return j.is_discarded() ? json(text) : j;
  };
  json progress = parsed(e.progress_json);
  json status = nullptr;
  if (progress.is_object() && progress.contains(kStatusKey)) {
    status = progress[kStatusKey];
    progress.erase(kStatusKey);
  }
  json out = {
      {"id", e.id},
      {"workload", e.workload},
      {"cluster", e.cluster},
      {"dest", e.dest},
      {"state", e.state},
      {"progress", progress},
      {"status", status},
      {"result", parsed(e.result_json)},
      {"started_at", format_iso8601(e.started_at)},
      {"finished_at", e.finished_at ? json(format_iso8601(*e.finished_at)) : json(nullptr)}};
  if (e.state == kExportQueued) {
    const std::size_t place = exports->position(e.id);
    out["queue_position"] = place > 0 ? json(place) : json(nullptr);
  }
  return out;
}

void ApiServer::Impl::add_export_routes() {
  route("POST", "/v1/exports", [this](Request& req, Response& res) { start_export(req, res); });
  route("GET", "/v1/exports", [this](Request& req, Response& res) {
    check_params(req, {"limit", "workload"});
    const int limit = static_cast<int>(int_param(req, "limit", 1, 1000).value_or(50));
    json out = json::array();
    for (const ExportRecord& e : store().list_exports(limit, param(req, "workload"))) {
      out.push_back(export_json(e));
    }
    send_json(res, 200, {{"exports", out}});
  });
  route("GET", "/v1/exports/{id}", [this](Request& req, Response& res) {
    check_params(req, {});
    const std::int64_t id = serve::id_from_path(req.params[0], "export");
    const auto record = store().get_export(id);
    if (!record) throw HttpError(404, "NotFound", fmt::format("no export {}", id));
    send_json(res, 200, export_json(*record));
  });
}

namespace {

// The body of POST /v1/exports, checked.
ExportRequest parse_export_request(const Request& req, const ServeLimits& limits, StoreTime now) {
  check_params(req, {});
  const json body = serve::parse_body(
      req,
      {"cluster", "workload", "dest", "ranks", "slice", "since", "grep", "via", "keep_staging"},
      limits);
  ExportRequest out;
  out.cluster = *string_field(body, "cluster", "", true);
  out.workload = *string_field(body, "workload", "", true);
  out.dest = *string_field(body, "dest", "", true);
  try {
    (void)parse_gcs_uri(out.dest);  // the exporter parses it again; refused here as a 400
  } catch (const std::invalid_argument& e) {
    throw bad_request(fmt::format("dest: {}", e.what()));
  }
  if (const auto it = body.find("ranks"); it != body.end() && !it->is_null()) {
    if (!it->is_array()) throw bad_request("ranks: must be an array of integers >= 0");
    if (it->size() > kMaxExportRanks) {
      throw bad_request(fmt::format("ranks: at most {} ranks an export", kMaxExportRanks));
    }
    std::vector<int> ranks;
    for (const auto& r : *it) {
      if (!r.is_number_integer() || r.get<std::int64_t>() < 0 || r.get<std::int64_t>() > 100000) {
        throw bad_request("ranks: must be an array of integers >= 0");
      }
      ranks.push_back(r.get<int>());
    }
    out.ranks = std::move(ranks);
  }
  if (const auto it = body.find("slice"); it != body.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<std::int64_t>() < 0 ||
        it->get<std::int64_t>() > 100000) {
      throw bad_request("slice: must be an integer >= 0");
    }
    out.slice = it->get<int>();
  }
  if (const auto since = string_field(body, "since", "", false)) {
    out.since = format_iso8601(serve::time_param("since", *since, now));
  }
  out.grep = string_field(body, "grep", "", false);
  if (const auto via = string_field(body, "via", "", false)) {
    const auto parsed = parse_export_via(*via);
    if (!parsed) {
      throw bad_request(
          fmt::format("via: {} is not one of auto, read, copy, sink", quote_value(*via, 40)));
    }
    out.via = *parsed;
  }
  if (const auto it = body.find("keep_staging"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) throw bad_request("keep_staging: must be true or false");
    out.keep_staging = it->get<bool>();
  }
  return out;
}

json stopped_result() { return {{"error", {{"type", "Stopped"}, {"message", "server stopped"}}}}; }

}  // namespace

// The export itself, for a thread of its own: it records its start, its progress and its end
// (unless stop() gave up on it first), then hands its slot to the next queued export.
std::function<void()> ApiServer::Impl::export_job(std::int64_t id, ExportRequest request) {
  return [control_ptr = options.control, store_ptr = options.store, clock = options.clock,
          on_event = options.on_event, tracker = exports, cancel = cancel_exports, id,
          request = std::move(request)] {
    std::string state = kExportDone;
    json result;
    try {
      store_ptr->begin_export(id, clock->now());
      // Per rank {lines, bytes, done}, and the export's step under "status" (the copy operation,
      // the splitting...): stored together, shown apart (export_json).
      std::mutex progress_mutex;
      json progress = json::object();
      const auto store_progress = [&] {
        try {
          store_ptr->update_export_progress(id, progress.dump());
        } catch (const std::exception&) {
          // Progress is advisory; the result below is what counts.
        }
      };
      ExportObserver observer;
      // Past the stop's grace: a copy operation is cancelled and its staged objects deleted.
      observer.cancelled = [cancel] { return cancel->load(); };
      observer.on_status = [&](const ExportStatus& s) {
        std::lock_guard lock(progress_mutex);
        progress[kStatusKey] = json(s);
        store_progress();
      };
      observer.on_progress = [&](const ExportProgress& p) {
        std::lock_guard lock(progress_mutex);
        progress[std::to_string(p.rank)] = {
            {"lines", p.lines}, {"bytes", p.bytes}, {"done", p.done}};
        store_progress();
      };
      result = control_ptr->export_logs(request, observer);
    } catch (const FalconError& e) {
      state = kExportFailed;
      result = {{"error", {{"type", e.type_name()}, {"message", e.what()}}}};
      e.add_details(result["error"]);
    } catch (const std::exception& e) {
      state = kExportFailed;
      result = {{"error", {{"type", "InternalError"}, {"message", e.what()}}}};
    }
    tracker->end(id, [&] {
      try {
        store_ptr->finish_export(id, state, result.dump(), clock->now());
      } catch (const std::exception& e) {
        if (on_event) on_event(fmt::format("export {}: cannot record its end: {}", id, e.what()));
      }
      if (state == kExportFailed && on_event) {
        on_event(fmt::format("export {} of {}/{} failed: {}", id, request.cluster, request.workload,
                             result["error"]["message"].get<std::string>()));
      }
    });
  };
}

// Starts an export in the background (202 with its id), or queues it behind
// serve.limits.max_exports running ones (state "queued", its place in GET /v1/exports/{id}),
// or refuses it (429) when serve.limits.max_queued_exports wait already. The ranks are checked
// against the workload first: nothing is read for a rank it does not have.
void ApiServer::Impl::start_export(Request& req, Response& res) {
  ExportRequest e = parse_export_request(req, options.limits, now());
  if (stopping) throw HttpError(503, "Stopping", "the server is stopping");
  const WorkloadHandle handle = control().handle_for(e.cluster, e.workload);
  try {
    control().check_export(handle, e.ranks);
  } catch (const std::invalid_argument& error) {
    throw bad_request(fmt::format("ranks: {}", error.what()));
  }
  const auto admitted = exports->reserve();
  if (!admitted) {
    HttpError refused(429, "TooManyExports",
                      fmt::format("{} exports run and {} wait already (serve.limits.max_exports, "
                                  "max_queued_exports); try again later",
                                  options.limits.max_exports, options.limits.max_queued_exports));
    refused.headers().set("Retry-After", "30");
    throw refused;
  }
  ExportRecord record;
  record.workload = e.workload;
  record.cluster = e.cluster;
  record.dest = e.dest;
  record.started_at = now();
  record.state = *admitted ? kExportRunning : kExportQueued;
  std::int64_t id = 0;
  try {
    id = store().start_export(record);
  } catch (...) {
    exports->unreserve();
    throw;
  }
  if (!exports->place(id, export_job(id, std::move(e)))) {
    store().finish_export(id, kExportFailed, stopped_result().dump(), now());
    throw HttpError(503, "Unavailable", "the export could not be started; try again later");
  }
  const std::size_t place = exports->position(id);
  json out = {
      {"id", id}, {"state", place > 0 ? kExportQueued : kExportRunning}, {"handle", handle}};
  if (place > 0) out["queue_position"] = place;
  send_json(res, 202, out);
}

}  // namespace falcon
