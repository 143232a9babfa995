// Reading fields of Google API JSON responses, where a missing or mistyped field reads as empty.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace falcon::gcp {

// object[key] when it is a string, else "" (missing, null or another type).
inline std::string string_field(const nlohmann::json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace falcon::gcp
