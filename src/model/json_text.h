// JSON text written directly, without building a nlohmann::json tree first: for the hot path of
// `falcon serve` (a decision over 100 candidates is stored and answered many thousand times a
// second). The output is byte for byte what nlohmann::json(v).dump() writes for the same value
// (keys sorted, no spaces), so readers cannot tell the two apart; tests check exactly that.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "falcon/model.h"

namespace falcon {

// `s` as a JSON string (quotes included). Text that is not valid UTF-8 gets U+FFFD for the bad
// bytes, as the API's other answers do.
void append_json_string(std::string& out, std::string_view s);
void append_json_int(std::string& out, std::int64_t v);
// As nlohmann writes a double: the shortest text that reads back as `v` (1.0, 0.125, 1e+20);
// null for NaN and infinities.
void append_json_double(std::string& out, double v);

void append_json(std::string& out, const ClusterProbeResult& v);
void append_json(std::string& out, const ClusterSelection& v);
// ClusterSelection::scores: the array of CandidateScore (signals, terms, total, verdict).
void append_json_scores(std::string& out, const std::vector<CandidateScore>& v);

// nlohmann::json(v).dump(), faster.
std::string to_json_text(const ClusterSelection& v);

}  // namespace falcon
