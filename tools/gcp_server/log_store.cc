#include "gcp_server/log_store.h"

#include <algorithm>
#include <mutex>
#include <regex>
#include <set>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

#include "common/base64.h"
#include "common/rfc3339.h"
#include "gcp_server/api_error.h"
#include "gcp_server/lql.h"
#include "gcp_server/wire.h"

namespace falcon::fake {

using nlohmann::json;

struct LogStore::Shape {
  json fields;           // the shared members of the entry, as a JSON object
  std::string fragment;  // fields serialized without the outer braces ("" when empty)
  std::string scope;     // "projects/P" (the first two segments of logName)
};

namespace {

constexpr std::string_view kPerEntryFields[] = {"timestamp",   "receiveTimestamp", "insertId",
                                                "textPayload", "jsonPayload",      "protoPayload"};

const std::set<std::string, std::less<>>& known_entry_fields() {
  static const std::set<std::string, std::less<>> kFields = {
      "logName",     "resource",    "protoPayload",     "textPayload",
      "jsonPayload", "timestamp",   "receiveTimestamp", "severity",
      "insertId",    "httpRequest", "labels",           "operation",
      "trace",       "spanId",      "traceSampled",     "sourceLocation",
      "split",       "errorGroups", "apphub",           "apphubDestination",
      "apphubSource"};
  return kFields;
}

// proto3 JSON parsers accept the original field names too: log_name -> logName.
std::string camel_case(std::string_view name) {
  std::string out;
  bool up = false;
  for (char c : name) {
    if (c == '_') {
      up = true;
      continue;
    }
    out += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    up = false;
  }
  return out;
}

// projects|organizations|folders|billingAccounts/<id>/logs/<url-encoded log id>
bool valid_log_name(std::string_view name) {
  const auto slash = name.find('/');
  if (slash == std::string_view::npos) return false;
  const std::string_view kind = name.substr(0, slash);
  if (kind != "projects" && kind != "organizations" && kind != "folders" &&
      kind != "billingAccounts") {
    return false;
  }
  const auto logs = name.find("/logs/", slash + 1);
  if (logs == std::string_view::npos || logs == slash + 1 ||
      name.substr(slash + 1, logs - slash - 1).find('/') != std::string_view::npos) {
    return false;
  }
  const std::string_view id = name.substr(logs + 6);
  if (id.empty() || id.size() > 512) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '%' ||
           c == '-';
  });
}

std::string scope_of_log_name(std::string_view log_name) {
  const auto first = log_name.find('/');
  const auto second = log_name.find('/', first + 1);
  return std::string(log_name.substr(0, second));
}

// "projects/P", "organizations/O", ..., or a log view under one of them -> its scope.
std::string scope_of_resource_name(const std::string& name) {
  static const std::regex kPlain(R"(^(projects|organizations|folders|billingAccounts)/[^/]+$)");
  static const std::regex kView(
      R"(^((projects|organizations|folders|billingAccounts)/[^/]+)/locations/[^/]+/buckets/[^/]+/views/[^/]+$)");
  std::smatch m;
  if (std::regex_match(name, kPlain)) return name;
  if (std::regex_match(name, m, kView)) return m[1].str();
  throw ApiError::invalid_argument(fmt::format("Invalid resource name: \"{}\"", name));
}

std::uint64_t fnv1a(std::string_view s, std::uint64_t h = 1469598103934665603ULL) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

struct Position {
  std::int64_t timestamp = 0;
  std::string insert_id;
};

std::string request_fingerprint(const LogListRequest& r) {
  std::uint64_t h = fnv1a(r.filter);
  h = fnv1a(r.descending ? "desc" : "asc", h);
  for (const auto& n : r.resource_names) h = fnv1a(n + "\n", h);
  return fmt::format("{:016x}", h);
}

std::string make_token(const LogListRequest& r, const Position& p) {
  json t = {{"v", 1},
            {"f", request_fingerprint(r)},
            {"t", p.timestamp},
            {"i", p.insert_id},
            {"d", r.descending}};
  return tools::base64url_encode(t.dump());
}

Position parse_token(const LogListRequest& r) {
  const auto fail = [] {
    return ApiError::invalid_argument(
        "The page token is invalid, or does not belong to this request's resourceNames, filter "
        "and orderBy");
  };
  const auto raw = tools::base64url_decode(r.page_token);
  if (!raw) throw fail();
  const json t = json::parse(*raw, nullptr, false);
  if (!t.is_object() || t.value("v", 0) != 1 || !t.contains("t") || !t["t"].is_number_integer() ||
      !t.contains("i") || !t["i"].is_string() || t.value("f", "") != request_fingerprint(r) ||
      t.value("d", !r.descending) != r.descending) {
    throw fail();
  }
  return Position{t["t"].get<std::int64_t>(), t["i"].get<std::string>()};
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The filter's view of a stored entry.

class LogStore::View final : public lql::EntryView {
 public:
  View(const Entry& e, const Shape& s) : e_(e), s_(s) {}

  const json* find(const std::vector<std::string>& path) const override {
    if (path.empty()) return nullptr;
    const std::string& root = path[0];
    const json* cur = nullptr;
    std::size_t i = 1;
    if (root == "insertId") {
      if (!insert_id_) insert_id_ = json(std::string(insert_id()));
      cur = &*insert_id_;
    } else if (root == "textPayload") {
      if (e_.payload_kind != 1) return nullptr;
      if (!payload_) payload_ = json(std::string(payload()));
      cur = &*payload_;
    } else if (root == "jsonPayload" || root == "protoPayload") {
      if (e_.payload_kind != (root == "jsonPayload" ? 2 : 3)) return nullptr;
      if (!payload_) payload_ = json::parse(payload());
      cur = &*payload_;
    } else {
      cur = &s_.fields;
      i = 0;
    }
    for (; i < path.size(); ++i) {
      if (!cur->is_object()) return nullptr;
      auto it = cur->find(path[i]);
      if (it == cur->end()) return nullptr;
      cur = &*it;
    }
    return cur;
  }

  std::optional<std::int64_t> time_field(std::string_view name) const override {
    if (name == "timestamp") return e_.timestamp;
    if (name == "receiveTimestamp") return e_.receive_timestamp;
    return std::nullopt;
  }

  bool any_text(const std::function<bool(std::string_view)>& fn) const override {
    if (fn(insert_id())) return true;
    if (e_.payload_kind == 1) {
      if (fn(payload())) return true;
    } else if (e_.payload_kind != 0) {
      std::vector<std::string> path{e_.payload_kind == 2 ? "jsonPayload" : "protoPayload"};
      if (const json* p = find(path); p && lql::JsonEntryView(*p).any_text(fn)) return true;
    }
    if (lql::JsonEntryView(s_.fields).any_text(fn)) return true;
    return fn(tools::format_rfc3339_nanos(e_.timestamp)) ||
           fn(tools::format_rfc3339_nanos(e_.receive_timestamp));
  }

 private:
  std::string_view insert_id() const {
    return std::string_view(e_.data).substr(0, e_.insert_id_size);
  }
  std::string_view payload() const { return std::string_view(e_.data).substr(e_.insert_id_size); }

  const Entry& e_;
  const Shape& s_;
  mutable std::optional<json> insert_id_;
  mutable std::optional<json> payload_;
};

// ---------------------------------------------------------------------------------------------

LogStore::LogStore(std::size_t scan_budget) : scan_budget_(scan_budget) {}
LogStore::~LogStore() = default;

std::size_t LogStore::size() const {
  std::shared_lock lock(mutex_);
  return entries_.size();
}

void LogStore::clear() {
  std::unique_lock lock(mutex_);
  entries_.clear();
  order_.clear();
  shapes_.clear();
  shape_ids_.clear();
  if (file_) file_ = std::make_unique<std::ofstream>(file_path_, std::ios::trunc);
}

LogStore::Entry LogStore::normalize(json entry, const json& log_name, const json& resource,
                                    const json& labels, std::int64_t receive_ns,
                                    std::size_t index) {
  const auto bad = [index](const std::string& what) {
    return ApiError::invalid_argument(fmt::format("entries[{}]: {}", index, what));
  };
  if (!entry.is_object()) throw bad("a log entry must be a JSON object");
  json e = json::object();
  for (auto& [key, value] : entry.items()) {
    std::string name = key.find('_') != std::string::npos ? camel_case(key) : key;
    if (!known_entry_fields().count(name)) {
      throw bad(fmt::format(
          "Invalid JSON payload received. Unknown name \"{}\": Cannot find field.", key));
    }
    e[name] = std::move(value);
  }
  if (!e.contains("logName") && log_name.is_string()) e["logName"] = log_name;
  if (!e.contains("resource") && resource.is_object()) e["resource"] = resource;
  if (labels.is_object() && !labels.empty()) {
    json merged = labels;
    if (e.contains("labels")) {
      if (!e["labels"].is_object()) throw bad("labels must be an object");
      for (auto& [k, v] : e["labels"].items()) merged[k] = v;
    }
    e["labels"] = std::move(merged);
  }

  if (!e.contains("logName") || !e["logName"].is_string()) {
    throw bad("logName is required (in the entry or the request)");
  }
  const std::string& name = e["logName"].get_ref<const std::string&>();
  if (!valid_log_name(name)) {
    throw bad(
        fmt::format("Invalid log name \"{}\": expected projects/[PROJECT_ID]/logs/[LOG_ID] with a "
                    "URL-encoded LOG_ID",
                    name));
  }
  if (!e.contains("resource") || !e["resource"].is_object() || !e["resource"].contains("type") ||
      !e["resource"]["type"].is_string()) {
    throw bad("resource with a type is required (in the entry or the request)");
  }
  if (e.contains("labels")) {
    if (!e["labels"].is_object()) throw bad("labels must be an object of strings");
    for (const auto& [k, v] : e["labels"].items()) {
      if (!v.is_string()) throw bad(fmt::format("labels.\"{}\" must be a string", k));
    }
  }
  if (e.contains("severity")) {
    const json& s = e["severity"];
    std::optional<std::string> sev;
    if (s.is_string()) {
      if (auto level = lql::severity_level(s.get<std::string>())) sev = lql::severity_name(*level);
    } else if (s.is_number_integer()) {
      sev = lql::severity_name(s.get<int>());
    }
    if (!sev) throw bad(fmt::format("Invalid value for enum severity: {}", s.dump()));
    if (*sev == "DEFAULT") {
      e.erase("severity");  // proto3 JSON leaves default values out
    } else {
      e["severity"] = *sev;
    }
  }
  for (const char* f : {"trace", "spanId"}) {
    if (e.contains(f) && !e[f].is_string()) throw bad(fmt::format("{} must be a string", f));
  }

  Entry out;
  out.receive_timestamp = receive_ns;
  out.timestamp = receive_ns;
  if (e.contains("timestamp")) {
    const json& t = e["timestamp"];
    std::optional<std::int64_t> ns;
    if (t.is_string()) ns = tools::parse_rfc3339_nanos(t.get<std::string>());
    if (!ns) throw bad(fmt::format("Invalid timestamp {}", t.dump()));
    out.timestamp = *ns;
  }
  std::string insert_id;
  if (e.contains("insertId")) {
    if (!e["insertId"].is_string()) throw bad("insertId must be a string");
    insert_id = e["insertId"].get<std::string>();
  }
  if (insert_id.empty()) {
    // Ids that sort in arrival order, like the ones the service generates.
    insert_id = fmt::format("fk{:014x}", next_insert_id_++);
  }
  if (insert_id.size() > 0xffff) throw bad("insertId is too long");
  int payloads = 0;
  std::string payload;
  if (e.contains("textPayload")) {
    if (!e["textPayload"].is_string()) throw bad("textPayload must be a string");
    payload = e["textPayload"].get<std::string>();
    out.payload_kind = 1;
    ++payloads;
  }
  if (e.contains("jsonPayload")) {
    if (!e["jsonPayload"].is_object()) throw bad("jsonPayload must be an object");
    payload = e["jsonPayload"].dump();
    out.payload_kind = 2;
    ++payloads;
  }
  if (e.contains("protoPayload")) {
    if (!e["protoPayload"].is_object() || !e["protoPayload"].contains("@type")) {
      throw bad("protoPayload must be an object with an \"@type\"");
    }
    payload = e["protoPayload"].dump();
    out.payload_kind = 3;
    ++payloads;
  }
  if (payloads > 1) throw bad("only one of textPayload, jsonPayload and protoPayload may be set");
  out.insert_id_size = static_cast<std::uint16_t>(insert_id.size());
  out.data = std::move(insert_id);
  out.data += payload;

  for (std::string_view f : kPerEntryFields) e.erase(std::string(f));
  std::string key = e.dump();
  auto it = shape_ids_.find(key);
  if (it != shape_ids_.end()) {
    out.shape = it->second;
  } else {
    auto shape = std::make_unique<Shape>();
    shape->scope = scope_of_log_name(name);
    shape->fragment = key.size() > 2 ? key.substr(1, key.size() - 2) : std::string();
    shape->fields = std::move(e);
    out.shape = static_cast<std::uint32_t>(shapes_.size());
    shapes_.push_back(std::move(shape));
    shape_ids_.emplace(std::move(key), out.shape);
  }
  return out;
}

bool LogStore::key_less(std::uint32_t a, std::uint32_t b) const {
  const Entry& x = entries_[a];
  const Entry& y = entries_[b];
  if (x.timestamp != y.timestamp) return x.timestamp < y.timestamp;
  const std::string_view xi = std::string_view(x.data).substr(0, x.insert_id_size);
  const std::string_view yi = std::string_view(y.data).substr(0, y.insert_id_size);
  if (xi != yi) return xi < yi;
  return a < b;
}

void LogStore::insert_sorted(std::size_t first_new) {
  const std::size_t old = order_.size();
  for (std::size_t i = first_new; i < entries_.size(); ++i) {
    order_.push_back(static_cast<std::uint32_t>(i));
  }
  auto cmp = [this](std::uint32_t a, std::uint32_t b) { return key_less(a, b); };
  auto mid = order_.begin() + static_cast<std::ptrdiff_t>(old);
  if (!std::is_sorted(mid, order_.end(), cmp)) std::sort(mid, order_.end(), cmp);
  if (old > 0 && mid != order_.end() && cmp(*mid, *(mid - 1))) {
    // Only the old entries after the batch's first one move: writes that arrive roughly in
    // time order (many pods logging at once) merge a short tail, not the whole store.
    auto first = std::upper_bound(order_.begin(), mid, *mid, cmp);
    std::inplace_merge(first, mid, order_.end(), cmp);
  }
}

void LogStore::write(std::vector<json> entries, const json& log_name, const json& resource,
                     const json& labels, std::int64_t receive_ns) {
  std::unique_lock lock(mutex_);
  if (entries_.size() + entries.size() > std::numeric_limits<std::uint32_t>::max()) {
    throw ApiError(429, "RESOURCE_EXHAUSTED", "rateLimitExceeded", "the fake's store is full");
  }
  const std::size_t first_new = entries_.size();
  const std::size_t shapes_before = shapes_.size();
  const std::uint64_t next_id_before = next_insert_id_;
  try {
    for (std::size_t i = 0; i < entries.size(); ++i) {
      entries_.push_back(
          normalize(std::move(entries[i]), log_name, resource, labels, receive_ns, i));
    }
  } catch (...) {
    // All or nothing: forget this batch, including shapes it introduced.
    entries_.resize(first_new);
    for (std::size_t s = shapes_before; s < shapes_.size(); ++s) {
      shape_ids_.erase(json(shapes_[s]->fields).dump());
    }
    shapes_.resize(shapes_before);
    next_insert_id_ = next_id_before;
    throw;
  }
  insert_sorted(first_new);
  if (file_) {
    for (std::size_t i = first_new; i < entries_.size(); ++i) {
      *file_ << serialize(entries_[i]) << '\n';
    }
    file_->flush();
  }
}

void LogStore::write_text(const json& shared, std::vector<LogLine> lines, std::int64_t receive_ns) {
  for (const char* f : {"timestamp", "insertId", "textPayload", "jsonPayload", "protoPayload"}) {
    if (shared.is_object() && shared.contains(f)) {
      throw ApiError::invalid_argument(fmt::format("shared fields must not contain {}", f));
    }
  }
  std::unique_lock lock(mutex_);
  if (entries_.size() + lines.size() > std::numeric_limits<std::uint32_t>::max()) {
    throw ApiError(429, "RESOURCE_EXHAUSTED", "rateLimitExceeded", "the fake's store is full");
  }
  // Normalise the shared part once (this also interns its shape).
  json probe = shared;
  probe["textPayload"] = "";
  const std::uint64_t next_id_before = next_insert_id_;
  const Entry model = normalize(std::move(probe), json(), json(), json(), receive_ns, 0);
  next_insert_id_ = next_id_before;
  const std::size_t first_new = entries_.size();
  for (auto& line : lines) {
    Entry e;
    e.timestamp = line.timestamp_ns;
    e.receive_timestamp = receive_ns;
    e.shape = model.shape;
    e.payload_kind = 1;
    e.data = fmt::format("fk{:014x}", next_insert_id_++);
    e.insert_id_size = static_cast<std::uint16_t>(e.data.size());
    e.data += line.text;
    entries_.push_back(std::move(e));
  }
  insert_sorted(first_new);
  if (file_) {
    for (std::size_t i = first_new; i < entries_.size(); ++i) {
      *file_ << serialize(entries_[i]) << '\n';
    }
    file_->flush();
  }
}

std::string LogStore::serialize(const Entry& e) const {
  const Shape& s = *shapes_[e.shape];
  std::string out;
  out.reserve(e.data.size() + s.fragment.size() + 128);
  out += "{\"insertId\":";
  append_json_string(out, std::string_view(e.data).substr(0, e.insert_id_size));
  out += ",\"timestamp\":\"";
  out += format_proto_timestamp(e.timestamp);
  out += "\",\"receiveTimestamp\":\"";
  out += format_proto_timestamp(e.receive_timestamp);
  out += '"';
  const std::string_view payload = std::string_view(e.data).substr(e.insert_id_size);
  switch (e.payload_kind) {
    case 1:
      out += ",\"textPayload\":";
      append_json_string(out, payload);
      break;
    case 2:
      out += ",\"jsonPayload\":";
      out += payload;
      break;
    case 3:
      out += ",\"protoPayload\":";
      out += payload;
      break;
    default:
      break;
  }
  if (!s.fragment.empty()) {
    out += ',';
    out += s.fragment;
  }
  out += '}';
  return out;
}

LogListResult LogStore::list(const LogListRequest& request) const {
  lql::Filter filter;
  try {
    filter = lql::Filter::parse(request.filter);
  } catch (const lql::FilterError& e) {
    throw ApiError::invalid_argument(e.what());
  }
  std::vector<std::string> scopes;
  for (const auto& n : request.resource_names) scopes.push_back(scope_of_resource_name(n));
  std::optional<Position> from;
  if (!request.page_token.empty()) from = parse_token(request);

  const lql::TimeBounds bounds = filter.time_bounds();
  LogListResult result;
  std::shared_lock lock(mutex_);

  // [lo, hi) is the slice of order_ whose timestamps lie within the filter's bounds.
  auto ts_of = [this](std::uint32_t i) { return entries_[i].timestamp; };
  auto lo = std::partition_point(order_.begin(), order_.end(),
                                 [&](std::uint32_t i) { return ts_of(i) < bounds.lo; });
  auto hi = std::partition_point(lo, order_.end(),
                                 [&](std::uint32_t i) { return ts_of(i) <= bounds.hi; });
  auto key_before = [this](std::uint32_t i, const Position& p) {
    const Entry& e = entries_[i];
    if (e.timestamp != p.timestamp) return e.timestamp < p.timestamp;
    return std::string_view(e.data).substr(0, e.insert_id_size) < std::string_view(p.insert_id);
  };
  auto key_after = [this](std::uint32_t i, const Position& p) {
    const Entry& e = entries_[i];
    if (e.timestamp != p.timestamp) return e.timestamp > p.timestamp;
    return std::string_view(e.data).substr(0, e.insert_id_size) > std::string_view(p.insert_id);
  };
  if (from) {
    if (!request.descending) {
      // Resume strictly after the last position returned.
      lo = std::max(
          lo, std::partition_point(lo, hi, [&](std::uint32_t i) { return !key_after(i, *from); }));
    } else {
      hi = std::min(
          hi, std::partition_point(lo, hi, [&](std::uint32_t i) { return key_before(i, *from); }));
    }
  }
  if (lo >= hi) return result;

  const std::size_t page_size = static_cast<std::size_t>(request.page_size);
  std::uint64_t examined = 0;
  const Entry* last = nullptr;  // last emitted, for de-duplication
  auto position_of = [this](const Entry& e) {
    return Position{e.timestamp, std::string(std::string_view(e.data).substr(0, e.insert_id_size))};
  };
  // Examines one entry; returns true when it belongs in the result.
  auto accept = [&](const Entry& e) {
    ++examined;
    const Shape& s = *shapes_[e.shape];
    if (std::find(scopes.begin(), scopes.end(), s.scope) == scopes.end()) return false;
    if (!filter.matches(View(e, s))) return false;
    // Same project, timestamp and insertId: duplicates, removed from a query's results.
    if (last && last->timestamp == e.timestamp && last->insert_id_size == e.insert_id_size &&
        std::string_view(last->data).substr(0, last->insert_id_size) ==
            std::string_view(e.data).substr(0, e.insert_id_size) &&
        shapes_[last->shape]->scope == s.scope) {
      return false;
    }
    return true;
  };

  // Walk the slice in the requested direction.
  const std::ptrdiff_t n = hi - lo;
  const std::ptrdiff_t step = request.descending ? -1 : 1;
  std::ptrdiff_t k = request.descending ? n - 1 : 0;
  auto in_range = [&](std::ptrdiff_t i) { return i >= 0 && i < n; };
  if (request.count_only) {
    for (; in_range(k); k += step) {
      const Entry& e = entries_[lo[k]];
      if (accept(e)) {
        ++result.matched;
        last = &e;
      }
    }
    examined_ += examined;
    return result;
  }
  for (; in_range(k); k += step) {
    const Entry& e = entries_[lo[k]];
    if (accept(e)) {
      result.entries.push_back(serialize(e));
      last = &e;
      if (result.entries.size() == page_size) {
        k += step;
        break;
      }
    }
    if (scan_budget_ > 0 && examined >= scan_budget_ && in_range(k + step)) {
      // Out of time for this call: hand back what we have and where we stopped.
      result.next_page_token = make_token(request, position_of(e));
      examined_ += examined;
      return result;
    }
  }
  if (result.entries.size() == page_size && in_range(k)) {
    // More entries remain in range. Look ahead a little so that the last page of a listing
    // rarely comes back empty; past the look-ahead, answer with a token anyway (the API allows
    // an empty final page).
    constexpr std::ptrdiff_t kLookAhead = 1000;
    bool more = false;
    std::ptrdiff_t looked = 0;
    for (std::ptrdiff_t j = k; in_range(j) && looked < kLookAhead; j += step, ++looked) {
      if (accept(entries_[lo[j]])) {
        more = true;
        break;
      }
    }
    if (more || (in_range(k + step * looked) && looked == kLookAhead)) {
      result.next_page_token = make_token(request, position_of(*last));
    }
  }
  examined_ += examined;
  return result;
}

void LogStore::attach_file(const std::filesystem::path& path) {
  std::filesystem::create_directories(path.parent_path());
  if (std::filesystem::exists(path)) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read " + path.string());
    std::string line;
    std::vector<json> batch;
    auto flush = [&] {
      // Entries carry their own receiveTimestamp; write() would overwrite it, so restore it.
      std::unique_lock lock(mutex_);
      const std::size_t first_new = entries_.size();
      for (std::size_t i = 0; i < batch.size(); ++i) {
        std::int64_t receive = 0;
        if (auto it = batch[i].find("receiveTimestamp"); it != batch[i].end() && it->is_string()) {
          receive = tools::parse_rfc3339_nanos(it->get<std::string>()).value_or(0);
        }
        batch[i].erase("receiveTimestamp");
        entries_.push_back(normalize(std::move(batch[i]), json(), json(), json(), receive, i));
      }
      insert_sorted(first_new);
      batch.clear();
    };
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      json j = json::parse(line, nullptr, false);
      if (j.is_discarded()) continue;  // a torn last line after a crash
      batch.push_back(std::move(j));
      if (batch.size() == 10000) flush();
    }
    flush();
  }
  std::unique_lock lock(mutex_);
  file_path_ = path;
  file_ = std::make_unique<std::ofstream>(path, std::ios::app);
  if (!*file_) throw std::runtime_error("cannot open " + path.string() + " for writing");
}

}  // namespace falcon::fake
