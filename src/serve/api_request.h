// Reading a request of the API and writing its answer: bodies parsed with bounds, fields and
// parameters checked with errors that name them, the error shape of every answer.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "falcon/config.h"
#include "falcon/state_store.h"
#include "serve/http_message.h"

namespace falcon::serve {

// An error the API answers itself (bad request, auth, unknown id, a limit), with its status.
class HttpError : public std::runtime_error {
 public:
  HttpError(int status, std::string type, const std::string& message,
            nlohmann::json details = nlohmann::json::object())
      : std::runtime_error(message),
        status_(status),
        type_(std::move(type)),
        details_(std::move(details)) {}
  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const nlohmann::json& details() const { return details_; }
  Fields& headers() { return headers_; }
  const Fields& headers() const { return headers_; }

 private:
  int status_;
  std::string type_;
  nlohmann::json details_;
  Fields headers_;
};

HttpError bad_request(const std::string& message);

void send_json(Response& res, int status, const nlohmann::json& body);
// {"error": {"type", "message", ...details}}.
void send_error(Response& res, int status, const std::string& type, const std::string& message,
                const nlohmann::json& details = nlohmann::json::object());
// The error type answered for a refusal of `status` without a type of its own.
const char* error_type_for_status(int status);

// The body as a JSON object whose keys are all in `allowed`, parsed within the limits: nesting
// deeper than limits.max_json_depth or more than limits.max_json_values values is refused (400)
// while parsing, before a document is built from it.
nlohmann::json parse_body(const Request& req, const std::set<std::string>& allowed,
                          const ServeLimits& limits);

std::optional<std::string> string_field(const nlohmann::json& obj, const std::string& field,
                                        const std::string& where, bool required);
std::vector<std::string> string_list_field(const nlohmann::json& obj, const std::string& field,
                                           const std::string& where, bool required);

// Query parameters: one outside `allowed`, or one given twice, is refused (a typo is not
// silently ignored, and no parameter means two things).
void check_params(const Request& req, const std::set<std::string>& allowed);
std::optional<std::string> param(const Request& req, const std::string& name);
std::optional<std::int64_t> int_param(const Request& req, const std::string& name, std::int64_t min,
                                      std::int64_t max);
bool bool_param(const Request& req, const std::string& name);
// A time parameter: RFC 3339 or an age ("30m"), counted back from `now`.
StoreTime time_param(const std::string& name, const std::string& text, StoreTime now);
// A numeric id from the path; 404 naming `what` otherwise.
std::int64_t id_from_path(const std::string& text, const std::string& what);

}  // namespace falcon::serve
