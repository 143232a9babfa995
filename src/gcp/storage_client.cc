#include "gcp/storage_client.h"

#include <charconv>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "falcon/errors.h"
#include "gcp/api_error.h"
#include "gcp/json_fields.h"
#include "gcp/url.h"
#include "util/page_tokens.h"

namespace falcon::gcp {
namespace {

using nlohmann::json;

std::optional<std::int64_t> to_int64(std::string_view text) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

ObjectMetadata metadata_from_json(const json& item) {
  ObjectMetadata out;
  out.bucket = string_field(item, "bucket");
  out.name = string_field(item, "name");
  out.size = -1;
  if (const auto it = item.find("size"); it != item.end()) {
    if (it->is_string()) out.size = to_int64(it->get<std::string>()).value_or(-1);
    if (it->is_number_integer()) out.size = it->get<std::int64_t>();
  }
  if (const auto it = item.find("generation"); it != item.end()) {
    out.generation = it->is_string() ? it->get<std::string>() : it->dump();
  }
  out.content_type = string_field(item, "contentType");
  out.md5_hash = string_field(item, "md5Hash");
  out.crc32c = string_field(item, "crc32c");
  out.time_created = string_field(item, "timeCreated");
  out.updated = string_field(item, "updated");
  return out;
}

// `Range: bytes=0-N` from a 308: the committed size N+1. nullopt when absent or malformed.
std::optional<std::int64_t> committed_from_range(const HttpResponse& response) {
  const auto header = response.headers.get("Range");
  if (!header) return std::nullopt;
  std::string_view value = *header;
  if (value.starts_with("bytes=")) value.remove_prefix(6);
  const auto dash = value.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  const auto first = to_int64(value.substr(0, dash));
  const auto last = to_int64(value.substr(dash + 1));
  if (!first || !last || *first != 0 || *last < 0) return std::nullopt;
  return *last + 1;
}

// `Content-Range: bytes a-b/total` (total may be `*`) of a ranged download.
struct ContentRange {
  std::int64_t first = 0;
  std::int64_t last = 0;
  std::optional<std::int64_t> total;
};

std::optional<ContentRange> parse_content_range(std::string_view value) {
  if (!value.starts_with("bytes ")) return std::nullopt;
  value.remove_prefix(6);
  const auto dash = value.find('-');
  const auto slash = value.find('/');
  if (dash == std::string_view::npos || slash == std::string_view::npos || slash < dash) {
    return std::nullopt;
  }
  const auto first = to_int64(value.substr(0, dash));
  const auto last = to_int64(value.substr(dash + 1, slash - dash - 1));
  if (!first || !last) return std::nullopt;
  ContentRange out{*first, *last, std::nullopt};
  if (value.substr(slash + 1) != "*") {
    out.total = to_int64(value.substr(slash + 1));
    if (!out.total) return std::nullopt;
  }
  return out;
}

std::string object_path(const std::string& endpoint, const std::string& bucket,
                        const std::string& object) {
  return fmt::format("{}/storage/v1/b/{}/o/{}", endpoint, percent_encode(bucket),
                     percent_encode(object));
}

}  // namespace

ObjectMetadata parse_object_metadata(const std::string& body, const std::string& call) {
  const json item = json::parse(body, nullptr, false);
  if (!item.is_object()) {
    throw LogRetrievalError(fmt::format("{} returned a body that is not a JSON object", call));
  }
  return metadata_from_json(item);
}

// ---------------------------------------------------------------------------------------------
// StorageClient

StorageClient::StorageClient(StorageClientOptions options) {
  if (!options.http) throw std::invalid_argument("StorageClient needs an HttpClient");
  if (!options.clock) throw std::invalid_argument("StorageClient needs a Clock");
  if (options.upload_chunk_bytes == 0 || options.upload_chunk_bytes % kUploadQuantum != 0) {
    throw std::invalid_argument(fmt::format(
        "upload chunk size {} is not a positive multiple of 256 KiB", options.upload_chunk_bytes));
  }
  options.endpoint = trim_trailing_slashes(options.endpoint);
  options_ = std::make_shared<const StorageClientOptions>(std::move(options));
}

namespace {

RetryOptions retry_options(const StorageClientOptions& options, std::string call) {
  RetryOptions retry;
  retry.policy = options.retry;
  retry.idempotency = Idempotency::kIdempotent;
  retry.call = std::move(call);
  retry.clock = options.clock.get();
  retry.seed = options.seed;
  retry.credentials = options.credentials.get();
  retry.on_wait = options.on_wait;
  return retry;
}

HttpRequest make_request(const StorageClientOptions& options, std::string method, std::string url) {
  HttpRequest request;
  request.method = std::move(method);
  request.url = std::move(url);
  request.timeout = options.request_timeout;
  return request;
}

}  // namespace

ResumableUploadWriter StorageClient::start_resumable_upload(const std::string& bucket,
                                                            const std::string& object,
                                                            const std::string& content_type,
                                                            std::size_t chunk_bytes) const {
  const StorageClientOptions& options = *options_;
  if (chunk_bytes == 0) chunk_bytes = options.upload_chunk_bytes;
  if (chunk_bytes % kUploadQuantum != 0) {
    throw std::invalid_argument(
        fmt::format("upload chunk size {} is not a multiple of 256 KiB", chunk_bytes));
  }
  HttpRequest request =
      make_request(options, "POST",
                   fmt::format("{}/upload/storage/v1/b/{}/o?uploadType=resumable&name={}",
                               options.endpoint, percent_encode(bucket), percent_encode(object)));
  request.headers.set("Content-Type", "application/json; charset=UTF-8");
  request.headers.set("X-Upload-Content-Type", content_type);
  request.body = json{{"contentType", content_type}}.dump();
  const std::string call =
      fmt::format("resumable upload start for {}", format_gcs_uri(bucket, object));
  // The body of the answer is ignored: GCS sends none, some emulators send an object.
  const HttpResponse response =
      send_with_retry(*options.http, std::move(request), retry_options(options, call));
  std::string location = response.headers.get("Location").value_or("");
  if (location.empty()) {
    throw LogRetrievalError(
        fmt::format("{} failed: HTTP {} without a Location header", call, response.status),
        response.status);
  }
  if (location.starts_with('/')) location = options.endpoint + location;
  return ResumableUploadWriter(options_, bucket, object, std::move(location), chunk_bytes);
}

ObjectMetadata StorageClient::upload_object(const std::string& bucket, const std::string& object,
                                            std::string_view data, const std::string& content_type,
                                            std::optional<std::int64_t> if_generation_match) const {
  const StorageClientOptions& options = *options_;
  std::string url = fmt::format("{}/upload/storage/v1/b/{}/o?uploadType=media&name={}",
                                options.endpoint, percent_encode(bucket), percent_encode(object));
  if (if_generation_match) url += fmt::format("&ifGenerationMatch={}", *if_generation_match);
  HttpRequest request = make_request(options, "POST", url);
  request.headers.set("Content-Type", content_type);
  request.body = std::string(data);
  const std::string call = fmt::format("upload of {}", format_gcs_uri(bucket, object));
  const HttpResponse response =
      send_with_retry(*options.http, std::move(request), retry_options(options, call));
  return parse_object_metadata(response.body, call);
}

ObjectMetadata StorageClient::get_object_metadata(const std::string& bucket,
                                                  const std::string& object) const {
  const StorageClientOptions& options = *options_;
  HttpRequest request = make_request(options, "GET", object_path(options.endpoint, bucket, object));
  const std::string call = fmt::format("metadata get of {}", format_gcs_uri(bucket, object));
  const HttpResponse response =
      send_with_retry(*options.http, std::move(request), retry_options(options, call));
  return parse_object_metadata(response.body, call);
}

bool StorageClient::delete_object(const std::string& bucket, const std::string& object) const {
  const StorageClientOptions& options = *options_;
  HttpRequest request =
      make_request(options, "DELETE", object_path(options.endpoint, bucket, object));
  const std::string call = fmt::format("delete of {}", format_gcs_uri(bucket, object));
  try {
    send_with_retry(*options.http, std::move(request), retry_options(options, call));
  } catch (const LogRetrievalError& e) {
    if (e.http_status() == 404) return false;
    throw;
  }
  return true;
}

std::string StorageClient::download_object(const std::string& bucket,
                                           const std::string& object) const {
  const StorageClientOptions& options = *options_;
  HttpRequest request =
      make_request(options, "GET", object_path(options.endpoint, bucket, object) + "?alt=media");
  const std::string call = fmt::format("download of {}", format_gcs_uri(bucket, object));
  return send_with_retry(*options.http, std::move(request), retry_options(options, call)).body;
}

void StorageClient::download_object(const std::string& bucket, const std::string& object,
                                    const std::function<void(std::string_view)>& sink,
                                    std::size_t range_bytes) const {
  const StorageClientOptions& options = *options_;
  const std::string base = object_path(options.endpoint, bucket, object) + "?alt=media";
  const std::string call = fmt::format("download of {}", format_gcs_uri(bucket, object));
  range_bytes = std::max<std::size_t>(range_bytes, 1);
  std::string generation;
  std::int64_t offset = 0;
  std::optional<std::int64_t> size;  // learned from the first Content-Range
  for (;;) {
    HttpRequest request = make_request(
        options, "GET", generation.empty() ? base : base + "&generation=" + generation);
    std::int64_t last = offset + static_cast<std::int64_t>(range_bytes) - 1;
    if (size) last = std::min(last, *size - 1);  // never ask past the end
    request.headers.set("Range", fmt::format("bytes={}-{}", offset, last));
    RetryOptions retry = retry_options(options, call);
    retry.throw_on_error = false;
    const HttpResponse response = send_with_retry(*options.http, std::move(request), retry);
    if (response.status == 416) return;  // empty object, or nothing past `offset`
    if (!is_success(response.status)) throw_api_error(call, response);
    if (generation.empty()) generation = response.headers.get("x-goog-generation").value_or("");
    // Content-Range: bytes a-b/total. Its presence marks a partial answer, whatever the status
    // (GCS says 206; some servers keep 200).
    const std::optional<ContentRange> range =
        parse_content_range(response.headers.get("Content-Range").value_or(""));
    if (response.status != 206 && !range) {  // the server ignored Range: the whole object
      if (offset == 0) sink(response.body);
      return;
    }
    if (range && range->first != offset) {
      throw LogRetrievalError(fmt::format("{} failed: asked for bytes from {}, got bytes {}-{}",
                                          call, offset, range->first, range->last));
    }
    if (range && range->total) size = range->total;
    if (!response.body.empty()) sink(response.body);
    offset += static_cast<std::int64_t>(response.body.size());
    if (response.body.empty() || (size && offset >= *size) ||
        (!range && response.body.size() < range_bytes)) {
      return;
    }
  }
}

std::vector<ObjectMetadata> StorageClient::list_objects(const std::string& bucket,
                                                        const std::string& prefix,
                                                        std::size_t max_objects) const {
  const StorageClientOptions& options = *options_;
  const std::string call = fmt::format("list of {}", format_gcs_uri(bucket, prefix));
  std::vector<ObjectMetadata> out;
  std::string page_token;
  PageTokens tokens;
  do {
    std::string url = fmt::format("{}/storage/v1/b/{}/o?prefix={}", options.endpoint,
                                  percent_encode(bucket), percent_encode(prefix));
    if (!page_token.empty()) url += "&pageToken=" + percent_encode(page_token);
    if (max_objects > 0) url += fmt::format("&maxResults={}", max_objects - out.size());
    HttpRequest request = make_request(options, "GET", std::move(url));
    const HttpResponse response =
        send_with_retry(*options.http, std::move(request), retry_options(options, call));
    const json page = json::parse(response.body, nullptr, false);
    if (!page.is_object()) {
      throw LogRetrievalError(fmt::format("{} returned a body that is not a JSON object", call));
    }
    if (const auto items = page.find("items"); items != page.end() && items->is_array()) {
      for (const auto& item : *items) {
        if (max_objects > 0 && out.size() == max_objects) break;
        out.push_back(metadata_from_json(item));
      }
    }
    page_token = string_field(page, "nextPageToken");
    expect_new_page_token(tokens, page_token, call);
  } while (!page_token.empty() && (max_objects == 0 || out.size() < max_objects));
  return out;
}

bool role_creates_objects(const std::string& role) {
  return role == "roles/storage.objectCreator" || role == "roles/storage.objectAdmin" ||
         role == "roles/storage.objectUser" || role == "roles/storage.admin" ||
         role == "roles/storage.legacyBucketWriter" || role == "roles/storage.legacyBucketOwner";
}

std::vector<IamBinding> StorageClient::get_bucket_iam_bindings(const std::string& bucket) const {
  const StorageClientOptions& options = *options_;
  const std::string call = fmt::format("IAM policy get of gs://{}", bucket);
  HttpRequest request =
      make_request(options, "GET",
                   fmt::format("{}/storage/v1/b/{}/iam", options.endpoint, percent_encode(bucket)));
  const HttpResponse response =
      send_with_retry(*options.http, std::move(request), retry_options(options, call));
  const json policy = json::parse(response.body, nullptr, false);
  if (!policy.is_object()) {
    throw LogRetrievalError(fmt::format("{} returned a body that is not a JSON object", call));
  }
  std::vector<IamBinding> out;
  if (const auto b = policy.find("bindings"); b != policy.end() && b->is_array()) {
    for (const auto& item : *b) {
      if (!item.is_object()) continue;
      IamBinding binding{string_field(item, "role"), {}};
      if (const auto m = item.find("members"); m != item.end() && m->is_array()) {
        for (const auto& member : *m) {
          if (member.is_string()) binding.members.push_back(member.get<std::string>());
        }
      }
      out.push_back(std::move(binding));
    }
  }
  return out;
}

std::string StorageClient::bucket_default_kms_key(const std::string& bucket) const {
  const StorageClientOptions& options = *options_;
  const std::string call = fmt::format("get of bucket gs://{}", bucket);
  HttpRequest request = make_request(
      options, "GET", fmt::format("{}/storage/v1/b/{}", options.endpoint, percent_encode(bucket)));
  const HttpResponse response =
      send_with_retry(*options.http, std::move(request), retry_options(options, call));
  const json item = json::parse(response.body, nullptr, false);
  if (!item.is_object()) {
    throw LogRetrievalError(fmt::format("{} returned a body that is not a JSON object", call));
  }
  if (const auto e = item.find("encryption"); e != item.end() && e->is_object()) {
    return string_field(*e, "defaultKmsKeyName");
  }
  return "";
}

// ---------------------------------------------------------------------------------------------
// ResumableUploadWriter

ResumableUploadWriter::ResumableUploadWriter(std::shared_ptr<const StorageClientOptions> options,
                                             std::string bucket, std::string object,
                                             std::string session_uri, std::size_t chunk_bytes)
    : options_(std::move(options)),
      bucket_(std::move(bucket)),
      object_(std::move(object)),
      session_uri_(std::move(session_uri)),
      chunk_bytes_(chunk_bytes) {
  buffer_.reserve(chunk_bytes_);
}

ResumableUploadWriter::ResumableUploadWriter(ResumableUploadWriter&&) noexcept = default;
ResumableUploadWriter& ResumableUploadWriter::operator=(ResumableUploadWriter&&) noexcept = default;
ResumableUploadWriter::~ResumableUploadWriter() = default;

void ResumableUploadWriter::check_open(const char* what) const {
  if (state_ == State::kOpen) return;
  static constexpr const char* kStates[] = {"open", "finished", "aborted", "failed"};
  throw std::logic_error(fmt::format("{} on an upload of {} that is {}", what,
                                     format_gcs_uri(bucket_, object_),
                                     kStates[static_cast<int>(state_)]));
}

void ResumableUploadWriter::write(std::string_view data) {
  check_open("write()");
  const std::size_t chunk = chunk_bytes_;
  while (!data.empty()) {
    const std::size_t n = std::min(chunk - buffer_.size(), data.size());
    buffer_.append(data.substr(0, n));
    written_ += static_cast<std::int64_t>(n);
    data.remove_prefix(n);
    if (buffer_.size() == chunk) flush(/*final=*/false);
  }
}

ObjectMetadata ResumableUploadWriter::finish() {
  check_open("finish()");
  return flush(/*final=*/true);
}

void ResumableUploadWriter::abort() {
  if (state_ == State::kFinished || state_ == State::kAborted) return;
  const StorageClientOptions& options = *options_;
  HttpRequest request = make_request(options, "DELETE", session_uri_);
  RetryOptions retry = retry_options(
      options, fmt::format("cancel of the upload of {}", format_gcs_uri(bucket_, object_)));
  retry.throw_on_error = false;
  const HttpResponse response = send_with_retry(*options.http, std::move(request), retry);
  // 499 is GCS's "cancelled"; a session that is already gone is as good.
  if (response.status != 499 && !is_success(response.status) && response.status != 404 &&
      response.status != 410) {
    throw_api_error(retry.call, response);
  }
  state_ = State::kAborted;
  buffer_.clear();
  buffer_.shrink_to_fit();
}

ObjectMetadata ResumableUploadWriter::flush(bool final) {
  const StorageClientOptions& options = *options_;
  const std::string uri = format_gcs_uri(bucket_, object_);
  bool query = false;  // the next request asks the session how much it has
  std::optional<ObjectMetadata> object;

  // Each request: the bytes from committed_ (the buffer itself, moved into the body and back:
  // one chunk of memory, not two), or a status query.
  RetryHooks hooks;
  hooks.next_request = [&](bool after_failure) {
    if (after_failure) query = true;  // something may have been committed: ask, don't resend
    const std::int64_t end = committed_ + static_cast<std::int64_t>(buffer_.size());
    HttpRequest request = make_request(options, "PUT", session_uri_);
    if (query) {
      request.headers.set("Content-Range", "bytes */*");
      return request;
    }
    request.headers.set("Content-Type", "application/octet-stream");
    if (buffer_.empty()) {
      request.headers.set("Content-Range", fmt::format("bytes */{}", end));
    } else {
      request.headers.set("Content-Range",
                          fmt::format("bytes {}-{}/{}", committed_, end - 1,
                                      final ? std::to_string(end) : std::string("*")));
    }
    request.body = std::move(buffer_);
    return request;
  };
  hooks.after_send = [&](HttpRequest& sent) {
    if (!query) buffer_ = std::move(sent.body);
  };
  hooks.call = [&] {
    if (query) return fmt::format("status query of the upload of {}", uri);
    return fmt::format("upload of {} (bytes {}-{})", uri, committed_,
                       committed_ + static_cast<std::int64_t>(buffer_.size()));
  };
  // Only the resumable protocol is decided here: what the server committed, and what to send
  // next. Budget, backoff, deadline, 401 and messages are the retry loop's.
  hooks.classify = [&](const HttpResponse& response) -> Verdict {
    const int status = response.status;
    const std::int64_t end = committed_ + static_cast<std::int64_t>(buffer_.size());
    if (status == 200 || status == 201) {
      const std::string call = hooks.call();
      if (!final) {
        throw LogRetrievalError(
            fmt::format("{}: the server finalized the object before the last chunk", call), status);
      }
      ObjectMetadata stored = parse_object_metadata(response.body, call);
      if (stored.size >= 0 && stored.size != end) {
        throw LogRetrievalError(
            fmt::format("{}: the server stored {} bytes, {} were written", call, stored.size, end),
            status);
      }
      committed_ = end;
      buffer_.clear();
      object = std::move(stored);
      return {Outcome::kDone, {}};
    }
    if (status == 308) {
      const std::optional<std::int64_t> committed = committed_from_range(response);
      if (!committed && !query) {
        // No Range after a chunk: ask, rather than assume nothing or everything was kept.
        query = true;
        return {Outcome::kContinue, {}};
      }
      const std::int64_t now_committed = committed.value_or(0);
      if (now_committed < committed_ || now_committed > end) {
        throw LogRetrievalError(fmt::format(
            "{}: the server reports {} bytes committed, but the writer holds bytes {}-{} only",
            hooks.call(), now_committed, committed_, end));
      }
      const bool progressed = now_committed > committed_;
      buffer_.erase(0, static_cast<std::size_t>(now_committed - committed_));
      committed_ = now_committed;
      const bool answered_query = query;
      query = false;
      if (!final && buffer_.size() < chunk_bytes_) return {Outcome::kDone, {}};
      // Send what is left now; only a chunk that moved nothing counts as a failure.
      if (answered_query || progressed) return {Outcome::kContinue, {}};
      return {Outcome::kRetry, "the server keeps committing nothing"};
    }
    if (status == 404 || status == 410) {
      return {Outcome::kFail,
              parse_api_error(status, response.body).message +
                  " (the session is gone; the object must be uploaded again from the start)"};
    }
    return {is_transient_http_status(status) ? Outcome::kRetry : Outcome::kFail, {}};
  };

  try {
    run_with_retry(*options.http, retry_options(options, fmt::format("upload of {}", uri)), hooks);
  } catch (...) {
    // The writer is unusable now; its buffer goes.
    state_ = State::kFailed;
    buffer_.clear();
    buffer_.shrink_to_fit();
    throw;
  }
  if (!object) return {};
  buffer_.shrink_to_fit();
  state_ = State::kFinished;
  return std::move(*object);
}

}  // namespace falcon::gcp
