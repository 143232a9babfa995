// The buckets, objects and resumable upload sessions behind the fake Cloud Storage JSON API.
//
// Contract (the choices of this fake, following reference/gcp.md §2):
//   - Buckets are created explicitly (POST /storage/v1/b) or automatically by the first upload
//     into them. Reading or listing a bucket that was never created is 404.
//   - Resumable uploads persist only whole 256 KiB quanta of a non-final chunk: a chunk whose
//     length is not a multiple of 256 KiB (or that is cut short) commits the largest multiple
//     and the 308 reports that smaller Range. Bytes resent at offsets already persisted are
//     ignored. A chunk that starts beyond the persisted size is rejected with 400.
//   - `bytes */*` only reports status; `bytes */N` finalizes only when N equals the persisted
//     size. A 308 carries `Range: bytes=0-<last>` only when something is persisted.
//   - A finalized session answers every later PUT with the object again; a cancelled (DELETE)
//     session is gone (404).
//   - `ifGenerationMatch` is honoured on simple and resumable uploads (0: must not exist).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gcp_server/wire.h"

namespace falcon::fake {

inline constexpr std::int64_t kUploadQuantum = 256 * 1024;

struct StoredObject {
  std::string bucket;
  std::string name;
  std::int64_t generation = 0;
  std::int64_t metageneration = 1;
  std::string content_type;
  nlohmann::json metadata;  // custom metadata (object), or null
  std::shared_ptr<const std::string> data;
  std::string md5_base64;
  std::string crc32c_base64;
  std::int64_t created_ns = 0;

  // The object resource as the JSON API returns it (int64 fields as strings). `base_url` is
  // used for selfLink and mediaLink.
  nlohmann::json to_json(const std::string& base_url) const;
};

// `Content-Range: bytes a-b/t`, `bytes a-b/*`, `bytes */t`, `bytes */*`.
struct ContentRange {
  std::optional<std::int64_t> first;  // absent for `*/...`
  std::optional<std::int64_t> last;
  std::optional<std::int64_t> total;  // absent for `/*`
};
// nullopt when the header is malformed.
std::optional<ContentRange> parse_content_range(std::string_view header);

// What a chunk PUT (or status query) leads to.
struct UploadState {
  bool done = false;           // finalized: `object` holds the result (200)
  std::int64_t persisted = 0;  // bytes committed so far (308 Range is 0..persisted-1)
  std::shared_ptr<const StoredObject> object;
};

class ObjectStore {
 public:
  ObjectStore() = default;

  // Loads and then appends to `dir`/objects.jsonl, keeping object bytes in `dir`/blobs/.
  void attach_dir(const std::filesystem::path& dir);
  void clear();

  // Buckets. create_bucket throws ApiError 409 when it exists, 400 for an invalid name.
  nlohmann::json create_bucket(const std::string& name, const std::string& project,
                               std::int64_t now_ns);
  nlohmann::json get_bucket(const std::string& name) const;  // 404 when absent
  std::vector<nlohmann::json> list_buckets() const;

  // The bucket's IAM policy (GET /storage/v1/b/B/iam): `bindings` of role and members, as set
  // by set_iam_policy; a new bucket has the project's legacy bindings only. 404 when absent.
  nlohmann::json get_iam_policy(const std::string& bucket) const;
  // Replaces the bindings (PUT /storage/v1/b/B/iam); 400 when `policy` has no `bindings` list,
  // 412 when its etag is given and stale. Returns the stored policy.
  nlohmann::json set_iam_policy(const std::string& bucket, const nlohmann::json& policy);
  // True when `member` ("serviceAccount:x@y") holds a role that may create objects in `bucket`
  // (objectCreator, objectAdmin, admin, legacyBucketWriter, legacyBucketOwner).
  bool can_create_objects(const std::string& bucket, const std::string& member) const;

  // One-shot upload (uploadType=media or multipart). Throws ApiError 412 on a failed
  // ifGenerationMatch.
  std::shared_ptr<const StoredObject> insert(const std::string& bucket, const std::string& name,
                                             std::string data, std::string content_type,
                                             nlohmann::json metadata,
                                             std::optional<std::int64_t> if_generation_match,
                                             std::int64_t now_ns);

  // Starts a resumable session and returns its upload id.
  std::string start_upload(const std::string& bucket, const std::string& name,
                           std::string content_type, nlohmann::json metadata,
                           std::optional<std::int64_t> if_generation_match, std::int64_t now_ns);

  class ChunkWriter;
  // Opens a chunk PUT on session `upload_id` with the given range (already validated against
  // Content-Length by the caller). Throws ApiError 404 for an unknown session, 400 for a gap.
  // The writer holds the session's lock until destroyed.
  std::unique_ptr<ChunkWriter> open_chunk(const std::string& upload_id, const ContentRange& range,
                                          std::int64_t now_ns);
  // DELETE on the session; false when it does not exist.
  bool cancel_upload(const std::string& upload_id);

  std::shared_ptr<const StoredObject> get(const std::string& bucket,
                                          const std::string& name) const;  // 404
  void remove(const std::string& bucket, const std::string& name);         // 404

  struct ListResult {
    std::vector<std::shared_ptr<const StoredObject>> items;
    std::vector<std::string> prefixes;
    std::string next_page_token;
  };
  ListResult list(const std::string& bucket, const std::string& prefix,
                  const std::string& delimiter, const std::string& start_offset,
                  const std::string& end_offset, std::size_t max_results,
                  const std::string& page_token) const;

  std::size_t object_count() const;

 private:
  struct Session;
  struct Bucket {
    std::string name;
    std::string project;
    std::int64_t created_ns = 0;
    std::map<std::string, std::shared_ptr<const StoredObject>> objects;
    nlohmann::json bindings = nlohmann::json::array();  // IAM policy bindings
    std::int64_t policy_version = 1;                    // the etag: bumped by each set
  };

  Bucket& bucket_for_write(const std::string& name, std::int64_t now_ns);  // auto-creates
  std::shared_ptr<const StoredObject> commit(std::shared_ptr<StoredObject> object,
                                             std::optional<std::int64_t> if_generation_match);
  void persist_put(const StoredObject& object);
  std::int64_t next_generation(std::int64_t now_ns);

  mutable std::mutex mutex_;  // guards buckets_, sessions_, last_generation_ and the files
  std::map<std::string, Bucket> buckets_;
  std::map<std::string, std::shared_ptr<Session>> sessions_;
  std::int64_t last_generation_ = 0;
  std::filesystem::path dir_;
  std::unique_ptr<std::ofstream> journal_;

  friend class ChunkWriter;
};

// Receives the body of one chunk PUT. Call append() with the body bytes in order, then
// finish() (the whole body arrived) or interrupted() (the connection broke or was cut).
class ObjectStore::ChunkWriter {
 public:
  ~ChunkWriter();
  ChunkWriter(const ChunkWriter&) = delete;
  ChunkWriter& operator=(const ChunkWriter&) = delete;

  // True when the session was already finalized: the body is to be ignored and state()
  // answered.
  bool already_done() const;
  void append(const char* data, std::size_t size);
  // The chunk is complete: commits it (whole quanta, or everything when it is the final chunk)
  // and finalizes when the range says this was the last byte. Throws ApiError 400 when the
  // final size disagrees with what was received, 412 on a failed precondition.
  UploadState finish();
  // The body stopped early: commits the whole quanta of what arrived.
  UploadState interrupted();
  UploadState state() const;

 private:
  friend class ObjectStore;
  ChunkWriter(ObjectStore& store, std::shared_ptr<Session> session, ContentRange range,
              std::int64_t now_ns);
  void commit_to(std::int64_t size);
  UploadState finalize();

  ObjectStore& store_;
  std::shared_ptr<Session> session_;
  std::unique_lock<std::mutex> lock_;
  ContentRange range_;
  std::int64_t now_ns_;
  std::int64_t offset_ = 0;  // absolute offset of the next body byte
};

}  // namespace falcon::fake
