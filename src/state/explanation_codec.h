// How a decision's explanation (its ClusterSelection JSON) is kept in selections.selection_json:
// deflated and base64-encoded behind a "z1:" tag. The JSON is mostly the same keys again for
// every candidate (about 150 KB with 100 candidates), which deflate takes to about 5 KB; base64
// keeps it text, which both databases store without a binary column type. Rows written before
// schema 4 hold the JSON itself (it starts with '{') and read back as they are.
#pragma once

#include <string>
#include <string_view>

namespace falcon::state {

// "z1:" + base64(raw deflate of `json`).
std::string pack_explanation(std::string_view json);

// The JSON `stored` holds: packed (pack_explanation), or plain JSON, or "" (a repeat's row).
// Throws std::runtime_error naming what is wrong with a packed value that does not unpack,
// and for one that would unpack past 256 MiB.
std::string unpack_explanation(std::string_view stored);

}  // namespace falcon::state
