// HttpHeaders from falcon/http_client.h: an ordered list with case-insensitive lookup.
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

}  // namespace falcon
