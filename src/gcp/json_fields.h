// Reading members of JSON another party sent (Google APIs, a Kubernetes API server), which may
// have any shape: a member that is missing, null or of another type reads as absent, never as the
// JSON library's type_error (as `json::value()` throws for a member of another type).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace falcon::gcp {

// object[key] when `object` is an object that has it, else null.
inline const nlohmann::json& member_or_null(const nlohmann::json& object, const char* key) {
  static const nlohmann::json null_json;
  if (!object.is_object()) return null_json;
  const auto it = object.find(key);
  return it == object.end() ? null_json : *it;
}

// object[key] when it is a string, else "".
inline std::string string_field(const nlohmann::json& object, const char* key) {
  const nlohmann::json& v = member_or_null(object, key);
  return v.is_string() ? v.get<std::string>() : std::string();
}

// object[key] when it is an array, else an empty array.
inline const nlohmann::json& array_field(const nlohmann::json& object, const char* key) {
  static const nlohmann::json empty = nlohmann::json::array();
  const nlohmann::json& v = member_or_null(object, key);
  return v.is_array() ? v : empty;
}

// object[key] when it is a boolean, else false.
inline bool bool_field(const nlohmann::json& object, const char* key) {
  const nlohmann::json& v = member_or_null(object, key);
  return v.is_boolean() && v.get<bool>();
}

}  // namespace falcon::gcp
