#include "gcp/epoch_fence.h"

#include <charconv>
#include <string_view>

#include <fmt/format.h>

#include "falcon/errors.h"
#include "falcon/gcs_uri.h"

namespace falcon::gcp {
namespace {

// Each lost race means another writer's epoch landed, so a writer loses many times in a row only
// while others keep winning: with the two writers a hand-over can have, 100 losses in a row
// (each about an even chance) do not happen; a bound still ends a pathological case.
constexpr int kAttempts = 100;

struct Stored {
  std::int64_t epoch = 0;
  std::int64_t generation = 0;  // 0: no object
};

std::int64_t parse_number(std::string_view text, const std::string& what) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < 0) {
    throw LogRetrievalError(fmt::format("{} does not hold an epoch (a decimal number >= 0)", what));
  }
  return v;
}

Stored read_stored(const StorageClient& storage, const GcsUri& at, const std::string& uri) {
  ObjectMetadata meta;
  try {
    meta = storage.get_object_metadata(at.bucket, at.object);
  } catch (const LogRetrievalError& e) {
    if (e.http_status() == 404) return {};
    throw;
  }
  // The bytes of exactly that generation: a newer write between the two calls is a lost race,
  // which the conditional write below notices.
  const std::string text = storage.download_object(at.bucket, at.object);
  return {parse_number(text, "the fence object " + uri),
          parse_number(meta.generation, "the generation of " + uri)};
}

GcsUri object_of(const std::string& uri) {
  GcsUri at = parse_gcs_uri(uri);
  if (at.object.empty() || at.object.back() == '/') {
    throw std::invalid_argument(fmt::format("fence object {}: names no object", uri));
  }
  return at;
}

}  // namespace

std::int64_t read_epoch(const StorageClient& storage, const std::string& uri) {
  // The bytes alone (one request per check): the generation matters only to a writer.
  const GcsUri at = object_of(uri);
  try {
    return parse_number(storage.download_object(at.bucket, at.object), "the fence object " + uri);
  } catch (const LogRetrievalError& e) {
    if (e.http_status() == 404) return 0;
    throw;
  }
}

std::int64_t advance_epoch(const StorageClient& storage, const std::string& uri) {
  const GcsUri at = object_of(uri);
  for (int attempt = 1;; ++attempt) {
    const Stored now = read_stored(storage, at, uri);
    const std::int64_t next = now.epoch + 1;
    try {
      storage.upload_object(at.bucket, at.object, fmt::format("{}\n", next), "text/plain",
                            now.generation);
      return next;
    } catch (const LogRetrievalError& e) {
      if (e.http_status() != 412 || attempt == kAttempts) throw;
      // Written meanwhile (by another supervisor, or by this write whose answer was lost):
      // read again and write the one after.
    }
  }
}

}  // namespace falcon::gcp
