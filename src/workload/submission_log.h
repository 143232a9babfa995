// The submission record: what falcon remembers about each workload it submitted, so that later
// calls by name (another falcon process, days later) can recover it.
//
// <state_dir>/submissions.jsonl (file mode 0600, directory 0700), one JSON object per line,
// UTF-8:
//   {"v":1, "cluster":"tpu-v4-prod", "workload":"llama-8b-bench", "namespace":"default",
//    "accelerator_type":"tpu-v4-64", "device_class":"tpu",
//    "submitted_at":"2026-04-13T08:00:00.123Z", "cluster_id":"tpu-v4-cluster",
//    "project":"primatrix-tpu", "zone":"us-central2-b", "docker_image":"gcr.io/p/img:1",
//    "priority":"medium"}
// Each record is one write(2) on an O_APPEND descriptor, so concurrent falcon processes never
// interleave records. Readers skip lines that are not a complete record (a torn last line after
// a crash) and empty lines; a writer that finds the file not ending in a newline (a torn line,
// or another writer's record caught half-written) starts its record on a new line. For a
// (cluster, workload) pair the last record in the file wins (names are reused). The file only
// grows; deleting it loses nothing but what find() would recover.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "falcon/workload_manager.h"

namespace falcon {

class SubmissionLog {
 public:
  // `path` is the record file (<state_dir>/submissions.jsonl). Touches nothing.
  explicit SubmissionLog(std::filesystem::path path);

  const std::filesystem::path& path() const { return path_; }

  // Appends `record` as one line, creating the file (0600) and its directory (0700) when
  // missing. Throws FalconError naming the file and the errno text when it cannot. Safe to call
  // from many threads and processes at once.
  void append(const SubmissionRecord& record) const;

  // Every complete record, in file order; empty for a missing file. Throws FalconError when the
  // file exists but cannot be read.
  std::vector<SubmissionRecord> read_all() const;

  // The last record for (`cluster` registry name, `workload`), or nullopt. Never throws for a
  // missing, unreadable or damaged file.
  std::optional<SubmissionRecord> find(const std::string& cluster,
                                       const std::string& workload) const;

 private:
  std::filesystem::path path_;
};

// The record as one JSON line (no newline), and back; nullopt for a line that is not a
// complete record.
std::string submission_to_json_line(const SubmissionRecord& record);
std::optional<SubmissionRecord> submission_from_json_line(std::string_view line);

}  // namespace falcon
