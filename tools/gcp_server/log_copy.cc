#include "gcp_server/log_copy.h"

#include <algorithm>
#include <regex>
#include <stdexcept>

#include <fmt/format.h>

#include "common/rfc3339.h"
#include "gcp_server/api_error.h"
#include "gcp_server/wire.h"

namespace falcon::fake {

using nlohmann::json;

namespace {

constexpr const char* kMetadataType =
    "type.googleapis.com/google.logging.v2.CopyLogEntriesMetadata";
constexpr const char* kResponseType =
    "type.googleapis.com/google.logging.v2.CopyLogEntriesResponse";
constexpr std::size_t kMaxFilter = 20'000;
constexpr const char* kDestinationScheme = "storage.googleapis.com/";

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

std::string time_text(std::int64_t ns) { return tools::format_rfc3339_nanos(ns); }

// The value of the first `"key":"..."` in a serialized entry (the fake's own serializer writes
// top-level keys first and never escapes these values' characters).
std::string_view top_level_string(std::string_view entry, std::string_view key) {
  const std::string needle = fmt::format("\"{}\":\"", key);
  const auto at = entry.find(needle);
  if (at == std::string_view::npos) return {};
  const auto start = at + needle.size();
  const auto end = entry.find('"', start);
  return end == std::string_view::npos ? std::string_view() : entry.substr(start, end - start);
}

}  // namespace

json to_json(const CopySettings& s) {
  return json{{"entries_per_second", s.entries_per_second},
              {"entries_per_object", s.entries_per_object},
              {"duplicate_every", s.duplicate_every},
              {"fail_at_percent", s.fail_at_percent},
              {"permission_timeout_ms", s.permission_timeout.count()}};
}

void apply_copy_settings(const json& j, CopySettings& s) {
  if (!j.is_object()) throw std::invalid_argument("copy settings must be a JSON object");
  for (const auto& [key, value] : j.items()) {
    if (!value.is_number_integer()) {
      throw std::invalid_argument(fmt::format("copy setting {} must be an integer", key));
    }
    const std::int64_t v = value.get<std::int64_t>();
    if (key == "entries_per_second" && v >= 0) {
      s.entries_per_second = v;
    } else if (key == "entries_per_object" && v > 0) {
      s.entries_per_object = v;
    } else if (key == "duplicate_every" && v >= 0) {
      s.duplicate_every = v;
    } else if (key == "fail_at_percent" && v >= -1 && v <= 100) {
      s.fail_at_percent = static_cast<int>(v);
    } else if (key == "permission_timeout_ms" && v >= 0) {
      s.permission_timeout = std::chrono::milliseconds(v);
    } else {
      throw std::invalid_argument(
          fmt::format("copy setting {}: unknown, or {} is out of range", key, v));
    }
  }
}

struct LogCopyService::Operation {
  std::string name;
  std::string id;
  std::string project;
  std::string source;  // the log bucket
  std::string filter;
  std::string destination;
  std::string bucket;  // destination bucket
  std::string prefix;  // destination folder, "" or ending in '/'
  std::string writer;  // "serviceAccount:..."
  std::string state = "OPERATION_STATE_SCHEDULED";
  bool cancellation_requested = false;
  bool done = false;
  json error;  // google.rpc.Status once failed or cancelled
  std::int64_t created_ns = 0;
  std::int64_t running_ns = 0;  // when it started running
  std::int64_t end_ns = 0;
  std::int64_t total = 0;   // entries the filter matches
  std::int64_t copied = 0;  // distinct entries copied
  std::string page_token;
  bool listed_all = false;
  std::vector<std::string> pending;     // the object being filled
  std::vector<std::string> duplicates;  // to write again in the next object
  std::int64_t objects_written = 0;
};

LogCopyService::LogCopyService(const LogStore& logs, ObjectStore& objects,
                               std::shared_ptr<Clock> clock)
    : logs_(logs), objects_(objects), clock_(std::move(clock)) {}

LogCopyService::~LogCopyService() = default;

std::string LogCopyService::logging_service_account(const std::string& project) {
  return fmt::format("service-{}@gcp-sa-logging.iam.gserviceaccount.com",
                     100000000000ULL + fnv1a(project) % 900000000000ULL);
}

json LogCopyService::settings_of(const std::string& project) {
  return json{{"name", fmt::format("projects/{}/settings", project)},
              {"loggingServiceAccountId", logging_service_account(project)},
              {"storageLocation", "global"}};
}

CopySettings LogCopyService::copy_settings() const {
  std::lock_guard lock(mutex_);
  return settings_;
}

void LogCopyService::set_copy_settings(const CopySettings& s) {
  std::lock_guard lock(mutex_);
  settings_ = s;
}

void LogCopyService::set_cmek(const std::string& bucket_name, const std::string& kms_key_name) {
  std::lock_guard lock(mutex_);
  if (kms_key_name.empty()) {
    cmek_.erase(bucket_name);
  } else {
    cmek_[bucket_name] = kms_key_name;
  }
}

json LogCopyService::log_bucket(const std::string& name) const {
  static const std::regex kBucket(R"(^projects/[^/]+/locations/[^/]+/buckets/[^/]+$)");
  if (!std::regex_match(name, kBucket)) {
    throw ApiError::not_found(fmt::format("Log bucket not found: \"{}\"", name));
  }
  json out{{"name", name}, {"retentionDays", 30}, {"lifecycleState", "ACTIVE"}};
  std::lock_guard lock(mutex_);
  if (auto it = cmek_.find(name); it != cmek_.end()) {
    out["cmekSettings"] = {{"kmsKeyName", it->second}};
  }
  return out;
}

json LogCopyService::start(const json& body) {
  static const std::regex kBucket(R"(^projects/([^/]+)/locations/([^/]+)/buckets/([^/]+)$)");
  for (const auto& [key, v] : body.items()) {
    if (key != "name" && key != "filter" && key != "destination") {
      throw ApiError::invalid_argument(fmt::format(
          "Invalid JSON payload received. Unknown name \"{}\": Cannot find field.", key));
    }
    if (!v.is_string()) throw ApiError::invalid_argument(fmt::format("{} must be a string", key));
  }
  const std::string name = body.value("name", "");
  const std::string filter = body.value("filter", "");
  const std::string destination = body.value("destination", "");
  std::smatch m;
  if (!std::regex_match(name, m, kBucket)) {
    throw ApiError::invalid_argument(
        fmt::format("name: \"{}\" is not a log bucket (projects/P/locations/L/buckets/B)", name));
  }
  if (filter.size() > kMaxFilter) {
    throw ApiError::invalid_argument(fmt::format(
        "filter: the maximum length of a filter is 20000 characters, got {}", filter.size()));
  }
  if (!destination.starts_with(kDestinationScheme) ||
      destination.size() == std::string_view(kDestinationScheme).size()) {
    throw ApiError::invalid_argument(
        fmt::format("destination: \"{}\" is not storage.googleapis.com/BUCKET", destination));
  }
  {
    std::lock_guard lock(mutex_);
    if (auto it = cmek_.find(name); it != cmek_.end()) {
      throw ApiError(400, "FAILED_PRECONDITION", "failedPrecondition",
                     fmt::format("Log bucket {} is protected by a customer-managed encryption key "
                                 "({}); copying log entries from CMEK log buckets is not "
                                 "supported.",
                                 name, it->second));
    }
  }
  auto op = std::make_unique<Operation>();
  op->project = m[1].str();
  const std::string location = m[2].str();
  op->source = name;
  op->filter = filter;
  op->destination = destination;
  std::string path = destination.substr(std::string_view(kDestinationScheme).size());
  const auto slash = path.find('/');
  op->bucket = path.substr(0, slash);
  if (slash != std::string::npos) {
    op->prefix = path.substr(slash + 1);
    while (!op->prefix.empty() && op->prefix.back() == '/') op->prefix.pop_back();
    if (!op->prefix.empty()) op->prefix += '/';
  }
  op->writer = "serviceAccount:" + logging_service_account(op->project);
  op->created_ns = clock_->now().time_since_epoch() / std::chrono::nanoseconds(1);
  LogListRequest count;
  count.resource_names = {"projects/" + op->project};
  count.filter = filter;
  count.count_only = true;
  op->total = static_cast<std::int64_t>(logs_.list(count).matched);  // 400 on a bad filter
  std::lock_guard lock(mutex_);
  op->id = fmt::format("{:016x}", fnv1a(fmt::format("{}/{}/{}", name, op->created_ns, next_id_++)));
  op->name = fmt::format("projects/{}/locations/{}/operations/{}", op->project, location, op->id);
  Operation& ref = *op;
  operations_[op->name] = std::move(op);
  return render(ref);
}

void LogCopyService::flush_object(Operation& op, std::int64_t now_ns) {
  if (op.pending.empty()) return;
  std::string data;
  for (auto it = op.pending.rbegin(); it != op.pending.rend(); ++it) {
    data += *it;
    data += '\n';
  }
  objects_.insert(op.bucket, fmt::format("{}{}-{}.jsonl", op.prefix, op.id, op.objects_written++),
                  std::move(data), "application/json", json(), std::nullopt, now_ns);
  op.pending.clear();
}

void LogCopyService::finish(Operation& op, const std::string& state, std::int64_t now_ns) {
  op.state = state;
  op.done = true;
  op.end_ns = now_ns;
}

void LogCopyService::advance(Operation& op, std::int64_t now_ns) {
  if (op.done) return;
  if (op.cancellation_requested) {
    flush_object(op, now_ns);
    op.error = {{"code", 1}, {"message", "Operation was cancelled."}};
    finish(op, "OPERATION_STATE_CANCELLED", now_ns);
    return;
  }
  if (op.state == "OPERATION_STATE_SCHEDULED" ||
      op.state == "OPERATION_STATE_WAITING_FOR_PERMISSIONS") {
    if (!objects_.can_create_objects(op.bucket, op.writer)) {
      op.state = "OPERATION_STATE_WAITING_FOR_PERMISSIONS";
      if (now_ns - op.created_ns >= settings_.permission_timeout.count() * 1'000'000) {
        op.error = {
            {"code", 7},
            {"message", fmt::format("The writer identity {} was not granted access to the "
                                    "destination bucket {} in time; the operation was cancelled.",
                                    op.writer, op.bucket)}};
        finish(op, "OPERATION_STATE_CANCELLED", now_ns);
      }
      return;
    }
    op.state = "OPERATION_STATE_RUNNING";
    op.running_ns = now_ns;
  }
  // RUNNING: copy what the rate allows by now.
  std::int64_t allowed = op.total;
  if (settings_.entries_per_second > 0) {
    const long double seconds = static_cast<long double>(now_ns - op.running_ns) / 1e9L;
    allowed = std::min<std::int64_t>(
        op.total, static_cast<std::int64_t>(seconds * settings_.entries_per_second));
  }
  const auto fail_at = [&] {
    return settings_.fail_at_percent >= 0 && op.total > 0 &&
           op.copied * 100 >= op.total * settings_.fail_at_percent;
  };
  bool failed = false;
  while (!op.listed_all && op.copied < allowed && !failed) {
    LogListRequest request;
    request.resource_names = {"projects/" + op.project};
    request.filter = op.filter;
    request.page_size = static_cast<int>(std::min<std::int64_t>(1000, allowed - op.copied));
    request.page_token = op.page_token;
    LogListResult page = logs_.list(request);
    for (std::string& entry : page.entries) {
      if (fail_at()) {
        failed = true;
        break;
      }
      ++op.copied;
      const bool twice =
          settings_.duplicate_every > 0 && op.copied % settings_.duplicate_every == 0;
      if (twice) op.duplicates.push_back(entry);
      op.pending.push_back(std::move(entry));
      if (static_cast<std::int64_t>(op.pending.size()) >= settings_.entries_per_object) {
        flush_object(op, now_ns);
        for (std::string& d : op.duplicates) op.pending.push_back(std::move(d));
        op.duplicates.clear();
      }
    }
    if (failed) break;
    op.page_token = std::move(page.next_page_token);
    if (op.page_token.empty()) op.listed_all = true;
  }
  if (failed || (fail_at() && !op.listed_all)) {
    flush_object(op, now_ns);
    op.error = {{"code", 13},
                {"message", fmt::format("Internal error while copying log entries to {} after {} "
                                        "of {} entries.",
                                        op.destination, op.copied, op.total)}};
    finish(op, "OPERATION_STATE_FAILED", now_ns);
    return;
  }
  if (op.listed_all) {
    for (std::string& d : op.duplicates) op.pending.push_back(std::move(d));
    op.duplicates.clear();
    flush_object(op, now_ns);
    finish(op, "OPERATION_STATE_SUCCEEDED", now_ns);
  }
}

json LogCopyService::render(const Operation& op) const {
  int progress = op.total > 0 ? static_cast<int>(op.copied * 100 / op.total) : 0;
  if (op.state == "OPERATION_STATE_SUCCEEDED") progress = 100;
  json metadata{
      {"@type", kMetadataType},
      {"startTime", time_text(op.created_ns)},
      {"state", op.state},
      {"cancellationRequested", op.cancellation_requested},
      {"request", {{"name", op.source}, {"filter", op.filter}, {"destination", op.destination}}},
      {"progress", progress},
      {"writerIdentity", op.writer},
      {"source", op.source},
      {"destination", op.destination},
      {"verb", "copy"}};
  if (op.done) metadata["endTime"] = time_text(op.end_ns);
  json out{{"name", op.name}, {"metadata", metadata}, {"done", op.done}};
  if (op.done && op.error.is_null()) {
    out["response"] = {{"@type", kResponseType},
                       {"logEntriesCopiedCount", std::to_string(op.copied)}};
  } else if (op.done) {
    out["error"] = op.error;
  }
  return out;
}

json LogCopyService::get(const std::string& name) {
  const std::int64_t now = clock_->now().time_since_epoch() / std::chrono::nanoseconds(1);
  std::lock_guard lock(mutex_);
  auto it = operations_.find(name);
  if (it == operations_.end()) {
    throw ApiError::not_found(fmt::format("Operation not found: {}", name));
  }
  advance(*it->second, now);
  return render(*it->second);
}

void LogCopyService::cancel(const std::string& name) {
  std::lock_guard lock(mutex_);
  auto it = operations_.find(name);
  if (it == operations_.end()) {
    throw ApiError::not_found(fmt::format("Operation not found: {}", name));
  }
  if (!it->second->done) it->second->cancellation_requested = true;
}

json LogCopyService::list(const std::string& parent, const std::string& filter) {
  if (filter.find("request_type") == std::string::npos ||
      filter.find("CopyLogEntries") == std::string::npos) {
    throw ApiError::invalid_argument(
        "filter: a request_type is required, e.g. request_type=CopyLogEntries");
  }
  const std::int64_t now = clock_->now().time_since_epoch() / std::chrono::nanoseconds(1);
  std::lock_guard lock(mutex_);
  json operations = json::array();
  for (auto& [name, op] : operations_) {
    if (!name.starts_with(parent + "/operations/")) continue;
    advance(*op, now);
    operations.push_back(render(*op));
  }
  json out = json::object();
  if (!operations.empty()) out["operations"] = std::move(operations);
  return out;
}

std::int64_t LogCopyService::write_sink_archive(const std::string& project,
                                                const std::string& bucket, std::int64_t until_ns,
                                                std::int64_t shard_entries,
                                                std::int64_t duplicate_every) {
  // The hour files of each log id, filled in time order; a full shard is written at once.
  struct Hour {
    std::string dir;   // <log id>/YYYY/MM/DD/
    std::string stem;  // HH:00:00_HH:59:59
    std::string data;
    std::int64_t entries = 0;
    int shard = 0;
  };
  const std::int64_t now = clock_->now().time_since_epoch() / std::chrono::nanoseconds(1);
  std::map<std::string, Hour> hours;  // by dir + stem
  std::int64_t written = 0;
  const auto flush = [&](Hour& h) {
    if (h.entries == 0) return;
    objects_.insert(bucket, fmt::format("{}{}_S{}.json", h.dir, h.stem, h.shard++),
                    std::move(h.data), "application/json", json(), std::nullopt, now);
    h.data.clear();
    h.entries = 0;
    ++written;
  };
  LogListRequest request;
  request.resource_names = {"projects/" + project};
  request.filter = fmt::format("timestamp<\"{}\"", time_text(until_ns));
  request.page_size = 1000;
  std::int64_t seen = 0;
  do {
    LogListResult page = logs_.list(request);
    for (const std::string& entry : page.entries) {
      ++seen;
      const std::string_view log_name = top_level_string(entry, "logName");
      const auto logs = log_name.find("/logs/");
      const std::string log_id = logs == std::string_view::npos
                                     ? "unknown"
                                     : percent_decode(std::string(log_name.substr(logs + 6)));
      const std::string ts(top_level_string(entry, "timestamp"));
      if (ts.size() < 13) continue;
      const std::string dir =
          fmt::format("{}/{}/{}/{}/", log_id, ts.substr(0, 4), ts.substr(5, 2), ts.substr(8, 2));
      const std::string hh = ts.substr(11, 2);
      Hour& h = hours[dir + hh];
      if (h.dir.empty()) {
        h.dir = dir;
        h.stem = fmt::format("{0}:00:00_{0}:59:59", hh);
      }
      const int copies = duplicate_every > 0 && seen % duplicate_every == 0 ? 2 : 1;
      for (int c = 0; c < copies; ++c) {
        h.data += entry;
        h.data += '\n';
        if (++h.entries >= shard_entries) flush(h);
      }
    }
    request.page_token = std::move(page.next_page_token);
  } while (!request.page_token.empty());
  for (auto& [key, h] : hours) flush(h);
  return written;
}

void LogCopyService::clear() {
  std::lock_guard lock(mutex_);
  operations_.clear();
  cmek_.clear();
  settings_ = CopySettings{};
}

}  // namespace falcon::fake
