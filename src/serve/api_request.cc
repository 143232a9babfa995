#include "serve/api_request.h"

#include "falcon/values.h"

#include <fmt/format.h>

#include "falcon/log_retriever.h"
#include "util/time_format.h"

namespace falcon::serve {

using nlohmann::json;

HttpError bad_request(const std::string& message) { return {400, "UsageError", message}; }

void send_json(Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace) + "\n",
                  "application/json");
}

void send_error(Response& res, int status, const std::string& type, const std::string& message,
                const json& details) {
  json error = {{"type", type}, {"message", message}};
  for (const auto& [k, v] : details.items()) error[k] = v;
  send_json(res, status, {{"error", error}});
}

const char* error_type_for_status(int status) {
  switch (status) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "RouteNotFound";
    case 405:
      return "MethodNotAllowed";
    case 408:
      return "RequestTimeout";
    case 411:
      return "LengthRequired";
    case 413:
      return "PayloadTooLarge";
    case 414:
      return "TargetTooLong";
    case 415:
      return "UnsupportedMediaType";
    case 421:
      return "MisdirectedRequest";
    case 429:
      return "TooManyRequests";
    case 431:
      return "HeadersTooLarge";
    case 501:
      return "NotImplemented";
    case 503:
      return "Unavailable";
    case 505:
      return "HttpVersionNotSupported";
    default:
      return status >= 500 ? "InternalError" : "BadRequest";
  }
}

json parse_body(const Request& req, const std::set<std::string>& allowed,
                const ServeLimits& limits) {
  int values = 0;
  const json::parser_callback_t bounded = [&](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= limits.max_json_depth) {
      throw bad_request(
          fmt::format("the request body nests deeper than {} levels", limits.max_json_depth));
    }
    if (event == json::parse_event_t::value || event == json::parse_event_t::object_start ||
        event == json::parse_event_t::array_start) {
      if (++values > limits.max_json_values) {
        throw bad_request(
            fmt::format("the request body has more than {} values", limits.max_json_values));
      }
    }
    return true;
  };
  json body;
  try {
    body = json::parse(req.body, bounded);
  } catch (const json::parse_error& e) {
    throw bad_request(fmt::format("malformed JSON in the request body: {}", e.what()));
  }
  if (!body.is_object()) throw bad_request("the request body must be a JSON object");
  for (const auto& [key, value] : body.items()) {
    if (!allowed.contains(key)) {
      throw bad_request(fmt::format("unknown field {} in the request body (known: {})",
                                    quote_value(key, 64), fmt::join(allowed, ", ")));
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

std::vector<std::string> string_list_field(const json& obj, const std::string& field,
                                           const std::string& where, bool required) {
  const auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) {
    if (required) throw bad_request(fmt::format("{}{}: required", where, field));
    return {};
  }
  const auto wrong = [&] {
    return bad_request(fmt::format("{}{}: must be an array of strings", where, field));
  };
  if (!it->is_array()) throw wrong();
  std::vector<std::string> out;
  for (const auto& item : *it) {
    if (!item.is_string()) throw wrong();
    out.push_back(item.get<std::string>());
  }
  return out;
}

void check_params(const Request& req, const std::set<std::string>& allowed) {
  std::set<std::string_view> seen;
  for (const auto& [key, value] : req.query) {
    if (!allowed.contains(key)) {
      throw bad_request(allowed.empty()
                            ? fmt::format("unknown query parameter {} (this route takes none)",
                                          quote_value(key, 64))
                            : fmt::format("unknown query parameter {} (known: {})",
                                          quote_value(key, 64), fmt::join(allowed, ", ")));
    }
    if (!seen.insert(key).second) {
      throw bad_request(fmt::format("query parameter {} given twice", key));
    }
  }
}

std::optional<std::string> param(const Request& req, const std::string& name) {
  return req.query_value(name);
}

std::optional<std::int64_t> int_param(const Request& req, const std::string& name, std::int64_t min,
                                      std::int64_t max) {
  const auto text = param(req, name);
  if (!text) return std::nullopt;
  std::int64_t value = 0;
  const bool digits = !text->empty() && text->size() <= 18 &&
                      text->find_first_not_of("0123456789") == std::string::npos;
  if (digits) value = std::stoll(*text);
  if (!digits || value < min || value > max) {
    throw bad_request(fmt::format("query parameter {}: must be an integer {}..{}, got {}", name,
                                  min, max, quote_value(*text, 40)));
  }
  return value;
}

bool bool_param(const Request& req, const std::string& name) {
  const auto text = param(req, name);
  if (!text) return false;
  if (*text == "true" || *text == "1" || text->empty()) return true;
  if (*text == "false" || *text == "0") return false;
  throw bad_request(fmt::format("query parameter {}: must be true or false, got {}", name,
                                quote_value(*text, 40)));
}

StoreTime time_param(const std::string& name, const std::string& text, StoreTime now) {
  // The rule of every --since (falcon/values.h), answered as this API's other bad parameters.
  std::string resolved;
  try {
    resolved = check_since("query parameter " + name, text, now);
  } catch (const InvalidValueError& e) {
    throw bad_request(e.what());
  }
  return *parse_rfc3339(resolved);  // check_since returns a time parse_rfc3339 reads
}

std::int64_t id_from_path(const std::string& text, const std::string& what) {
  if (text.empty() || text.size() > 18 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    throw HttpError(404, "NotFound", fmt::format("no {} {}", what, quote_value(text, 40)));
  }
  return std::stoll(text);
}

}  // namespace falcon::serve
