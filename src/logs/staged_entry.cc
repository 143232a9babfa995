#include "logs/staged_entry.h"

#include <simdjson.h>

#include <cstring>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gcp/logging_client.h"
#include "logs/gke_entries.h"
#include "util/time_format.h"

namespace falcon::logs {
namespace {

namespace od = simdjson::ondemand;

// The fields the fast path reads; views into the parser's buffers, valid until the next line.
struct Fields {
  std::string_view timestamp, insert_id, text;
  bool has_text = false;
  bool other_payload = false;  // jsonPayload or protoPayload: the slow path decides the line
  std::string_view resource_type, project, cluster, namespace_, pod;
  bool has_pod = false;
  std::string_view jobset_name, job_index, completion;
  bool has_jobset_name = false, has_job_index = false, has_completion = false;
};

bool read_string(od::value value, std::string_view& out) {
  return value.get_string().get(out) == simdjson::SUCCESS;
}

// One pass over the entry's fields, in document order.
simdjson::error_code read_fields(od::document& doc, Fields& f) {
  od::object entry;
  if (auto e = doc.get_object().get(entry)) return e;
  for (auto field : entry) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return e;
    od::value value;
    if (auto e = field.value().get(value)) return e;
    if (key == "timestamp") {
      read_string(value, f.timestamp);
    } else if (key == "insertId") {
      read_string(value, f.insert_id);
    } else if (key == "textPayload") {
      f.has_text = read_string(value, f.text);
      if (!f.has_text) f.other_payload = true;  // not a string: let the slow path say what
    } else if (key == "jsonPayload" || key == "protoPayload") {
      f.other_payload = true;
    } else if (key == "resource") {
      od::object resource;
      if (value.get_object().get(resource)) continue;
      for (auto r : resource) {
        std::string_view rkey;
        if (r.unescaped_key().get(rkey)) return simdjson::TAPE_ERROR;
        od::value rvalue;
        if (auto e = r.value().get(rvalue)) return e;
        if (rkey == "type") {
          read_string(rvalue, f.resource_type);
        } else if (rkey == "labels") {
          od::object labels;
          if (rvalue.get_object().get(labels)) continue;
          for (auto l : labels) {
            std::string_view lkey;
            if (l.unescaped_key().get(lkey)) return simdjson::TAPE_ERROR;
            od::value lvalue;
            if (auto e = l.value().get(lvalue)) return e;
            if (lkey == "project_id") {
              read_string(lvalue, f.project);
            } else if (lkey == "cluster_name") {
              read_string(lvalue, f.cluster);
            } else if (lkey == "namespace_name") {
              read_string(lvalue, f.namespace_);
            } else if (lkey == "pod_name") {
              f.has_pod = read_string(lvalue, f.pod);
            }
          }
        }
      }
    } else if (key == "labels") {
      od::object labels;
      if (value.get_object().get(labels)) continue;
      for (auto l : labels) {
        std::string_view lkey;
        if (l.unescaped_key().get(lkey)) return simdjson::TAPE_ERROR;
        od::value lvalue;
        if (auto e = l.value().get(lvalue)) return e;
        if (lkey == kJobsetNameLabel) {
          f.has_jobset_name = read_string(lvalue, f.jobset_name);
        } else if (lkey == kJobIndexLabel) {
          f.has_job_index = read_string(lvalue, f.job_index);
        } else if (lkey == kCompletionIndexLabel) {
          f.has_completion = read_string(lvalue, f.completion);
        }
      }
    }
  }
  return simdjson::SUCCESS;
}

std::string_view trim(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
    line.remove_suffix(1);
  }
  while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
  return line;
}

}  // namespace

struct StagedEntryDecoder::Impl {
  const RankQuery& query;
  od::parser parser;
  std::string buffer;  // the line, padded for simdjson
  // The slow path's entry, which the returned views point into.
  std::string slow_id;
  std::string slow_line;

  explicit Impl(const RankQuery& q) : query(q) {}

  bool wanted_place(std::string_view type, std::string_view project, std::string_view cluster,
                    std::string_view ns, std::int64_t ts) const {
    return type == "k8s_container" && project == query.project() && cluster == query.cluster_id() &&
           ns == query.namespace_() && ts >= query.not_before_nanos();
  }

  // jsonPayload and protoPayload entries: decoded as the Logging client decodes entries:list.
  std::optional<StagedEntry> slow(std::string_view line) {
    const nlohmann::json item = nlohmann::json::parse(line, nullptr, false);
    if (!item.is_object()) throw std::invalid_argument("the line is not a JSON object");
    const gcp::LogEntry entry = gcp::parse_log_entry(item);
    const auto label = [&](const std::map<std::string, std::string>& m, const char* k) {
      const auto it = m.find(k);
      return it == m.end() ? std::string_view() : std::string_view(it->second);
    };
    if (!wanted_place(entry.resource_type, label(entry.resource_labels, "project_id"),
                      label(entry.resource_labels, "cluster_name"),
                      label(entry.resource_labels, "namespace_name"), entry.timestamp_nanos)) {
      return std::nullopt;
    }
    const std::optional<int> rank = query.accept(entry);
    if (!rank) return std::nullopt;
    slow_id = entry.insert_id;
    slow_line = log_line(entry);
    return StagedEntry{*rank, entry.timestamp_nanos, slow_id, slow_line};
  }
};

StagedEntryDecoder::StagedEntryDecoder(const RankQuery& query)
    : impl_(std::make_unique<Impl>(query)) {}
StagedEntryDecoder::~StagedEntryDecoder() = default;

std::optional<StagedEntry> StagedEntryDecoder::decode(std::string_view json_line) {
  json_line = trim(json_line);
  if (json_line.empty()) return std::nullopt;
  Impl& d = *impl_;
  // The line, padded as simdjson needs; the buffer keeps its capacity from line to line.
  if (d.buffer.size() < json_line.size() + simdjson::SIMDJSON_PADDING) {
    d.buffer.resize(json_line.size() + simdjson::SIMDJSON_PADDING);
  }
  std::memcpy(d.buffer.data(), json_line.data(), json_line.size());
  std::memset(d.buffer.data() + json_line.size(), 0, simdjson::SIMDJSON_PADDING);
  od::document doc;
  Fields f;
  if (d.parser.iterate(d.buffer.data(), json_line.size(), d.buffer.size()).get(doc) ||
      read_fields(doc, f) != simdjson::SUCCESS || f.other_payload) {
    return d.slow(json_line);  // says precisely what is wrong with a line that is not JSON
  }
  const std::int64_t ts = f.timestamp.empty() ? 0 : parse_rfc3339_nanos(f.timestamp).value_or(0);
  if (!d.wanted_place(f.resource_type, f.project, f.cluster, f.namespace_, ts)) return std::nullopt;
  const std::optional<int> rank = d.query.accept_rank(rank_of_labels(
      f.has_jobset_name ? &f.jobset_name : nullptr, f.has_job_index ? &f.job_index : nullptr,
      f.has_completion ? &f.completion : nullptr, f.has_pod ? &f.pod : nullptr, d.query.workload(),
      d.query.slice()));
  if (!rank) return std::nullopt;
  std::string_view text = f.has_text ? f.text : std::string_view();
  if (text.ends_with('\n')) {  // log_line's rule
    text.remove_suffix(1);
    if (text.ends_with('\r')) text.remove_suffix(1);
  }
  return StagedEntry{*rank, ts, f.insert_id, text};
}

}  // namespace falcon::logs
