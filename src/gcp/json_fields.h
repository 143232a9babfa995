// Reading members of JSON another party sent (Google APIs, a Kubernetes API server), which may
// have any shape: a member that is missing, null or of another type reads as absent, never as the
// JSON library's type_error (as `json::value()` throws for a member of another type).
#pragma once

#include <cstdint>
#include <limits>
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

// object[key] when it is a number whose whole part `Int` holds (a fraction is dropped), else
// `fallback`: never a conversion out of range (1e30 into an int is undefined behaviour).
template <typename Int>
Int integer_field(const nlohmann::json& object, const char* key, Int fallback) {
  static_assert(std::numeric_limits<Int>::is_signed, "signed integers only");
  using limits = std::numeric_limits<Int>;
  const nlohmann::json& v = member_or_null(object, key);
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    return u <= static_cast<std::uint64_t>(limits::max()) ? static_cast<Int>(u) : fallback;
  }
  if (v.is_number_integer()) {
    const auto i = v.get<std::int64_t>();
    return i >= limits::min() && i <= limits::max() ? static_cast<Int>(i) : fallback;
  }
  if (v.is_number_float()) {
    // -min is 2^(bits-1), exact as a double: the first value past max.
    const double d = v.get<double>();
    const double bound = -static_cast<double>(limits::min());
    return d > -bound - 1 && d < bound ? static_cast<Int>(d) : fallback;
  }
  return fallback;
}

}  // namespace falcon::gcp
