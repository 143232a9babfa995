// HttpHeaders from falcon/http_client.h: an ordered list with case-insensitive lookup; and
// is_transient_http_status, the one set of statuses worth a retry.
#include <algorithm>
#include <cctype>

#include "falcon/http_client.h"

namespace falcon {
namespace {

bool iequals(const std::string& a, const std::string& b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](unsigned char x, unsigned char y) {
           return std::tolower(x) == std::tolower(y);
         });
}

}  // namespace

void HttpHeaders::set(std::string name, std::string value) {
  std::erase_if(items, [&](const auto& item) { return iequals(item.first, name); });
  items.emplace_back(std::move(name), std::move(value));
}

void HttpHeaders::add(std::string name, std::string value) {
  items.emplace_back(std::move(name), std::move(value));
}

std::optional<std::string> HttpHeaders::get(const std::string& name) const {
  for (const auto& [key, value] : items) {
    if (iequals(key, name)) return value;
  }
  return std::nullopt;
}

bool is_transient_http_status(int status) {
  return status == 408 || status == 429 || status == 500 || status == 502 || status == 503 ||
         status == 504;
}

}  // namespace falcon
