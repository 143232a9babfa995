#include "gcp_server/object_store.h"

#include <algorithm>
#include <charconv>
#include <regex>

#include <fmt/format.h>

#include "common/base64.h"
#include "common/rfc3339.h"
#include "gcp_server/api_error.h"

namespace falcon::fake {

using nlohmann::json;

struct ObjectStore::Session {
  std::mutex mutex;
  std::string id;
  std::string bucket;
  std::string name;
  std::string content_type;
  json metadata;
  std::optional<std::int64_t> if_generation_match;
  std::string data;            // committed bytes, then (during a PUT) the tentative tail
  std::int64_t committed = 0;  // bytes persisted
  Md5 md5;                     // over the committed bytes
  std::uint32_t crc32c = 0;
  std::shared_ptr<const StoredObject> result;  // set once finalized
  bool cancelled = false;
};

namespace {

// `2026-04-13T08:00:00.123Z`: Cloud Storage's times have milliseconds.
std::string gcs_time(std::int64_t ns) { return tools::format_rfc3339(ns, 3); }

bool valid_bucket_name(const std::string& name) {
  static const std::regex kName(R"(^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$)");
  return std::regex_match(name, kName);
}

json bucket_json(const std::string& name, const std::string& project, std::int64_t created_ns) {
  return json{{"kind", "storage#bucket"},
              {"id", name},
              {"name", name},
              {"projectNumber", "000000000000"},
              {"metageneration", "1"},
              {"location", "US"},
              {"locationType", "multi-region"},
              {"storageClass", "STANDARD"},
              {"etag", "CAE="},
              {"timeCreated", gcs_time(created_ns)},
              {"updated", gcs_time(created_ns)},
              {"labels", json{{"falcon-fake-project", project.empty() ? "none" : project}}}};
}

std::optional<std::int64_t> parse_int(std::string_view s) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

}  // namespace

json StoredObject::to_json(const std::string& base_url) const {
  const std::string enc = percent_encode(name);
  json j{{"kind", "storage#object"},
         {"id", fmt::format("{}/{}/{}", bucket, name, generation)},
         {"selfLink", fmt::format("{}/storage/v1/b/{}/o/{}", base_url, bucket, enc)},
         {"mediaLink", fmt::format("{}/download/storage/v1/b/{}/o/{}?generation={}&alt=media",
                                   base_url, bucket, enc, generation)},
         {"name", name},
         {"bucket", bucket},
         {"generation", std::to_string(generation)},
         {"metageneration", std::to_string(metageneration)},
         {"contentType", content_type},
         {"storageClass", "STANDARD"},
         {"size", std::to_string(data ? data->size() : 0)},
         {"md5Hash", md5_base64},
         {"crc32c", crc32c_base64},
         {"etag", tools::base64_encode(std::to_string(generation))},
         {"timeCreated", gcs_time(created_ns)},
         {"updated", gcs_time(created_ns)},
         {"timeStorageClassUpdated", gcs_time(created_ns)}};
  if (metadata.is_object() && !metadata.empty()) j["metadata"] = metadata;
  return j;
}

std::optional<ContentRange> parse_content_range(std::string_view h) {
  while (!h.empty() && h.front() == ' ') h.remove_prefix(1);
  while (!h.empty() && h.back() == ' ') h.remove_suffix(1);
  if (h.substr(0, 6) != "bytes ") return std::nullopt;
  h.remove_prefix(6);
  const auto slash = h.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  const std::string_view range = h.substr(0, slash);
  const std::string_view total = h.substr(slash + 1);
  ContentRange r;
  if (total != "*") {
    r.total = parse_int(total);
    if (!r.total) return std::nullopt;
  }
  if (range != "*") {
    const auto dash = range.find('-');
    if (dash == std::string_view::npos) return std::nullopt;
    r.first = parse_int(range.substr(0, dash));
    r.last = parse_int(range.substr(dash + 1));
    if (!r.first || !r.last || *r.last < *r.first) return std::nullopt;
    if (r.total && *r.last >= *r.total) return std::nullopt;
  }
  return r;
}

// ---------------------------------------------------------------------------------------------

std::int64_t ObjectStore::next_generation(std::int64_t now_ns) {
  last_generation_ = std::max(last_generation_ + 1, now_ns / 1000);
  return last_generation_;
}

ObjectStore::Bucket& ObjectStore::bucket_for_write(const std::string& name, std::int64_t now_ns) {
  auto it = buckets_.find(name);
  if (it != buckets_.end()) return it->second;
  if (!valid_bucket_name(name)) {
    throw ApiError::invalid_argument(fmt::format("Invalid bucket name: '{}'", name));
  }
  Bucket& b = buckets_[name];
  b.name = name;
  b.created_ns = now_ns;
  if (journal_) {
    *journal_ << json{{"op", "bucket"}, {"name", name}, {"created_ns", now_ns}}.dump() << '\n';
    journal_->flush();
  }
  return b;
}

json ObjectStore::create_bucket(const std::string& name, const std::string& project,
                                std::int64_t now_ns) {
  std::lock_guard lock(mutex_);
  if (buckets_.count(name)) {
    throw ApiError(409, "ALREADY_EXISTS", "conflict",
                   "Your previous request to create the named bucket succeeded and you already "
                   "own it.");
  }
  Bucket& b = bucket_for_write(name, now_ns);
  b.project = project;
  return bucket_json(b.name, b.project, b.created_ns);
}

json ObjectStore::get_bucket(const std::string& name) const {
  std::lock_guard lock(mutex_);
  auto it = buckets_.find(name);
  if (it == buckets_.end()) throw ApiError::not_found("The specified bucket does not exist.");
  return bucket_json(it->second.name, it->second.project, it->second.created_ns);
}

namespace {

json default_bindings(const std::string& project) {
  const std::string p = project.empty() ? "falcon-local" : project;
  return json::array({json{{"role", "roles/storage.legacyBucketOwner"},
                           {"members", json::array({"projectEditor:" + p, "projectOwner:" + p})}},
                      json{{"role", "roles/storage.legacyBucketReader"},
                           {"members", json::array({"projectViewer:" + p})}}});
}

json policy_json(const std::string& bucket, const json& bindings, std::int64_t version) {
  return json{{"kind", "storage#policy"},
              {"resourceId", "projects/_/buckets/" + bucket},
              {"version", 1},
              {"etag", tools::base64_encode(fmt::format("CA{}", version))},
              {"bindings", bindings}};
}

}  // namespace

json ObjectStore::get_iam_policy(const std::string& bucket) const {
  std::lock_guard lock(mutex_);
  auto it = buckets_.find(bucket);
  if (it == buckets_.end()) throw ApiError::not_found("The specified bucket does not exist.");
  const Bucket& b = it->second;
  return policy_json(b.name, b.bindings.empty() ? default_bindings(b.project) : b.bindings,
                     b.policy_version);
}

json ObjectStore::set_iam_policy(const std::string& bucket, const json& policy) {
  std::lock_guard lock(mutex_);
  auto it = buckets_.find(bucket);
  if (it == buckets_.end()) throw ApiError::not_found("The specified bucket does not exist.");
  Bucket& b = it->second;
  if (!policy.is_object() || !policy.contains("bindings") || !policy["bindings"].is_array()) {
    throw ApiError::invalid_argument("bindings: a list of {role, members} is required");
  }
  for (const auto& binding : policy["bindings"]) {
    if (!binding.is_object() || !binding.value("role", json()).is_string() ||
        !binding.value("members", json()).is_array()) {
      throw ApiError::invalid_argument("bindings: each needs a role and a list of members");
    }
  }
  if (const auto etag = policy.find("etag");
      etag != policy.end() && etag->is_string() && !etag->get<std::string>().empty() &&
      etag->get<std::string>() != tools::base64_encode(fmt::format("CA{}", b.policy_version))) {
    throw ApiError(412, "FAILED_PRECONDITION", "conditionNotMet",
                   "The policy's etag does not match: it was changed since it was read.");
  }
  b.bindings = policy["bindings"];
  if (b.bindings.empty()) b.bindings = default_bindings(b.project);
  ++b.policy_version;
  return policy_json(b.name, b.bindings, b.policy_version);
}

bool ObjectStore::can_create_objects(const std::string& bucket, const std::string& member) const {
  static const std::vector<std::string> kWriters = {
      "roles/storage.objectCreator", "roles/storage.objectAdmin", "roles/storage.admin",
      "roles/storage.legacyBucketWriter", "roles/storage.legacyBucketOwner"};
  std::lock_guard lock(mutex_);
  auto it = buckets_.find(bucket);
  if (it == buckets_.end()) return false;
  for (const auto& binding : it->second.bindings) {
    const std::string role = binding.value("role", "");
    if (std::find(kWriters.begin(), kWriters.end(), role) == kWriters.end()) continue;
    for (const auto& m : binding.value("members", json::array())) {
      if (m.is_string() && m.get<std::string>() == member) return true;
    }
  }
  return false;
}

std::vector<json> ObjectStore::list_buckets() const {
  std::lock_guard lock(mutex_);
  std::vector<json> out;
  for (const auto& [name, b] : buckets_) {
    out.push_back(bucket_json(b.name, b.project, b.created_ns));
  }
  return out;
}

std::shared_ptr<const StoredObject> ObjectStore::commit(
    std::shared_ptr<StoredObject> object, std::optional<std::int64_t> if_generation_match) {
  // mutex_ held by the caller.
  Bucket& b = bucket_for_write(object->bucket, object->created_ns);
  auto it = b.objects.find(object->name);
  if (if_generation_match) {
    const std::int64_t current = it == b.objects.end() ? 0 : it->second->generation;
    if (current != *if_generation_match) {
      throw ApiError(412, "FAILED_PRECONDITION", "conditionNotMet",
                     "At least one of the pre-conditions you specified did not hold.");
    }
  }
  object->generation = next_generation(object->created_ns);
  std::shared_ptr<const StoredObject> stored = std::move(object);
  b.objects[stored->name] = stored;
  persist_put(*stored);
  return stored;
}

std::shared_ptr<const StoredObject> ObjectStore::insert(
    const std::string& bucket, const std::string& name, std::string data, std::string content_type,
    json metadata, std::optional<std::int64_t> if_generation_match, std::int64_t now_ns) {
  if (name.empty()) throw ApiError(400, "INVALID_ARGUMENT", "required", "Required");
  auto object = std::make_shared<StoredObject>();
  object->bucket = bucket;
  object->name = name;
  object->content_type = content_type.empty() ? "application/octet-stream" : content_type;
  object->metadata = std::move(metadata);
  object->created_ns = now_ns;
  Md5 md5;
  md5.update(data);
  object->md5_base64 = md5.final_base64();
  object->crc32c_base64 = crc32c_base64(crc32c_update(0, data));
  object->data = std::make_shared<const std::string>(std::move(data));
  std::lock_guard lock(mutex_);
  return commit(std::move(object), if_generation_match);
}

std::string ObjectStore::start_upload(const std::string& bucket, const std::string& name,
                                      std::string content_type, json metadata,
                                      std::optional<std::int64_t> if_generation_match,
                                      std::int64_t now_ns) {
  if (name.empty()) throw ApiError(400, "INVALID_ARGUMENT", "required", "Required");
  std::lock_guard lock(mutex_);
  bucket_for_write(bucket, now_ns);
  if (if_generation_match) {
    // Fail early like GCS does when the precondition already cannot hold.
    const auto& objects = buckets_[bucket].objects;
    auto it = objects.find(name);
    const std::int64_t current = it == objects.end() ? 0 : it->second->generation;
    if (current != *if_generation_match) {
      throw ApiError(412, "FAILED_PRECONDITION", "conditionNotMet",
                     "At least one of the pre-conditions you specified did not hold.");
    }
  }
  auto s = std::make_shared<Session>();
  s->id = random_hex(16);
  s->bucket = bucket;
  s->name = name;
  s->content_type = content_type.empty() ? "application/octet-stream" : std::move(content_type);
  s->metadata = std::move(metadata);
  s->if_generation_match = if_generation_match;
  sessions_[s->id] = s;
  return s->id;
}

std::unique_ptr<ObjectStore::ChunkWriter> ObjectStore::open_chunk(const std::string& upload_id,
                                                                  const ContentRange& range,
                                                                  std::int64_t now_ns) {
  std::shared_ptr<Session> s;
  {
    std::lock_guard lock(mutex_);
    auto it = sessions_.find(upload_id);
    if (it == sessions_.end()) throw ApiError::not_found("No such upload session");
    s = it->second;
  }
  std::unique_ptr<ChunkWriter> w(new ChunkWriter(*this, s, range, now_ns));
  if (s->cancelled) throw ApiError::not_found("No such upload session");
  if (!s->result && range.first && *range.first > s->committed) {
    throw ApiError::invalid_argument(fmt::format(
        "Invalid request. According to the Content-Range header, the upload offset is {} "
        "byte(s), which exceeds already uploaded size of {} byte(s).",
        *range.first, s->committed));
  }
  return w;
}

bool ObjectStore::cancel_upload(const std::string& upload_id) {
  std::shared_ptr<Session> s;
  {
    std::lock_guard lock(mutex_);
    auto it = sessions_.find(upload_id);
    if (it == sessions_.end()) return false;
    s = it->second;
    sessions_.erase(it);
  }
  std::lock_guard lock(s->mutex);
  s->cancelled = true;
  s->data.clear();
  s->data.shrink_to_fit();
  return true;
}

std::shared_ptr<const StoredObject> ObjectStore::get(const std::string& bucket,
                                                     const std::string& name) const {
  std::lock_guard lock(mutex_);
  auto b = buckets_.find(bucket);
  if (b != buckets_.end()) {
    auto it = b->second.objects.find(name);
    if (it != b->second.objects.end()) return it->second;
  }
  throw ApiError::not_found(fmt::format("No such object: {}/{}", bucket, name));
}

void ObjectStore::remove(const std::string& bucket, const std::string& name) {
  std::lock_guard lock(mutex_);
  auto b = buckets_.find(bucket);
  if (b == buckets_.end() || !b->second.objects.erase(name)) {
    throw ApiError::not_found(fmt::format("No such object: {}/{}", bucket, name));
  }
  if (journal_) {
    *journal_ << json{{"op", "delete"}, {"bucket", bucket}, {"name", name}}.dump() << '\n';
    journal_->flush();
  }
}

ObjectStore::ListResult ObjectStore::list(const std::string& bucket, const std::string& prefix,
                                          const std::string& delimiter,
                                          const std::string& start_offset,
                                          const std::string& end_offset, std::size_t max_results,
                                          const std::string& page_token) const {
  std::lock_guard lock(mutex_);
  auto b = buckets_.find(bucket);
  if (b == buckets_.end()) throw ApiError::not_found("The specified bucket does not exist.");
  std::string after;  // resume strictly after this name (or past this prefix)
  if (!page_token.empty()) {
    auto decoded = tools::base64url_decode(page_token);
    if (!decoded) throw ApiError::invalid_argument("Invalid page token");
    after = *decoded;
  }
  ListResult out;
  const auto& objects = b->second.objects;
  auto it = objects.lower_bound(std::max(prefix, start_offset));
  std::size_t emitted = 0;
  for (; it != objects.end(); ++it) {
    const std::string& name = it->first;
    if (name.compare(0, prefix.size(), prefix) != 0) break;
    if (!end_offset.empty() && name >= end_offset) break;
    if (!after.empty() && name.compare(0, after.size(), after) == 0 &&
        (name.size() == after.size() ||
         (!delimiter.empty() && after.size() >= delimiter.size() &&
          after.compare(after.size() - delimiter.size(), delimiter.size(), delimiter) == 0))) {
      continue;  // the last item returned, or inside the last prefix returned
    }
    if (!after.empty() && name < after) continue;
    std::string entry = name;
    bool is_prefix = false;
    if (!delimiter.empty()) {
      const auto pos = name.find(delimiter, prefix.size());
      if (pos != std::string::npos) {
        entry = name.substr(0, pos + delimiter.size());
        is_prefix = true;
      }
    }
    if (is_prefix && !out.prefixes.empty() && out.prefixes.back() == entry) continue;
    if (emitted == max_results) {
      out.next_page_token = tools::base64url_encode(after);
      break;
    }
    if (is_prefix) {
      out.prefixes.push_back(entry);
    } else {
      out.items.push_back(it->second);
    }
    after = entry;
    ++emitted;
  }
  return out;
}

std::size_t ObjectStore::object_count() const {
  std::lock_guard lock(mutex_);
  std::size_t n = 0;
  for (const auto& [name, b] : buckets_) n += b.objects.size();
  return n;
}

void ObjectStore::clear() {
  std::lock_guard lock(mutex_);
  buckets_.clear();
  sessions_.clear();
  if (journal_) {
    journal_ = std::make_unique<std::ofstream>(dir_ / "objects.jsonl", std::ios::trunc);
  }
}

void ObjectStore::persist_put(const StoredObject& o) {
  if (!journal_) return;
  const std::string blob = fmt::format("{}-{}.bin", o.generation, percent_encode(o.bucket));
  {
    std::ofstream out(dir_ / "blobs" / blob, std::ios::binary | std::ios::trunc);
    out.write(o.data->data(), static_cast<std::streamsize>(o.data->size()));
  }
  json line{{"op", "put"},
            {"bucket", o.bucket},
            {"name", o.name},
            {"generation", o.generation},
            {"contentType", o.content_type},
            {"metadata", o.metadata},
            {"md5Hash", o.md5_base64},
            {"crc32c", o.crc32c_base64},
            {"created_ns", o.created_ns},
            {"blob", blob}};
  *journal_ << line.dump() << '\n';
  journal_->flush();
}

void ObjectStore::attach_dir(const std::filesystem::path& dir) {
  std::lock_guard lock(mutex_);
  dir_ = dir;
  std::filesystem::create_directories(dir / "blobs");
  const auto journal = dir / "objects.jsonl";
  if (std::filesystem::exists(journal)) {
    std::ifstream in(journal);
    std::string line;
    while (std::getline(in, line)) {
      const json j = json::parse(line, nullptr, false);
      if (!j.is_object()) continue;  // a torn last line
      const std::string op = j.value("op", "");
      if (op == "bucket") {
        Bucket& b = buckets_[j.value("name", "")];
        b.name = j.value("name", "");
        b.created_ns = j.value("created_ns", std::int64_t{0});
      } else if (op == "put") {
        auto o = std::make_shared<StoredObject>();
        o->bucket = j.value("bucket", "");
        o->name = j.value("name", "");
        o->generation = j.value("generation", std::int64_t{0});
        o->content_type = j.value("contentType", "application/octet-stream");
        o->metadata = j.value("metadata", json());
        o->md5_base64 = j.value("md5Hash", "");
        o->crc32c_base64 = j.value("crc32c", "");
        o->created_ns = j.value("created_ns", std::int64_t{0});
        std::ifstream blob(dir / "blobs" / j.value("blob", ""), std::ios::binary);
        o->data = std::make_shared<const std::string>(std::istreambuf_iterator<char>(blob),
                                                      std::istreambuf_iterator<char>());
        last_generation_ = std::max(last_generation_, o->generation);
        Bucket& b = buckets_[o->bucket];
        b.name = o->bucket;
        b.objects[o->name] = std::move(o);
      } else if (op == "delete") {
        auto b = buckets_.find(j.value("bucket", ""));
        if (b != buckets_.end()) b->second.objects.erase(j.value("name", ""));
      }
    }
  }
  journal_ = std::make_unique<std::ofstream>(journal, std::ios::app);
  if (!*journal_) throw std::runtime_error("cannot open " + journal.string());
}

// ---------------------------------------------------------------------------------------------
// ChunkWriter

ObjectStore::ChunkWriter::ChunkWriter(ObjectStore& store, std::shared_ptr<Session> session,
                                      ContentRange range, std::int64_t now_ns)
    : store_(store),
      session_(std::move(session)),
      lock_(session_->mutex),
      range_(range),
      now_ns_(now_ns),
      offset_(range.first.value_or(0)) {}

ObjectStore::ChunkWriter::~ChunkWriter() {
  // Drop any tentative bytes that were never committed.
  if (!session_->result && !session_->cancelled) {
    session_->data.resize(static_cast<std::size_t>(session_->committed));
  }
}

bool ObjectStore::ChunkWriter::already_done() const { return session_->result != nullptr; }

void ObjectStore::ChunkWriter::append(const char* data, std::size_t size) {
  if (session_->result || size == 0) return;
  std::int64_t pos = offset_;
  offset_ += static_cast<std::int64_t>(size);
  const std::int64_t have = static_cast<std::int64_t>(session_->data.size());
  if (offset_ <= have) return;  // entirely bytes we already hold: ignored
  const std::int64_t skip = std::max<std::int64_t>(0, have - pos);
  session_->data.append(data + skip, size - static_cast<std::size_t>(skip));
}

void ObjectStore::ChunkWriter::commit_to(std::int64_t size) {
  Session& s = *session_;
  if (size > s.committed) {
    const std::string_view fresh(s.data.data() + s.committed,
                                 static_cast<std::size_t>(size - s.committed));
    s.md5.update(fresh);
    s.crc32c = crc32c_update(s.crc32c, fresh);
    s.committed = size;
  }
  s.data.resize(static_cast<std::size_t>(s.committed));
}

UploadState ObjectStore::ChunkWriter::state() const {
  UploadState st;
  st.persisted = session_->committed;
  st.done = session_->result != nullptr;
  st.object = session_->result;
  if (st.done) st.persisted = static_cast<std::int64_t>(st.object->data->size());
  return st;
}

UploadState ObjectStore::ChunkWriter::interrupted() {
  if (session_->result) return state();
  const std::int64_t have = static_cast<std::int64_t>(session_->data.size());
  commit_to(have / kUploadQuantum * kUploadQuantum);
  return state();
}

UploadState ObjectStore::ChunkWriter::finish() {
  Session& s = *session_;
  if (s.result) return state();
  const std::int64_t have = static_cast<std::int64_t>(s.data.size());
  const bool final_chunk = range_.total && (!range_.last || *range_.last + 1 == *range_.total);
  if (final_chunk) {
    if (have == *range_.total) {
      commit_to(have);
      return finalize();
    }
    if (have > *range_.total) {
      s.data.resize(static_cast<std::size_t>(s.committed));
      throw ApiError::invalid_argument(
          fmt::format("The total object size {} is smaller than the {} bytes already uploaded",
                      *range_.total, have));
    }
    if (!range_.first) {
      // `bytes */N` with N larger than what we hold: a status query, nothing to finalize.
      s.data.resize(static_cast<std::size_t>(s.committed));
      return state();
    }
  }
  commit_to(have / kUploadQuantum * kUploadQuantum);
  return state();
}

UploadState ObjectStore::ChunkWriter::finalize() {
  Session& s = *session_;
  auto object = std::make_shared<StoredObject>();
  object->bucket = s.bucket;
  object->name = s.name;
  object->content_type = s.content_type;
  object->metadata = s.metadata;
  object->created_ns = now_ns_;
  object->md5_base64 = s.md5.final_base64();
  object->crc32c_base64 = crc32c_base64(s.crc32c);
  object->data = std::make_shared<const std::string>(std::move(s.data));
  s.data.clear();
  try {
    std::lock_guard lock(store_.mutex_);
    s.result = store_.commit(std::move(object), s.if_generation_match);
  } catch (...) {
    // Keep the session finalizable no more: a failed precondition ends the upload.
    s.cancelled = true;
    throw;
  }
  return state();
}

}  // namespace falcon::fake
