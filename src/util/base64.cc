#include "util/base64.h"

#include <openssl/evp.h>

#include <algorithm>

namespace falcon {

std::string base64_encode(std::string_view bytes, Base64 alphabet) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');  // EVP_EncodeBlock adds a NUL
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  if (alphabet == Base64::kUrl) {
    while (!out.empty() && out.back() == '=') out.pop_back();
    std::replace(out.begin(), out.end(), '+', '-');
    std::replace(out.begin(), out.end(), '/', '_');
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text, Base64 alphabet,
                                         bool skip_whitespace) {
  // The standard alphabet, padded to whole quads, for EVP_DecodeBlock, which itself would
  // accept (and skip) surrounding whitespace and take '=' as data: both are checked here.
  std::string quads;
  quads.reserve(text.size() + 3);
  std::size_t padding = 0;
  for (const char c : text) {
    if (skip_whitespace && (c == '\n' || c == '\r' || c == ' ' || c == '\t')) continue;
    if (c == '=') {
      ++padding;
      quads.push_back(c);
      continue;
    }
    if (padding > 0) return std::nullopt;  // data after padding
    const bool common = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (common) {
      quads.push_back(c);
    } else if (alphabet == Base64::kStandard && (c == '+' || c == '/')) {
      quads.push_back(c);
    } else if (alphabet == Base64::kUrl && (c == '-' || c == '_')) {
      quads.push_back(c == '-' ? '+' : '/');
    } else {
      return std::nullopt;
    }
  }
  if (padding > 2) return std::nullopt;
  const std::size_t data = quads.size() - padding;
  if (data % 4 == 1) return std::nullopt;  // a dangling sextet
  if (padding > 0 && quads.size() % 4 != 0) return std::nullopt;
  const std::size_t pads = padding > 0 ? padding : (4 - data % 4) % 4;
  if (padding == 0) quads.append(pads, '=');
  if (quads.empty()) return std::string();
  std::string out(quads.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(quads.data()),
                                static_cast<int>(quads.size()));
  if (n < 0) return std::nullopt;
  // EVP_DecodeBlock decodes the padding as zero bytes: one less per '='.
  out.resize(static_cast<std::size_t>(n) - pads);
  return out;
}

}  // namespace falcon
