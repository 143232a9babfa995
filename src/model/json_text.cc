#include "model/json_text.h"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <nlohmann/json.hpp>

namespace falcon {

void append_json_string(std::string& out, std::string_view s) {
  for (const char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) {
      // Multi-byte text (and its validation) is nlohmann's: the rare case.
      out += nlohmann::json(std::string(s))
                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      return;
    }
  }
  out += '"';
  std::size_t run = 0;  // start of the characters not yet written that need no escape
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c != '"' && c != '\\' && static_cast<unsigned char>(c) >= 0x20) continue;
    out.append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
    }
  }
  out.append(s.data() + run, s.size() - run);
  out += '"';
}

void append_json_int(std::string& out, std::int64_t v) {
  const fmt::format_int text(v);
  out.append(text.data(), text.size());
}

namespace {

void append_optional_int(std::string& out, const std::optional<int>& v) {
  if (v) {
    append_json_int(out, *v);
  } else {
    out += "null";
  }
}

template <typename T, typename Write>
void append_optional(std::string& out, const std::optional<T>& v, Write write) {
  if (v) {
    write(out, *v);
  } else {
    out += "null";
  }
}

void append_signals(std::string& out, const ClusterSignals& v) {
  out += "{\"admission_delay_s\":";
  append_optional(out, v.admission_delay_s, append_json_double);
  out += ",\"drain_per_min\":";
  append_optional(out, v.drain_per_min, append_json_double);
  out += ",\"fragmentation\":";
  append_optional(out, v.fragmentation, append_json_double);
  out += ",\"free_chips\":";
  append_optional(out, v.free_chips, append_json_double);
  out += ",\"health\":";
  append_optional(out, v.health, append_json_double);
  out += ",\"health_samples\":";
  append_json_int(out, v.health_samples);
  out += ",\"largest_block\":";
  append_optional(out, v.largest_block, append_json_double);
  out += ",\"largest_free_block\":";
  append_optional(out, v.largest_free_block, append_json_double);
  out += ",\"latency_ms\":";
  append_optional(out, v.latency_ms, append_json_double);
  out += ",\"nominal_chips\":";
  append_optional(out, v.nominal_chips, append_json_double);
  out += ",\"queue_depth\":";
  append_optional_int(out, v.queue_depth);
  out += ",\"recent_wait_s\":";
  append_optional(out, v.recent_wait_s, append_json_double);
  out += ",\"running\":";
  append_optional_int(out, v.running);
  out += ",\"slice_chips\":";
  append_optional(out, v.slice_chips, append_json_double);
  out += '}';
}

void append_term(std::string& out, const SignalTerm& v) {
  out += "{\"contribution\":";
  append_json_double(out, v.contribution);
  out += ",\"normalized\":";
  append_optional(out, v.normalized, append_json_double);
  out += ",\"signal\":";
  append_json_string(out, v.signal);
  out += ",\"value\":";
  append_optional(out, v.value, append_json_double);
  out += ",\"weight\":";
  append_json_double(out, v.weight);
  out += '}';
}

void append_score(std::string& out, const CandidateScore& v) {
  out += "{\"cluster\":";
  append_json_string(out, v.cluster);
  out += ",\"eligible\":";
  out += v.eligible ? "true" : "false";
  out += ",\"max_queue_depth\":";
  append_json_int(out, v.max_queue_depth);
  out += ",\"priority\":";
  append_json_int(out, v.priority);
  out += ",\"rank\":";
  append_json_int(out, v.rank);
  out += ",\"signals\":";
  append_signals(out, v.signals);
  out += ",\"skip_reason\":";
  if (v.skip_reason.empty()) {
    out += "null";
  } else {
    append_json_string(out, v.skip_reason);
  }
  out += ",\"terms\":[";
  for (std::size_t i = 0; i < v.terms.size(); ++i) {
    if (i > 0) out += ',';
    append_term(out, v.terms[i]);
  }
  out += "],\"total\":";
  append_optional(out, v.total, append_json_double);
  out += ",\"verdict\":";
  append_json_string(out, v.verdict);
  out += '}';
}

}  // namespace

void append_json_double(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";  // as nlohmann's serializer writes NaN and infinities
    return;
  }
  // The shortest text that reads back as `v`, formatted as nlohmann's serializer formats it
  // (1.0, 0.125, 1e+20): its own conversion.
  std::array<char, 64> buffer{};
  const char* end = nlohmann::detail::to_chars(buffer.data(), buffer.data() + buffer.size(), v);
  out.append(buffer.data(), static_cast<std::size_t>(end - buffer.data()));
}

void append_json(std::string& out, const ClusterProbeResult& v) {
  if (!v.capacity.empty() || v.capacity_error || v.admission_delay_s) {
    // Rare (kube backend): nlohmann's own text, keys sorted the same way.
    out += nlohmann::json(v).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return;
  }
  out += "{\"cluster\":";
  append_json_string(out, v.cluster);
  out += ",\"error\":";
  if (v.error) {
    append_json_string(out, *v.error);
  } else {
    out += "null";
  }
  out += ",\"probed_at\":";
  append_json_string(out, v.probed_at);
  out += ",\"queue_depth\":";
  append_optional_int(out, v.queue_depth);
  out += ",\"reachable\":";
  out += v.reachable ? "true" : "false";
  out += ",\"running_count\":";
  append_optional_int(out, v.running_count);
  out += '}';
}

void append_json(std::string& out, const ClusterSelection& v) {
  out += "{\"accelerator\":";
  append_json_string(out, v.accelerator);
  out += ",\"candidates\":[";
  for (std::size_t i = 0; i < v.candidates.size(); ++i) {
    if (i > 0) out += ',';
    append_json_string(out, v.candidates[i]);
  }
  out += "],\"decided_at\":";
  append_json_string(out, v.decided_at);
  if (!v.not_recorded.empty()) {
    out += ",\"not_recorded\":";
    append_json_string(out, v.not_recorded);
  }
  out += ",\"policy\":";
  append_json_string(out, v.policy);
  out += ",\"probe_results\":[";
  for (std::size_t i = 0; i < v.probe_results.size(); ++i) {
    if (i > 0) out += ',';
    append_json(out, v.probe_results[i]);
  }
  out += "],\"reason\":";
  append_json_string(out, v.reason);
  out += ",\"scores\":";
  append_json_scores(out, v.scores);
  out += ",\"selected_cluster\":";
  append_json_string(out, v.selected_cluster);
  out += ",\"selection_id\":";
  append_json_int(out, v.selection_id);
  out += '}';
}

void append_json_scores(std::string& out, const std::vector<CandidateScore>& v) {
  out += '[';
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i > 0) out += ',';
    append_score(out, v[i]);
  }
  out += ']';
}

std::string to_json_text(const ClusterSelection& v) {
  std::string out;
  out.reserve(256 + v.probe_results.size() * 160 + v.scores.size() * 900);
  append_json(out, v);
  return out;
}

}  // namespace falcon
