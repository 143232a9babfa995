#include "state/explanation_codec.h"

#include <zlib.h>

#include <array>
#include <cstdint>
#include <stdexcept>

#include <fmt/format.h>

namespace falcon::state {
namespace {

constexpr std::string_view kTag = "z1:";
constexpr std::size_t kMaxUnpacked = std::size_t{256} << 20;
constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const std::uint32_t v =
        (std::uint8_t(in[i]) << 16) | (std::uint8_t(in[i + 1]) << 8) | std::uint8_t(in[i + 2]);
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (const std::size_t rest = in.size() - i; rest > 0) {
    std::uint32_t v = std::uint8_t(in[i]) << 16;
    if (rest == 2) v |= std::uint8_t(in[i + 1]) << 8;
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string unbase64(std::string_view in) {
  static const std::array<std::int8_t, 256> value = [] {
    std::array<std::int8_t, 256> t{};
    t.fill(-1);
    for (int i = 0; i < 64; ++i) t[static_cast<unsigned char>(kAlphabet[i])] = std::int8_t(i);
    return t;
  }();
  if (in.size() % 4 != 0) throw std::runtime_error("its base64 is not a whole number of quads");
  std::string out;
  out.reserve(in.size() / 4 * 3);
  for (std::size_t i = 0; i < in.size(); i += 4) {
    const bool last = i + 4 == in.size();
    const int pad = last ? (in[i + 3] == '=') + (in[i + 2] == '=') : 0;
    std::uint32_t v = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      const char c = in[i + k];
      const int d = (c == '=' && k >= 4 - static_cast<std::size_t>(pad))
                        ? 0
                        : value[static_cast<unsigned char>(c)];
      if (d < 0) {
        throw std::runtime_error(fmt::format("its base64 has '{}' at {}", c, kTag.size() + i + k));
      }
      v = (v << 6) | static_cast<std::uint32_t>(d);
    }
    out += static_cast<char>(v >> 16);
    if (pad < 2) out += static_cast<char>((v >> 8) & 0xff);
    if (pad < 1) out += static_cast<char>(v & 0xff);
  }
  return out;
}

}  // namespace

std::string pack_explanation(std::string_view json) {
  z_stream z{};
  // Raw deflate, fastest level: ~30x on an explanation, in about a millisecond for 150 KB.
  if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("pack_explanation: deflateInit2 failed");
  }
  std::string deflated(deflateBound(&z, static_cast<uLong>(json.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(json.data()));
  z.avail_in = static_cast<uInt>(json.size());
  z.next_out = reinterpret_cast<Bytef*>(deflated.data());
  z.avail_out = static_cast<uInt>(deflated.size());
  const int rc = deflate(&z, Z_FINISH);
  deflated.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("pack_explanation: deflate did not finish");
  return std::string(kTag) + base64(deflated);
}

std::string unpack_explanation(std::string_view stored) {
  if (!stored.starts_with(kTag)) return std::string(stored);
  std::string deflated;
  try {
    deflated = unbase64(stored.substr(kTag.size()));
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(fmt::format("a packed explanation does not read back: {}", e.what()));
  }
  z_stream z{};
  if (inflateInit2(&z, -15) != Z_OK) throw std::runtime_error("unpack_explanation: inflateInit2");
  z.next_in = reinterpret_cast<Bytef*>(deflated.data());
  z.avail_in = static_cast<uInt>(deflated.size());
  std::string out;
  std::array<char, 64 * 1024> chunk;
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    z.next_out = reinterpret_cast<Bytef*>(chunk.data());
    z.avail_out = static_cast<uInt>(chunk.size());
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&z);
      throw std::runtime_error(
          fmt::format("a packed explanation does not inflate ({})", z.msg ? z.msg : "no detail"));
    }
    out.append(chunk.data(), chunk.size() - z.avail_out);
    if (out.size() > kMaxUnpacked) {
      inflateEnd(&z);
      throw std::runtime_error("a packed explanation inflates past 256 MiB");
    }
    if (rc == Z_OK && z.avail_in == 0 && z.avail_out != 0) {
      inflateEnd(&z);
      throw std::runtime_error("a packed explanation is cut short");
    }
  }
  inflateEnd(&z);
  return out;
}

}  // namespace falcon::state
