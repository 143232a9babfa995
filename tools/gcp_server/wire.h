// Small encoding helpers for the wire formats the fake speaks (base64 is common/base64.h): JSON
// string escaping, proto3 timestamps, percent-encoding, and the CRC32C / MD5 digests that
// Cloud Storage reports.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace falcon::fake {

// Appends `s` as a JSON string literal (quotes included). Bytes >= 0x80 pass through, so valid
// UTF-8 stays valid UTF-8.
void append_json_string(std::string& out, std::string_view s);

// Nanoseconds since the epoch as proto3 JSON renders a Timestamp: UTC, `Z`, and 0, 3, 6 or 9
// fractional digits (`2024-05-01T00:00:00Z`, `...00.500Z`, `...00.000001Z`).
std::string format_proto_timestamp(std::int64_t nanos);

// %XX decoding; `plus_as_space` for query strings. Invalid escapes are kept verbatim.
std::string percent_decode(std::string_view s, bool plus_as_space = false);
// Encodes every byte except RFC 3986 unreserved characters.
std::string percent_encode(std::string_view s);

// CRC32C (Castagnoli), incremental: crc = crc32c_update(crc, data); start from 0.
std::uint32_t crc32c_update(std::uint32_t crc, std::string_view data);
// The base64 of the big-endian CRC32C, as GCS reports `crc32c`.
std::string crc32c_base64(std::uint32_t crc);

// Incremental MD5 (OpenSSL), for GCS `md5Hash`.
class Md5 {
 public:
  Md5();
  ~Md5();
  Md5(const Md5&) = delete;
  Md5& operator=(const Md5&) = delete;
  void update(std::string_view data);
  // The base64 of the 16-byte digest. The object can no longer be updated afterwards.
  std::string final_base64();

 private:
  void* ctx_;  // EVP_MD_CTX*
};

// Random bytes as lower-case hex (OpenSSL RAND_bytes).
std::string random_hex(std::size_t bytes);

}  // namespace falcon::fake
