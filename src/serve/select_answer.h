// The answer of POST /v1/select, written directly (model/json_text.h): the decision, its id and
// every candidate's probe with its age. Byte for byte what nlohmann::json writes for
//   json j = outcome.selection; j["selection_id"] = outcome.selection.selection_id;
//   j["candidate_probes"] = outcome.candidate_probes;
// (keys sorted) followed by a newline, at a fraction of the cost for 100 candidates.
#pragma once

#include <string>

#include "serve/api_server.h"

namespace falcon::serve {

void append_json(std::string& out, const MonitoredProbe& v);
std::string select_answer_json(const Decision& outcome);

// The brief answer (POST /v1/select without "explain"): the decision without its explanation,
//   {"accelerator", "decided_at", "explain": "/v1/selections/<id>", "policy",
//    "probe_age_ms": {"<cluster>": <ms>, ...} (every candidate, in candidate order),
//    "probed_now": [<cluster>, ...] (candidates probed for this decision, not from the cache),
//    "reason", "same_as" (the decision it repeats, or null), "selected_cluster", "selection_id",
//    "unreachable": [<cluster>, ...] (candidates whose probe failed)}
// and a newline: about 14 bytes a candidate, where a list of objects took 65.
std::string brief_select_answer_json(const Decision& outcome);

}  // namespace falcon::serve
