// Reading and writing the model's optional and integer fields in JSON, for the model's own
// to_json/from_json and the client's value types (src/client): absent or null is nullopt, and
// an integer is read only from a JSON integer in its type's range (nlohmann's plain cast would
// turn 2.5 into 2 and make 5e21 undefined behaviour).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace falcon::json_fields {

using nlohmann::json;

template <typename T>
json optional_to_json(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

template <typename T>
constexpr bool kIsInteger = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// nlohmann converts any JSON number to an integer with a plain cast: 2.5 becomes 2 and 5e21
// is undefined behaviour. A model integer is read only from a JSON integer in its type's range.
template <typename T>
T integer_from_json(const json& j) {
  static_assert(kIsInteger<T>);
  using limits = std::numeric_limits<T>;
  if (j.is_number_unsigned()) {
    const auto u = j.get<std::uint64_t>();
    if (std::in_range<T>(u)) return static_cast<T>(u);
  } else if (j.is_number_integer()) {
    const auto s = j.get<std::int64_t>();
    if (std::in_range<T>(s)) return static_cast<T>(s);
  }
  throw json::type_error::create(302,
                                 "must be an integer in [" + std::to_string(limits::min()) + ", " +
                                     std::to_string(limits::max()) + "], not " + j.dump(),
                                 &j);
}

template <typename T>
struct is_integer_vector : std::false_type {};
template <typename E>
struct is_integer_vector<std::vector<E>> : std::bool_constant<kIsInteger<E>> {};

// get<T>() with the integer rule above, also for the elements of a vector of integers.
template <typename T>
T read(const json& j) {
  if constexpr (kIsInteger<T>) {
    return integer_from_json<T>(j);
  } else if constexpr (is_integer_vector<T>::value) {
    if (!j.is_array()) throw json::type_error::create(302, "must be an array of integers", &j);
    T out;
    out.reserve(j.size());
    for (const auto& e : j) out.push_back(integer_from_json<typename T::value_type>(e));
    return out;
  } else {
    return j.get<T>();
  }
}

// Reads an optional field: absent or null gives nullopt.
template <typename T>
std::optional<T> optional_from_json(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return read<T>(*it);
}

// Reads a field that may be absent (then `fallback`), but must have the right type if present.
template <typename T>
T value_or(const json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return read<T>(*it);
}

}  // namespace falcon::json_fields
