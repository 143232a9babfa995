#include "gcp/api_error.h"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "falcon/errors.h"
#include "gcp/json_fields.h"
#include "util/page_tokens.h"

namespace falcon::gcp {
namespace {

constexpr std::size_t kMaxMessageBytes = 512;

std::string excerpt(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  std::string out(text.substr(0, kMaxMessageBytes));
  for (char& c : out) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  if (text.size() > kMaxMessageBytes) out += "...";
  return out;
}

void read_details(const nlohmann::json& details, ApiError& out) {
  if (!details.is_array()) return;
  for (const auto& detail : details) {
    if (!detail.is_object()) continue;
    const std::string type = string_field(detail, "@type");
    if (type.ends_with("google.rpc.RetryInfo")) {
      if (const auto it = detail.find("retryDelay"); it != detail.end()) {
        out.retry_delay = parse_duration(it->is_string() ? it->get<std::string>() : it->dump());
      }
    } else if (type.ends_with("google.rpc.ErrorInfo") && out.reason.empty()) {
      out.reason = string_field(detail, "reason");
    }
  }
}

}  // namespace

std::string status_name_for_http(int http_status) {
  switch (http_status) {
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
    case 410:
      return "NOT_FOUND";
    case 412:
      return "FAILED_PRECONDITION";
    case 416:
      return "OUT_OF_RANGE";
    case 429:
      return "RESOURCE_EXHAUSTED";
    case 499:
      return "CANCELLED";
    case 500:
      return "INTERNAL";
    case 501:
      return "UNIMPLEMENTED";
    case 502:
      return "UNAVAILABLE";
    case 503:
      return "UNAVAILABLE";
    case 504:
      return "DEADLINE_EXCEEDED";
    default:
      return "";
  }
}

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
  if (text.starts_with('{')) {  // {"seconds": 30, "nanos": 0}, or with "30" as a string
    const auto json = nlohmann::json::parse(text, nullptr, false);
    if (!json.is_object()) return std::nullopt;
    auto number = [&](const char* key) -> double {
      const auto it = json.find(key);
      if (it == json.end()) return 0;
      if (it->is_number()) return it->get<double>();
      if (it->is_string()) return std::strtod(it->get<std::string>().c_str(), nullptr);
      return 0;
    };
    const double ms = number("seconds") * 1000.0 + number("nanos") / 1e6;
    if (!(ms >= 0)) return std::nullopt;
    return std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(ms)));
  }
  if (text.size() < 2 || text.back() != 's') return std::nullopt;
  const std::string number(text.substr(0, text.size() - 1));
  char* end = nullptr;
  const double seconds = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !(seconds >= 0) || seconds > 1e9) {
    return std::nullopt;
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(seconds * 1000.0)));
}

ApiError parse_api_error(int http_status, std::string_view body) {
  ApiError out;
  out.http_status = http_status;
  const auto json = nlohmann::json::parse(body, nullptr, false);
  if (json.is_object()) {
    const auto error = json.find("error");
    if (error != json.end() && error->is_object()) {
      out.status = string_field(*error, "status");
      out.message = string_field(*error, "message");
      read_details(error->value("details", nlohmann::json()), out);
      const auto errors = error->find("errors");
      if (errors != error->end() && errors->is_array() && !errors->empty() &&
          (*errors)[0].is_object()) {
        if (out.reason.empty()) out.reason = string_field((*errors)[0], "reason");
        if (out.message.empty()) out.message = string_field((*errors)[0], "message");
      }
    } else if (error != json.end() && error->is_string()) {  // OAuth 2.0 (RFC 6749 5.2)
      out.reason = error->get<std::string>();
      out.message = string_field(json, "error_description");
      if (out.message.empty()) out.message = out.reason;
    }
  }
  if (out.message.empty() && !json.is_object()) out.message = excerpt(body);
  out.message = excerpt(out.message);
  if (out.status.empty()) out.status = status_name_for_http(http_status);
  return out;
}

std::string describe_api_error(const std::string& call, const ApiError& error) {
  std::string text = fmt::format("{} failed: HTTP {}", call, error.http_status);
  if (!error.status.empty()) text += " " + error.status;
  if (!error.reason.empty() && error.reason != error.message) text += " (" + error.reason + ")";
  if (!error.message.empty()) text += ": " + error.message;
  return text;
}

void throw_api_error(const std::string& call, const HttpResponse& response) {
  const ApiError error = parse_api_error(response.status, response.body);
  throw LogRetrievalError(describe_api_error(call, error), error.http_status, error.status);
}

void expect_new_page_token(PageTokens& tokens, const std::string& next, const std::string& call) {
  if (!tokens.fresh(next)) {
    throw LogRetrievalError(fmt::format(
        "{} does not advance: page {} gave a nextPageToken it gave before", call, tokens.pages()));
  }
}

}  // namespace falcon::gcp
