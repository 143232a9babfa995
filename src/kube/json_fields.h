// Reading members of JSON a Kubernetes API server sent, which may have any shape: a member of
// the wrong type reads as absent instead of throwing the JSON library's type_error.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace falcon::kube {

// j[key] when `j` is an object that has it, else null.
inline const nlohmann::json& at_or_null(const nlohmann::json& j, const char* key) {
  static const nlohmann::json null_json;
  if (!j.is_object()) return null_json;
  const auto it = j.find(key);
  return it == j.end() ? null_json : *it;
}

// j[key] when it is a string, else "".
inline std::string string_at(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = at_or_null(j, key);
  return v.is_string() ? v.get<std::string>() : "";
}

// j[key] when it is an array, else an empty array.
inline const nlohmann::json& array_at(const nlohmann::json& j, const char* key) {
  static const nlohmann::json empty = nlohmann::json::array();
  const nlohmann::json& v = at_or_null(j, key);
  return v.is_array() ? v : empty;
}

}  // namespace falcon::kube
