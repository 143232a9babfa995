// Cloud Storage JSON API over REST (reference gcp.md section 2): resumable uploads with bounded
// memory, simple media uploads, object metadata, download and list.
//
//   StorageClient storage({.endpoint = endpoints.storage, .http = http,
//                          .credentials = credentials, .clock = clock});
//   ResumableUploadWriter writer = storage.start_resumable_upload("bucket", "logs/rank-0.log",
//                                                                 "text/plain");
//   writer.write(line);                  // sends a chunk whenever a whole one is buffered
//   ObjectMetadata object = writer.finish();
//
// Memory is bounded by one chunk (StorageClientOptions::upload_chunk_bytes, or the chunk size
// given to start_resumable_upload), whatever the size of the object: bytes leave the buffer only
// once the server has committed them, so after a failed chunk the writer asks the session how much
// it has (`Content-Range: bytes */*`) and resends from there, even when that is less than what was
// sent.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "falcon/clock.h"
#include "falcon/http_client.h"
#include "gcp/credentials.h"
#include "gcp/retry.h"

namespace falcon::gcp {

// GCS wants every chunk but the last to be a multiple of this.
inline constexpr std::size_t kUploadQuantum = 256 * 1024;

struct ObjectMetadata {
  std::string bucket;
  std::string name;
  std::int64_t size = 0;   // sent as a JSON string, like every int64
  std::string generation;  // int64 as a string
  std::string content_type;
  std::string md5_hash;  // base64, as sent
  std::string crc32c;    // base64, as sent
  std::string time_created;
  std::string updated;
};

struct StorageClientOptions {
  std::string endpoint = "https://storage.googleapis.com";  // base URL, see resolve_endpoints
  std::shared_ptr<HttpClient> http;                         // required
  std::shared_ptr<Credentials> credentials;                 // null: no Authorization header
  std::shared_ptr<Clock> clock;                             // required
  RetryPolicy retry = RetryPolicy::for_storage();
  std::size_t upload_chunk_bytes = 8 << 20;  // a multiple of kUploadQuantum
  std::chrono::milliseconds request_timeout{120'000};
  std::uint64_t seed = 0;  // jitter; 0 picks a random seed
  // Told before every wait between attempts (RetryOptions::on_wait). Optional.
  std::function<void(const RetryWait&)> on_wait;
};

// One binding of a bucket's IAM policy.
struct IamBinding {
  std::string role;                  // "roles/storage.objectCreator"
  std::vector<std::string> members;  // "serviceAccount:x@y", "projectOwner:p", ...
};

// True when `role` lets its members create objects in a bucket (objectCreator, objectAdmin,
// objectUser, admin, legacyBucketWriter, legacyBucketOwner).
bool role_creates_objects(const std::string& role);

class ResumableUploadWriter;

// Thread-safe; cheap to copy. Every call blocks on the network and throws LogRetrievalError
// (HTTP status, google.rpc status name, the server's message, the call and object) once retries
// are exhausted or the failure is permanent. Object names are percent-encoded here; pass them
// raw.
class StorageClient {
 public:
  // Throws std::invalid_argument when http or clock is missing or upload_chunk_bytes is not a
  // positive multiple of kUploadQuantum.
  explicit StorageClient(StorageClientOptions options);

  // Starts a resumable upload session (POST .../o?uploadType=resumable&name=...). The writer
  // sends chunks of `chunk_bytes` (0: StorageClientOptions::upload_chunk_bytes), and so holds at
  // most that much. Throws std::invalid_argument when chunk_bytes is not a multiple of
  // kUploadQuantum.
  ResumableUploadWriter start_resumable_upload(
      const std::string& bucket, const std::string& object,
      const std::string& content_type = "application/octet-stream",
      std::size_t chunk_bytes = 0) const;

  // One-request upload of a small object (uploadType=media). Retried: a repeat overwrites the
  // object with the same bytes. With `if_generation_match` the write is conditional
  // (ifGenerationMatch; 0: the object must not exist): a precondition that fails is
  // LogRetrievalError with http_status 412 (also what a retry sees after a first attempt that
  // wrote it but lost the answer: read the object again to tell).
  ObjectMetadata upload_object(const std::string& bucket, const std::string& object,
                               std::string_view data,
                               const std::string& content_type = "application/octet-stream",
                               std::optional<std::int64_t> if_generation_match = {}) const;

  // The object's metadata. A missing object is LogRetrievalError with http_status 404.
  ObjectMetadata get_object_metadata(const std::string& bucket, const std::string& object) const;

  // Deletes the object (DELETE .../o/OBJECT, 204). False when there was none (404, which is also
  // what a retry sees after a first attempt that deleted it but lost the answer).
  bool delete_object(const std::string& bucket, const std::string& object) const;

  // The object's bytes (alt=media).
  std::string download_object(const std::string& bucket, const std::string& object) const;

  // The object's bytes handed to `sink` in pieces of at most `range_bytes`, one ranged GET each
  // (pinned to the first response's generation), so memory stays bounded. A server that ignores
  // Range sends the whole object in one piece.
  void download_object(const std::string& bucket, const std::string& object,
                       const std::function<void(std::string_view)>& sink,
                       std::size_t range_bytes = 8 << 20) const;

  // Every object whose name starts with `prefix`, following nextPageToken, in the server's order;
  // only the first `max_objects` when it is above 0 (asked for with maxResults).
  std::vector<ObjectMetadata> list_objects(const std::string& bucket,
                                           const std::string& prefix = "",
                                           std::size_t max_objects = 0) const;

  // The bucket's IAM policy bindings (GET .../b/BUCKET/iam; needs storage.buckets.getIamPolicy).
  std::vector<IamBinding> get_bucket_iam_bindings(const std::string& bucket) const;

  // The bucket's default KMS key (encryption.defaultKmsKeyName); empty when it has none. A
  // missing bucket is LogRetrievalError with http_status 404.
  std::string bucket_default_kms_key(const std::string& bucket) const;

 private:
  std::shared_ptr<const StorageClientOptions> options_;
};

// The client side of one resumable upload session. Movable, not copyable, not thread-safe.
// Dropping an unfinished writer leaves the session to expire on the server (about a week); call
// abort() to cancel it.
class ResumableUploadWriter {
 public:
  ResumableUploadWriter(std::shared_ptr<const StorageClientOptions> options, std::string bucket,
                        std::string object, std::string session_uri, std::size_t chunk_bytes);
  ResumableUploadWriter(ResumableUploadWriter&&) noexcept;
  ResumableUploadWriter& operator=(ResumableUploadWriter&&) noexcept;
  ~ResumableUploadWriter();

  // Appends `data`. Each time a whole chunk is buffered it is sent (blocking), and the buffer
  // keeps only what the server has not committed yet. Throws LogRetrievalError when a chunk cannot
  // be committed (retries exhausted, session gone: 404/410), std::logic_error after finish(),
  // abort() or a failure.
  void write(std::string_view data);

  // Sends what is left as the final chunk (`bytes a-b/N`, or `bytes */N` when nothing is left)
  // and returns the object. Throws as write().
  ObjectMetadata finish();

  // Cancels the session (DELETE; 499 is the success answer). No-op after finish() or abort().
  // Throws LogRetrievalError when the server refuses.
  void abort();

  std::int64_t bytes_written() const { return written_; }      // accepted by write()
  std::int64_t committed_bytes() const { return committed_; }  // persisted by the server
  // Bytes held in memory: written but not yet committed. Never more than one chunk.
  std::size_t buffered_bytes() const { return buffer_.size(); }
  std::size_t chunk_bytes() const { return chunk_bytes_; }
  const std::string& bucket() const { return bucket_; }
  const std::string& object() const { return object_; }

 private:
  enum class State { kOpen, kFinished, kAborted, kFailed };

  // Sends the buffer from committed_ until the server committed all of it but less than a chunk
  // (final: until the object exists), through run_with_retry. Returns the object metadata when
  // `final`. On a failure the writer is marked failed and its buffer released.
  ObjectMetadata flush(bool final);
  void check_open(const char* what) const;

  std::shared_ptr<const StorageClientOptions> options_;
  std::string bucket_;
  std::string object_;
  std::string session_uri_;
  std::size_t chunk_bytes_;
  std::string buffer_;  // bytes [committed_, written_)
  std::int64_t committed_ = 0;
  std::int64_t written_ = 0;
  State state_ = State::kOpen;
};

// `ObjectMetadata` from a JSON object resource; throws LogRetrievalError naming `call` when the
// body is not one.
ObjectMetadata parse_object_metadata(const std::string& body, const std::string& call);

}  // namespace falcon::gcp
