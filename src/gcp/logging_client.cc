#include "gcp/logging_client.h"

#include <algorithm>
#include <iterator>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "falcon/errors.h"
#include "gcp/api_error.h"
#include "gcp/json_fields.h"
#include "util/time_format.h"

namespace falcon::gcp {
namespace {

using nlohmann::json;

std::map<std::string, std::string> string_map(const json& object) {
  std::map<std::string, std::string> out;
  if (!object.is_object()) return out;
  for (const auto& [key, value] : object.items()) {
    out.emplace(key, value.is_string() ? value.get<std::string>() : value.dump());
  }
  return out;
}

LogEntry parse_entry_fields(const json& item) {
  LogEntry entry;
  entry.log_name = string_field(item, "logName");
  entry.timestamp = string_field(item, "timestamp");
  if (!entry.timestamp.empty()) {
    entry.timestamp_nanos = parse_rfc3339_nanos(entry.timestamp).value_or(0);
  }
  entry.receive_timestamp = string_field(item, "receiveTimestamp");
  if (!entry.receive_timestamp.empty()) {
    entry.receive_timestamp_nanos = parse_rfc3339_nanos(entry.receive_timestamp).value_or(0);
  }
  entry.insert_id = string_field(item, "insertId");
  entry.severity = string_field(item, "severity");
  entry.text_payload = string_field(item, "textPayload");
  if (const auto it = item.find("jsonPayload"); it != item.end() && !it->is_null()) {
    entry.json_payload = it->dump();
    if (const auto message = it->find("message");
        it->is_object() && message != it->end() && message->is_string()) {
      entry.message = message->get<std::string>();
    } else {
      entry.message = entry.json_payload;
    }
  }
  if (item.contains("textPayload")) {
    entry.message = entry.text_payload;
  } else if (entry.json_payload.empty()) {
    if (const auto it = item.find("protoPayload"); it != item.end() && !it->is_null()) {
      entry.message = it->dump();
    }
  }
  if (const auto it = item.find("resource"); it != item.end() && it->is_object()) {
    entry.resource_type = string_field(*it, "type");
    if (const auto labels = it->find("labels"); labels != it->end()) {
      entry.resource_labels = string_map(*labels);
    }
  }
  if (const auto it = item.find("labels"); it != item.end()) entry.labels = string_map(*it);
  return entry;
}

}  // namespace

LogEntry parse_log_entry(const json& item) { return parse_entry_fields(item); }

LogEntriesPage parse_log_entries_page(const std::string& body, const std::string& call) {
  // Each entry is decoded as soon as the parser has read it, and dropped from the document:
  // only one entry's JSON tree is in memory at a time, besides the decoded page.
  LogEntriesPage out;
  bool in_entries = false;  // inside the top-level "entries" array
  std::string key;          // the top-level key being read
  const json::parser_callback_t decode = [&](int depth, json::parse_event_t event, json& parsed) {
    using E = json::parse_event_t;
    if (depth == 1 && event == E::key) {
      key = parsed.get<std::string>();
    } else if (depth == 1 && event == E::array_start) {
      in_entries = key == "entries";
    } else if (depth == 1 && event == E::array_end) {
      in_entries = false;
    } else if (in_entries && depth == 2 && event == E::object_end) {
      out.entries.push_back(parse_entry_fields(parsed));
      return false;  // decoded: not kept in the document
    }
    return true;
  };
  const json page = json::parse(body, decode, false);
  if (!page.is_object()) {
    throw LogRetrievalError(fmt::format("{} returned a body that is not a JSON object", call));
  }
  out.next_page_token = string_field(page, "nextPageToken");
  const auto entries = page.find("entries");  // proto3 JSON leaves an empty list out
  if (entries == page.end() || entries->is_null()) return out;
  if (!entries->is_array()) {
    throw LogRetrievalError(fmt::format("{} returned \"entries\" that is not an array", call));
  }
  // Objects were decoded and dropped: whatever is left in the array is not an entry.
  if (!entries->empty()) {
    throw LogRetrievalError(fmt::format("{} returned an entry that is not an object", call));
  }
  return out;
}

std::optional<std::int64_t> parse_http_date(std::string_view text) {
  // IMF-fixdate only ("Sun, 06 Nov 1994 08:49:37 GMT"): what every current server sends.
  static constexpr std::string_view kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                 "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  if (text.size() != 29 || text[3] != ',' || text.substr(25) != " GMT") return std::nullopt;
  const auto number = [&](std::size_t at, std::size_t n) -> std::optional<int> {
    int value = 0;
    for (std::size_t i = at; i < at + n; ++i) {
      if (text[i] < '0' || text[i] > '9') return std::nullopt;
      value = value * 10 + (text[i] - '0');
    }
    return value;
  };
  const auto day = number(5, 2);
  const auto year = number(12, 4);
  const auto hour = number(17, 2);
  const auto minute = number(20, 2);
  const auto second = number(23, 2);
  if (!day || !year || !hour || !minute || !second || text[19] != ':' || text[22] != ':') {
    return std::nullopt;
  }
  const auto month = std::find(std::begin(kMonths), std::end(kMonths), text.substr(8, 3));
  if (month == std::end(kMonths)) return std::nullopt;
  return parse_rfc3339_nanos(fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", *year,
                                         month - std::begin(kMonths) + 1, *day, *hour, *minute,
                                         *second));
}

std::string project_of_resource(const std::string& resource_name) {
  constexpr std::string_view kPrefix = "projects/";
  if (!resource_name.starts_with(kPrefix)) return resource_name;
  const auto end = resource_name.find('/', kPrefix.size());
  return resource_name.substr(kPrefix.size(),
                              end == std::string::npos ? std::string::npos : end - kPrefix.size());
}

LoggingClient::LoggingClient(LoggingClientOptions options) {
  if (!options.http) throw std::invalid_argument("LoggingClient needs an HttpClient");
  if (!options.clock) throw std::invalid_argument("LoggingClient needs a Clock");
  if (!options.rate_limiters) {
    options.rate_limiters = std::make_shared<ProjectRateLimiters>(options.clock);
  }
  while (!options.endpoint.empty() && options.endpoint.back() == '/') options.endpoint.pop_back();
  options_ = std::make_shared<const LoggingClientOptions>(std::move(options));
}

std::string entries_list_call(const ListLogEntriesRequest& request) {
  return fmt::format("entries:list for {}", fmt::join(request.resource_names, ","));
}

LogEntriesPage LoggingClient::list_entries_page(const ListLogEntriesRequest& request) const {
  if (request.resource_names.empty()) {
    throw std::invalid_argument("entries:list needs at least one resource name");
  }
  if (request.page_size < 1 || request.page_size > 1000) {
    throw std::invalid_argument(
        fmt::format("entries:list page_size must be 1..1000, not {}", request.page_size));
  }
  const LoggingClientOptions& options = *options_;
  json body = {{"resourceNames", request.resource_names},
               {"orderBy", request.newest_first ? "timestamp desc" : "timestamp asc"},
               {"pageSize", request.page_size}};
  if (!request.filter.empty()) body["filter"] = request.filter;
  if (!request.page_token.empty()) body["pageToken"] = request.page_token;

  HttpRequest http_request;
  http_request.method = "POST";
  http_request.url = options.endpoint + "/v2/entries:list";
  http_request.headers.set("Content-Type", "application/json");
  http_request.headers.set("Accept", "application/json");
  http_request.body = body.dump();
  http_request.timeout = options.request_timeout;

  const std::string project = project_of_resource(request.resource_names.front());
  RetryOptions retry;
  retry.policy = options.retry;
  // entries:list is a POST but a pure read: safe to repeat.
  retry.idempotency = Idempotency::kIdempotent;
  retry.call = entries_list_call(request);
  retry.clock = options.clock.get();
  retry.seed = options.seed;
  retry.credentials = options.credentials.get();
  if (options.on_wait) {
    retry.on_wait = [&options, &project](const RetryWait& wait) {
      RetryWait notice = wait;
      notice.project = project;
      options.on_wait(notice);
    };
  }
  retry.before_attempt = [&options, &project, &retry] {
    const Reservation reservation =
        options.rate_limiters->reserve(project, options.reads_per_minute);
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(reservation.wait);
    if (options.on_wait &&
        (!reservation.warning.empty() || wait >= options.rate_limit_notice_after)) {
      RetryWait notice;
      notice.cause = RetryWait::Cause::kRateLimit;
      notice.call = retry.call;
      notice.project = project;
      notice.problem = fmt::format("{} reads a minute, shared by {}", options.reads_per_minute,
                                   options.rate_limiters->sharing());
      notice.warning = reservation.warning;
      notice.wait = wait;
      options.on_wait(notice);
    }
    if (reservation.wait.count() > 0) options.clock->sleep_for(reservation.wait);
  };
  const HttpResponse response = send_with_retry(*options.http, std::move(http_request), retry);
  LogEntriesPage page = parse_log_entries_page(response.body, retry.call);
  if (const auto date = response.headers.get("Date"))
    page.server_time_nanos = parse_http_date(*date);
  return page;
}

LogEntryReader LoggingClient::list_entries(ListLogEntriesRequest request) const {
  return LogEntryReader(*this, std::move(request));
}

LogEntryReader::LogEntryReader(LoggingClient client, ListLogEntriesRequest request)
    : client_(std::move(client)), request_(std::move(request)) {}

std::optional<LogEntry> LogEntryReader::next() {
  while (position_ >= page_.size()) {
    if (done_) return std::nullopt;
    page_ = {};  // the spent page's storage goes before the next page is read
    LogEntriesPage page = client_.list_entries_page(request_);
    expect_new_page_token(tokens_, page.next_page_token, entries_list_call(request_));
    if (pages_fetched_ == 0) first_server_time_ = page.server_time_nanos;
    ++pages_fetched_;
    page_ = std::move(page.entries);
    position_ = 0;
    request_.page_token = std::move(page.next_page_token);
    done_ = request_.page_token.empty();
  }
  return std::move(page_[position_++]);
}

}  // namespace falcon::gcp
