#include "common/base64.h"

#include <algorithm>
#include <cstdint>

namespace falcon::tools {
namespace {

constexpr std::string_view kStandard =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr std::string_view kUrlSafe =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

std::string encode(std::string_view bytes, std::string_view alphabet, bool pad) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::size_t n = std::min<std::size_t>(3, bytes.size() - i);
    std::uint32_t group = 0;
    for (std::size_t k = 0; k < 3; ++k) {
      group <<= 8;
      if (k < n) group |= static_cast<std::uint8_t>(bytes[i + k]);
    }
    // n bytes carry n + 1 characters' worth of bits.
    for (std::size_t k = 0; k <= n; ++k) out += alphabet[(group >> (18 - 6 * k)) & 63];
    if (pad) out.append(3 - n, '=');
  }
  return out;
}

std::optional<std::string> decode(std::string_view text, std::string_view alphabet) {
  std::size_t padding = 0;
  while (padding < text.size() && text[text.size() - 1 - padding] == '=') ++padding;
  if (padding > 0 && (padding > 2 || text.size() % 4 != 0)) return std::nullopt;
  text.remove_suffix(padding);
  if (text.size() % 4 == 1) return std::nullopt;  // 6 bits cannot make a byte

  std::string out;
  out.reserve(text.size() / 4 * 3 + 2);
  std::uint32_t bits = 0;
  int count = 0;
  for (char c : text) {
    const std::size_t value = alphabet.find(c);
    if (value == std::string_view::npos) return std::nullopt;  // '=' inside the text too
    bits = (bits << 6) | static_cast<std::uint32_t>(value);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out += static_cast<char>((bits >> count) & 0xff);
    }
  }
  return out;
}

}  // namespace

std::string base64_encode(std::string_view bytes) { return encode(bytes, kStandard, true); }
std::string base64url_encode(std::string_view bytes) { return encode(bytes, kUrlSafe, false); }
std::optional<std::string> base64_decode(std::string_view text) { return decode(text, kStandard); }
std::optional<std::string> base64url_decode(std::string_view text) {
  return decode(text, kUrlSafe);
}

}  // namespace falcon::tools
