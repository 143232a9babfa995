#include "workload/submission_log.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "falcon/errors.h"
#include "util/unique_fd.h"
#include "xpk/xpk_cli.h"

namespace falcon {

std::string submission_to_json_line(const SubmissionRecord& r) {
  return nlohmann::json{{"v", 1},
                        {"cluster", r.cluster},
                        {"workload", r.workload},
                        {"namespace", r.namespace_},
                        {"accelerator_type", r.accelerator_type},
                        {"device_class", r.device_class},
                        {"submitted_at", r.submitted_at},
                        {"cluster_id", r.cluster_id},
                        {"project", r.project},
                        {"zone", r.zone},
                        {"docker_image", r.docker_image},
                        {"priority", r.priority}}
      .dump();
}

std::optional<SubmissionRecord> submission_from_json_line(std::string_view line) {
  const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  auto text = [&](const char* key, bool required) -> std::optional<std::string> {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string()) {
      return required ? std::nullopt : std::optional<std::string>("");
    }
    return it->get<std::string>();
  };
  const auto cluster = text("cluster", true);
  const auto workload = text("workload", true);
  const auto ns = text("namespace", true);
  const auto submitted = text("submitted_at", true);
  if (!cluster || !workload || !ns || !submitted) return std::nullopt;
  SubmissionRecord r;
  r.cluster = *cluster;
  r.workload = *workload;
  r.namespace_ = *ns;
  r.submitted_at = *submitted;
  r.accelerator_type = *text("accelerator_type", false);
  r.device_class = *text("device_class", false);
  r.cluster_id = *text("cluster_id", false);
  r.project = *text("project", false);
  r.zone = *text("zone", false);
  r.docker_image = *text("docker_image", false);
  r.priority = *text("priority", false);
  return r;
}

SubmissionLog::SubmissionLog(std::filesystem::path path) : path_(std::move(path)) {}

void SubmissionLog::append(const SubmissionRecord& record) const {
  xpk::ensure_private_dir(path_.parent_path());
  const UniqueFd fd(::open(path_.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0600));
  if (!fd) {
    throw FalconError(fmt::format("cannot open '{}': {}", path_.string(), ::strerror(errno)));
  }
  // A line cut short by an earlier crash is ended first, so this record starts a line of its
  // own (built by appending: GCC 12 flags a prepend with a false -Wrestrict at -O2).
  std::string line;
  struct stat st;
  if (::fstat(fd.get(), &st) == 0 && st.st_size > 0) {
    char last = '\n';
    if (::pread(fd.get(), &last, 1, st.st_size - 1) == 1 && last != '\n') line += '\n';
  }
  line += submission_to_json_line(record);
  line += '\n';
  // One write(2) for the whole line: O_APPEND makes it land after every earlier record.
  if (const int err = write_all(fd.get(), line); err != 0) {
    throw FalconError(fmt::format("cannot write '{}': {}", path_.string(), ::strerror(err)));
  }
}

std::vector<SubmissionRecord> SubmissionLog::read_all() const {
  std::vector<SubmissionRecord> records;
  const UniqueFd fd(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return records;
    throw FalconError(fmt::format("cannot open '{}': {}", path_.string(), ::strerror(errno)));
  }
  // Line by line, so memory stays bounded by the longest line, not the file.
  std::string pending;
  char buffer[64 * 1024];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      throw FalconError(fmt::format("cannot read '{}': {}", path_.string(), ::strerror(errno)));
    }
    if (n == 0) break;
    std::string_view chunk(buffer, static_cast<std::size_t>(n));
    for (auto nl = chunk.find('\n'); nl != std::string_view::npos; nl = chunk.find('\n')) {
      pending.append(chunk.substr(0, nl));
      if (auto rec = submission_from_json_line(pending)) records.push_back(std::move(*rec));
      pending.clear();
      chunk.remove_prefix(nl + 1);
    }
    pending.append(chunk);
  }
  if (auto rec = submission_from_json_line(pending)) records.push_back(std::move(*rec));
  return records;
}

std::optional<SubmissionRecord> SubmissionLog::find(const std::string& cluster,
                                                    const std::string& workload) const {
  std::optional<SubmissionRecord> found;
  try {
    for (auto& rec : read_all()) {
      if (rec.cluster == cluster && rec.workload == workload) found = std::move(rec);
    }
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return found;
}

bool SubmissionStore::intend(const SubmissionRecord&) { return false; }

void SubmissionStore::forget(const SubmissionRecord&) {}

std::int64_t SubmissionStore::intend_delete(const std::string&, const std::string&) { return 0; }

void SubmissionStore::deleted(std::int64_t, const std::string&, const std::string&) {}

namespace {

class JsonlSubmissionStore final : public SubmissionStore {
 public:
  explicit JsonlSubmissionStore(std::filesystem::path path) : log_(std::move(path)) {}
  void record(const SubmissionRecord& record) override { log_.append(record); }
  std::optional<SubmissionRecord> find(const std::string& cluster,
                                       const std::string& workload) const override {
    return log_.find(cluster, workload);
  }

 private:
  SubmissionLog log_;
};

}  // namespace

std::shared_ptr<SubmissionStore> make_jsonl_submission_store(const std::string& path) {
  return std::make_shared<JsonlSubmissionStore>(path);
}

}  // namespace falcon
