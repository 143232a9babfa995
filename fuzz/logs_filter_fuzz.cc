// The Logging query falcon builds from a workload's names and a user's --grep
// (logs/filter_builder.h), read back by the local server's query language: whatever
// build_workload_filter accepts is a query that parses, that matches a log entry of exactly that
// workload, slice and rank (pod labels or pod name), and that a --grep can only narrow.
//
// Input: four bytes (slice, rank count, first rank, flags: 1 every slice, 2 with a grep, 4 entry
// without pod labels), then project, cluster id, namespace, workload and grep separated by NUL.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "falcon/errors.h"
#include "gcp_server/lql.h"
#include "logs/filter_builder.h"
#include "logs/gke_entries.h"
#include "util/time_format.h"

namespace {

namespace lql = falcon::fake::lql;
using nlohmann::json;

std::vector<std::string> split_nul(std::string_view text, std::size_t n) {
  std::vector<std::string> parts;
  while (parts.size() + 1 < n) {
    const std::size_t nul = text.find('\0');
    if (nul == std::string_view::npos) break;
    parts.emplace_back(text.substr(0, nul));
    text.remove_prefix(nul + 1);
  }
  parts.emplace_back(text);
  parts.resize(n);
  return parts;
}

std::optional<lql::Filter> parse(const std::string& text) {
  try {
    return lql::Filter::parse(text);
  } catch (const lql::FilterError&) {
    return std::nullopt;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  const int slice = data[0] % 8;
  const int rank_count = data[1] % 4;
  const int first_rank = data[2] % 16;
  const std::uint8_t flags = data[3];
  const auto parts =
      split_nul(std::string_view(reinterpret_cast<const char*>(data + 4), size - 4), 5);

  falcon::logs::WorkloadQuery query;
  query.project = parts[0];
  query.cluster_id = parts[1];
  query.namespace_ = parts[2];
  query.workload = parts[3];
  query.slice = slice;
  if (rank_count > 0) {
    query.ranks.emplace();
    for (int i = 0; i < rank_count; ++i) query.ranks->push_back(first_rank + 3 * i);
  }
  query.not_before_nanos = 1'776'000'000'000'000'000;
  query.every_slice = (flags & 1) != 0;

  std::string plain;
  try {
    plain = falcon::logs::build_workload_filter(query);
  } catch (const falcon::LogRetrievalError&) {
    return 0;
  }
  const auto base = parse(plain);
  if (!base) __builtin_trap();  // what falcon builds from names alone always parses

  // A log line of rank first_rank of that slice, with or without the pod labels.
  const std::string pod =
      falcon::logs::pod_name_prefix(query.workload, query.slice, first_rank) + "x7k2p";
  json entry = {{"textPayload", "step 1"},
                {"timestamp", falcon::format_rfc3339_nanos(query.not_before_nanos)},
                {"resource",
                 {{"type", "k8s_container"},
                  {"labels",
                   {{"project_id", query.project},
                    {"cluster_name", query.cluster_id},
                    {"namespace_name", query.namespace_},
                    {"pod_name", pod}}}}}};
  if ((flags & 4) == 0) {
    entry["labels"] = {{falcon::logs::kJobsetNameLabel, query.workload},
                       {falcon::logs::kJobIndexLabel, std::to_string(query.slice)},
                       {falcon::logs::kCompletionIndexLabel, std::to_string(first_rank)}};
  }
  const bool base_matches = base->matches(lql::JsonEntryView(entry));
  if (!base_matches) __builtin_trap();

  if ((flags & 2) == 0) return 0;
  query.grep = parts[4];
  std::string narrowed_text;
  try {
    narrowed_text = falcon::logs::build_workload_filter(query);
  } catch (const falcon::LogRetrievalError&) {
    return 0;
  }
  // A grep the query language rejects is the user's error; one it accepts only narrows: it
  // cannot match an entry of another project, cluster, namespace or workload.
  const auto narrowed = parse(narrowed_text);
  if (!narrowed) return 0;
  json other = entry;
  other["resource"]["labels"]["project_id"] = query.project + "-other";
  if (narrowed->matches(lql::JsonEntryView(other))) __builtin_trap();
  return 0;
}
