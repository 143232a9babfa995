#include "gcp/logging_admin_client.h"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "falcon/errors.h"
#include "gcp/json_fields.h"
#include "gcp/url.h"
#include "util/name_table.h"

namespace falcon::gcp {
namespace {

using nlohmann::json;

constexpr std::array<std::pair<CopyState, const char*>, 8> kStates = {{
    {CopyState::kUnspecified, "UNSPECIFIED"},
    {CopyState::kScheduled, "SCHEDULED"},
    {CopyState::kWaitingForPermissions, "WAITING_FOR_PERMISSIONS"},
    {CopyState::kRunning, "RUNNING"},
    {CopyState::kSucceeded, "SUCCEEDED"},
    {CopyState::kFailed, "FAILED"},
    {CopyState::kCancelled, "CANCELLED"},
    {CopyState::kPending, "PENDING"},
}};

CopyOperation operation_from(const json& op) {
  CopyOperation out;
  out.name = string_field(op, "name");
  out.done = bool_field(op, "done");
  if (const auto m = op.find("metadata"); m != op.end() && m->is_object()) {
    out.state = parse_copy_state(string_field(*m, "state"));
    if (const auto p = m->find("progress"); p != m->end() && p->is_number()) {
      out.progress = static_cast<int>(std::clamp(p->get<double>(), 0.0, 100.0));  // a percentage
    }
    out.writer_identity = string_field(*m, "writerIdentity");
    out.cancellation_requested = bool_field(*m, "cancellationRequested");
    out.start_time = string_field(*m, "startTime");
    out.end_time = string_field(*m, "endTime");
  }
  if (const auto r = op.find("response"); r != op.end() && r->is_object()) {
    if (const auto c = r->find("logEntriesCopiedCount"); c != r->end()) {
      try {
        out.entries_copied = c->is_string()
                                 ? std::stoll(c->get<std::string>())
                                 : integer_field<std::int64_t>(*r, "logEntriesCopiedCount", -1);
      } catch (const std::exception&) {
        out.entries_copied = -1;
      }
    } else {
      out.entries_copied = 0;  // proto3 JSON leaves a zero count out
    }
  }
  if (const auto e = op.find("error"); e != op.end() && e->is_object()) {
    out.error_code = integer_field(*e, "code", 2);  // 2: google.rpc.Code UNKNOWN
    out.error_message = string_field(*e, "message");
  }
  return out;
}

}  // namespace

const char* to_string(CopyState state) { return name_in(kStates, state, "UNSPECIFIED"); }

CopyState parse_copy_state(std::string_view text) {
  if (text.starts_with("OPERATION_STATE_")) text.remove_prefix(16);
  return value_in(kStates, text).value_or(CopyState::kUnspecified);
}

CopyOperation parse_copy_operation(const std::string& body, const std::string& call) {
  const json op = json::parse(body, nullptr, false);
  if (!op.is_object()) {
    throw LogRetrievalError(fmt::format("{} returned a body that is not a JSON object", call));
  }
  CopyOperation out = operation_from(op);
  if (out.name.empty()) {
    throw LogRetrievalError(fmt::format("{} returned an operation without a name", call));
  }
  return out;
}

LoggingAdminClient::LoggingAdminClient(LoggingAdminClientOptions options) {
  if (!options.http) throw std::invalid_argument("LoggingAdminClient needs an HttpClient");
  if (!options.clock) throw std::invalid_argument("LoggingAdminClient needs a Clock");
  options.endpoint = trim_trailing_slashes(options.endpoint);
  options_ = std::make_shared<const LoggingAdminClientOptions>(std::move(options));
}

namespace {

HttpResponse call_api(const LoggingAdminClientOptions& options, std::string method,
                      std::string path, std::string body, std::string call, Idempotency idem) {
  HttpRequest request;
  request.method = std::move(method);
  request.url = options.endpoint + path;
  request.timeout = options.request_timeout;
  request.headers.set("Accept", "application/json");
  if (request.method == "POST") {
    request.headers.set("Content-Type", "application/json");
    request.body = std::move(body);
  }
  RetryOptions retry;
  retry.policy = options.retry;
  retry.idempotency = idem;
  retry.call = std::move(call);
  retry.clock = options.clock.get();
  retry.seed = options.seed;
  retry.credentials = options.credentials.get();
  retry.on_wait = options.on_wait;
  return send_with_retry(*options.http, std::move(request), retry);
}

}  // namespace

CopyOperation LoggingAdminClient::copy_log_entries(const CopyLogEntriesRequest& request) const {
  json body = {{"name", request.name}, {"destination", request.destination}};
  if (!request.filter.empty()) body["filter"] = request.filter;
  const std::string call =
      fmt::format("entries:copy of {} to {}", request.name, request.destination);
  const HttpResponse response = call_api(*options_, "POST", "/v2/entries:copy", body.dump(), call,
                                         Idempotency::kNonIdempotent);
  return parse_copy_operation(response.body, call);
}

CopyOperation LoggingAdminClient::get_operation(const std::string& name) const {
  const std::string call = fmt::format("operations.get of {}", name);
  const HttpResponse response =
      call_api(*options_, "GET", "/v2/" + name, "", call, Idempotency::kIdempotent);
  return parse_copy_operation(response.body, call);
}

void LoggingAdminClient::cancel_operation(const std::string& name) const {
  call_api(*options_, "POST", "/v2/" + name + ":cancel", "{}",
           fmt::format("operations.cancel of {}", name), Idempotency::kIdempotent);
}

LogBucketInfo LoggingAdminClient::get_log_bucket(const std::string& name) const {
  const std::string call = fmt::format("get of log bucket {}", name);
  const HttpResponse response =
      call_api(*options_, "GET", "/v2/" + name, "", call, Idempotency::kIdempotent);
  const json bucket = json::parse(response.body, nullptr, false);
  if (!bucket.is_object()) {
    throw LogRetrievalError(fmt::format("{} returned a body that is not a JSON object", call));
  }
  LogBucketInfo out;
  out.name = string_field(bucket, "name");
  if (const auto cmek = bucket.find("cmekSettings"); cmek != bucket.end() && cmek->is_object()) {
    out.kms_key_name = string_field(*cmek, "kmsKeyName");
  }
  return out;
}

std::string LoggingAdminClient::logging_service_account(const std::string& project) const {
  const std::string call = fmt::format("settings get of project {}", project);
  const HttpResponse response = call_api(*options_, "GET", "/v2/projects/" + project + "/settings",
                                         "", call, Idempotency::kIdempotent);
  const json settings = json::parse(response.body, nullptr, false);
  if (!settings.is_object()) {
    throw LogRetrievalError(fmt::format("{} returned a body that is not a JSON object", call));
  }
  return string_field(settings, "loggingServiceAccountId");
}

}  // namespace falcon::gcp
