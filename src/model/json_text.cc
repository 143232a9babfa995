#include "model/json_text.h"

#include <fmt/format.h>

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

}  // namespace

void append_json(std::string& out, const ClusterProbeResult& v) {
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
  out += ",\"probe_results\":[";
  for (std::size_t i = 0; i < v.probe_results.size(); ++i) {
    if (i > 0) out += ',';
    append_json(out, v.probe_results[i]);
  }
  out += "],\"reason\":";
  append_json_string(out, v.reason);
  out += ",\"selected_cluster\":";
  append_json_string(out, v.selected_cluster);
  out += ",\"selection_id\":";
  append_json_int(out, v.selection_id);
  out += '}';
}

std::string to_json_text(const ClusterSelection& v) {
  std::string out;
  out.reserve(256 + v.probe_results.size() * 160);
  append_json(out, v);
  return out;
}

}  // namespace falcon
