// "Did you mean": the names closest to a mistyped one.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace falcon {

// Up to `n` of `candidates`, the most similar to `word` first, ranked exactly as Python's
// difflib.get_close_matches(word, candidates, n, cutoff=0) ranks them: by the Ratcliff/Obershelp
// ratio 2*M/T (M characters in matching blocks, T the two lengths together; with difflib's
// "popular character" heuristic for words of 200 characters or more), ties by the larger
// candidate. This is how argparse-based tools such as xpk word "closest matches", so a message
// built from it names the same choices the real tool would. Strings are compared byte by byte.
std::vector<std::string> closest_matches(std::string_view word,
                                         const std::vector<std::string_view>& candidates,
                                         std::size_t n);

// Up to `n` of `candidates` for a "did you mean" shown to a person: the candidates within edit
// distance 2 of `word` first (nearest first), then the rest as closest_matches ranks them. A
// one-character slip (`v4-65`) then names its neighbour (`v4-64`) first, while a name far from
// every candidate still gets difflib's ranking.
std::vector<std::string> suggest_names(std::string_view word,
                                       const std::vector<std::string_view>& candidates,
                                       std::size_t n);

// The one candidate within a small edit distance of `word` (at most max(2, |word|/3)), the
// nearest first in candidate order; empty when none is that close. For unknown-key hints.
std::string nearest_by_edit_distance(std::string_view word,
                                     const std::vector<std::string>& candidates);

}  // namespace falcon
