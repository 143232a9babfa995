#include "logs/filter_builder.h"

#include <algorithm>

#include <fmt/format.h>

#include "falcon/errors.h"
#include "logs/gke_entries.h"
#include "util/time_format.h"

namespace falcon::logs {
namespace {

[[noreturn]] void invalid(const std::string& message) {
  throw LogRetrievalError(message, 0, "INVALID_ARGUMENT");
}

bool is_control(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u < 0x20 || u == 0x7f;
}

std::string label(const char* key) { return fmt::format("labels.\"{}\"", key); }

// `(a OR b OR c)`, or `a` alone.
std::string any_of(const std::vector<std::string>& terms) {
  if (terms.size() == 1) return terms.front();
  return fmt::format("({})", fmt::join(terms, " OR "));
}

std::string build(const WorkloadQuery& q, const std::optional<std::vector<int>>& ranks) {
  const std::string workload = quote_lql(q.workload, "workload name");
  const auto pod_name_has = [](const std::string& prefix) {
    return fmt::format("resource.labels.pod_name:{}", quote_lql(prefix, "workload name"));
  };
  std::string labelled = fmt::format("{}={}", label(kJobsetNameLabel), workload);
  std::vector<std::string> pod_names;
  if (q.every_slice) {
    pod_names.push_back(pod_name_has(workload_pod_name_prefix(q.workload)));
  } else {
    labelled +=
        fmt::format(" AND {}={}", label(kJobIndexLabel), quote_lql(std::to_string(q.slice), ""));
    if (ranks) {
      std::vector<std::string> indexes;
      for (const int rank : *ranks) {
        indexes.push_back(fmt::format("{}={}", label(kCompletionIndexLabel),
                                      quote_lql(std::to_string(rank), "")));
        pod_names.push_back(pod_name_has(pod_name_prefix(q.workload, q.slice, rank)));
      }
      labelled += " AND " + any_of(indexes);
    } else {
      pod_names.push_back(pod_name_has(slice_pod_name_prefix(q.workload, q.slice)));
    }
  }
  const std::string unlabelled =
      fmt::format("(NOT {}:* OR NOT {}:* OR NOT {}:*)", label(kJobsetNameLabel),
                  label(kJobIndexLabel), label(kCompletionIndexLabel));

  std::string out;
  out += "resource.type=\"k8s_container\"\n";
  out += fmt::format("AND resource.labels.project_id={}\n", quote_lql(q.project, "project"));
  out +=
      fmt::format("AND resource.labels.cluster_name={}\n", quote_lql(q.cluster_id, "cluster id"));
  out +=
      fmt::format("AND resource.labels.namespace_name={}\n", quote_lql(q.namespace_, "namespace"));
  out +=
      fmt::format("AND timestamp>={}\n", quote_lql(format_rfc3339_nanos(q.not_before_nanos), ""));
  if (q.only_new) {
    out += fmt::format("AND (timestamp>={} OR receiveTimestamp>={})\n",
                       quote_lql(format_rfc3339_nanos(q.only_new->timestamp_nanos), ""),
                       quote_lql(format_rfc3339_nanos(q.only_new->received_nanos), ""));
  }
  out += fmt::format("AND (({}) OR ({} AND {}))", labelled, any_of(pod_names), unlabelled);
  if (q.grep) {
    // On lines of its own, so that nothing of the grep can run into the closing parenthesis.
    out += fmt::format("\nAND (\n{}\n)", *q.grep);
  }
  return out;
}

}  // namespace

std::string quote_lql(std::string_view value, std::string_view what) {
  std::string out;
  out.reserve(value.size() + 2);
  out += '"';
  for (const char c : value) {
    if (is_control(c)) {
      invalid(
          fmt::format("the {} {:?} contains a control character, which cannot be put in a "
                      "Cloud Logging query",
                      what.empty() ? "value" : what, std::string(value)));
    }
    if (c == '\\' || c == '"') out += '\\';
    out += c;
  }
  out += '"';
  return out;
}

void check_grep(std::string_view grep) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < grep.size(); ++i) {
    const char c = grep[i];
    if (is_control(c) && c != '\t') {
      invalid("--grep contains a control character (write the expression on one line)");
    }
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, whatever it is
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '(') {
      ++depth;
    } else if (c == ')') {
      if (--depth < 0)
        invalid(fmt::format("--grep {:?} closes a parenthesis it did not open", std::string(grep)));
    } else if (c == '-' && i + 1 < grep.size() && grep[i + 1] == '-') {
      invalid(fmt::format("--grep {:?} contains a `--` comment", std::string(grep)));
    }
  }
  if (in_string) invalid(fmt::format("--grep {:?} has an unterminated string", std::string(grep)));
  if (depth != 0) invalid(fmt::format("--grep {:?} leaves a parenthesis open", std::string(grep)));
}

std::string build_workload_filter(const WorkloadQuery& query) {
  if (query.project.empty()) invalid("a log query needs the cluster's project");
  if (query.cluster_id.empty()) invalid("a log query needs the cluster's cluster_id");
  if (query.namespace_.empty()) invalid("a log query needs a namespace");
  if (query.workload.empty()) invalid("a log query needs a workload name");
  if (query.slice < 0) invalid(fmt::format("slice {} is negative", query.slice));
  if (query.grep) check_grep(*query.grep);
  std::optional<std::vector<int>> ranks = query.ranks;
  if (ranks) {
    std::sort(ranks->begin(), ranks->end());
    ranks->erase(std::unique(ranks->begin(), ranks->end()), ranks->end());
    if (!ranks->empty() && ranks->front() < 0) {
      invalid(fmt::format("rank {} is negative", ranks->front()));
    }
    if (ranks->empty()) invalid("the rank list is empty");
  }
  std::string filter = build(query, ranks);
  if (ranks && filter.size() > kMaxFilterLength) filter = build(query, std::nullopt);
  return filter;
}

std::int64_t query_lower_bound(const LogFilter& filter, const LogQueryOptions& options,
                               std::chrono::system_clock::time_point now) {
  const auto parse = [](const std::string& text, const char* what) {
    const auto nanos = parse_rfc3339_nanos(text);
    if (!nanos) invalid(fmt::format("{} {:?} is not an RFC 3339 timestamp", what, text));
    return *nanos;
  };
  if (filter.since) return parse(*filter.since, "since");
  if (options.not_before) return parse(*options.not_before, "not_before");
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             (now - std::chrono::hours(24)).time_since_epoch())
      .count();
}

}  // namespace falcon::logs
