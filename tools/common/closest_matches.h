// "closest matches", as argparse-based tools built on Python's difflib word them. xpk refuses a
// --tpu-type or --device-type outside its table with
//   invalid choice: 'tpu-v4-128' (closest matches: tpu7-128, v4-128, tpu7x-128, v4-1280, ...)
// where the list is difflib.get_close_matches(value, choices, n=5, cutoff=0).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace falcon::tools {

// difflib.SequenceMatcher(None, candidate, word).ratio() as an exact fraction 2*M / T: M is the
// number of characters in the matching blocks difflib finds (longest common block first, then
// recursively left and right of it; with its "popular character" rule when `word` has 200
// characters or more), T the two lengths added. Both are compared as Python compares str values,
// character by character: decoded from UTF-8, where a byte that is not part of a well-formed
// sequence stands for itself (as Python's surrogateescape decodes a command line).
struct MatchRatio {
  std::size_t twice_matches = 0;  // 2*M
  std::size_t total_length = 0;   // T; 0 when both are empty (ratio 1)
};
MatchRatio sequence_match_ratio(std::string_view candidate, std::string_view word);

// Up to `n` of `candidates`, best first, as difflib.get_close_matches(word, candidates, n,
// cutoff=0) returns them: by ratio, equal ratios by the larger candidate (the order in which
// the candidates are given does not matter).
std::vector<std::string> closest_matches(std::string_view word,
                                         const std::vector<std::string_view>& candidates,
                                         std::size_t n);

}  // namespace falcon::tools
