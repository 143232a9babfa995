// An enum's names as one table of (value, name) pairs, read both ways:
//
//   constexpr std::array<std::pair<Color, const char*>, 2> kColors = {{
//       {Color::kRed, "red"}, {Color::kBlue, "blue"}}};
//   name_in(kColors, Color::kRed, "unknown");  // "red"
//   value_in(kColors, "blue");                 // Color::kBlue; nullopt for a name not listed
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>

namespace falcon {

template <typename E, std::size_t N>
constexpr const char* name_in(const std::array<std::pair<E, const char*>, N>& table, E value,
                              const char* otherwise) {
  for (const auto& [v, name] : table) {
    if (v == value) return name;
  }
  return otherwise;
}

template <typename E, std::size_t N>
constexpr std::optional<E> value_in(const std::array<std::pair<E, const char*>, N>& table,
                                    std::string_view name) {
  for (const auto& [v, n] : table) {
    if (name == n) return v;
  }
  return std::nullopt;
}

}  // namespace falcon
