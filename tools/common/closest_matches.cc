#include "common/closest_matches.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <unordered_map>

namespace falcon::tools {
namespace {

// UTF-8 as code points; a byte outside a well-formed sequence becomes U+DC80 + byte, as
// surrogateescape has it, so that it matches only the same byte.
std::u32string decode_utf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char b0 = byte(i);
    std::size_t len = 0;
    char32_t cp = 0;
    char32_t min = 0;
    if (b0 < 0x80) {
      len = 1;
      cp = b0;
    } else if (b0 >= 0xC2 && b0 <= 0xDF) {
      len = 2;
      cp = b0 & 0x1F;
      min = 0x80;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      len = 3;
      cp = b0 & 0x0F;
      min = 0x800;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      len = 4;
      cp = b0 & 0x07;
      min = 0x10000;
    }
    bool ok = len > 0 && i + len <= s.size();
    for (std::size_t k = 1; ok && k < len; ++k) {
      ok = (byte(i + k) & 0xC0) == 0x80;
      cp = (cp << 6) | (byte(i + k) & 0x3F);
    }
    ok = ok && cp >= min && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (ok) {
      out += cp;
      i += len;
    } else {
      out += static_cast<char32_t>(0xDC00 + b0);
      ++i;
    }
  }
  return out;
}

// difflib.SequenceMatcher with its second sequence (b, the word) fixed; no junk function.
class Matcher {
 public:
  explicit Matcher(std::u32string b) : b_(std::move(b)), row_(b_.size() + 1), next_(b_.size() + 1) {
    for (std::size_t j = 0; j < b_.size(); ++j) b2j_[b_[j]].push_back(j);
    // autojunk: in a b of 200 or more, characters seen more than 1% + 1 times are "popular"
    // and do not start matches (they still extend one, below).
    if (b_.size() >= 200) {
      const std::size_t limit = b_.size() / 100 + 1;
      std::erase_if(b2j_, [&](const auto& entry) { return entry.second.size() > limit; });
    }
  }

  // The number of characters in the matching blocks of a against b.
  std::size_t matches(const std::u32string& a) {
    std::size_t total = 0;
    std::vector<std::array<std::size_t, 4>> pending{{0, a.size(), 0, b_.size()}};
    while (!pending.empty()) {
      const auto [alo, ahi, blo, bhi] = pending.back();
      pending.pop_back();
      const auto [i, j, k] = longest_match(a, alo, ahi, blo, bhi);
      if (k == 0) continue;
      total += k;
      if (alo < i && blo < j) pending.push_back({alo, i, blo, j});
      if (i + k < ahi && j + k < bhi) pending.push_back({i + k, ahi, j + k, bhi});
    }
    return total;
  }

 private:
  struct Block {
    std::size_t i, j, k;
  };

  // find_longest_match: the longest a[i:i+k] == b[j:j+k] in the ranges, the earliest i, then
  // the earliest j, among those; extended by equal characters on either side.
  Block longest_match(const std::u32string& a, std::size_t alo, std::size_t ahi, std::size_t blo,
                      std::size_t bhi) {
    Block best{alo, blo, 0};
    // row_[j + 1]: the length of the match ending at a[i - 1], b[j] (0 when there is none).
    for (std::size_t i = alo; i < ahi; ++i) {
      const auto found = b2j_.find(a[i]);
      if (found != b2j_.end()) {
        for (std::size_t j : found->second) {
          if (j < blo) continue;
          if (j >= bhi) break;
          const std::size_t k = row_[j] + 1;
          next_[j + 1] = k;
          set_.push_back(j + 1);
          if (k > best.k) best = {i + 1 - k, j + 1 - k, k};
        }
      }
      for (std::size_t x : row_set_) row_[x] = 0;
      std::swap(row_, next_);
      std::swap(row_set_, set_);
      set_.clear();
    }
    for (std::size_t x : row_set_) row_[x] = 0;
    row_set_.clear();

    while (best.i > alo && best.j > blo && a[best.i - 1] == b_[best.j - 1]) {
      --best.i;
      --best.j;
      ++best.k;
    }
    while (best.i + best.k < ahi && best.j + best.k < bhi &&
           a[best.i + best.k] == b_[best.j + best.k]) {
      ++best.k;
    }
    return best;
  }

  std::u32string b_;
  std::unordered_map<char32_t, std::vector<std::size_t>> b2j_;
  std::vector<std::size_t> row_, next_;     // two rows of match lengths, all zero between calls
  std::vector<std::size_t> row_set_, set_;  // the entries of row_ and next_ that are not zero
};

// Whether x's ratio is above y's, compared exactly (lengths are those of command-line
// arguments, far below 2^32, so the products fit).
bool greater(const MatchRatio& x, const MatchRatio& y) {
  const auto num = [](const MatchRatio& r) -> std::uint64_t {
    return r.total_length == 0 ? 1 : r.twice_matches;  // two empty texts: ratio 1
  };
  const auto den = [](const MatchRatio& r) -> std::uint64_t {
    return r.total_length == 0 ? 1 : r.total_length;
  };
  return num(x) * den(y) > num(y) * den(x);
}

}  // namespace

MatchRatio sequence_match_ratio(std::string_view candidate, std::string_view word) {
  const std::u32string a = decode_utf8(candidate);
  std::u32string b = decode_utf8(word);
  const std::size_t total = a.size() + b.size();
  Matcher matcher(std::move(b));
  return {2 * matcher.matches(a), total};
}

std::vector<std::string> closest_matches(std::string_view word,
                                         const std::vector<std::string_view>& candidates,
                                         std::size_t n) {
  std::u32string b = decode_utf8(word);
  const std::size_t word_length = b.size();
  Matcher matcher(std::move(b));
  std::vector<std::pair<MatchRatio, std::string_view>> scored;
  scored.reserve(candidates.size());
  for (std::string_view c : candidates) {
    const std::u32string a = decode_utf8(c);
    scored.push_back({{2 * matcher.matches(a), a.size() + word_length}, c});
  }
  const auto better = [](const auto& x, const auto& y) {
    if (greater(x.first, y.first)) return true;
    if (greater(y.first, x.first)) return false;
    return x.second > y.second;  // UTF-8 bytes order as code points do
  };
  const std::size_t count = std::min(n, scored.size());
  std::partial_sort(scored.begin(), scored.begin() + static_cast<std::ptrdiff_t>(count),
                    scored.end(), better);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < count; ++i) out.emplace_back(scored[i].second);
  return out;
}

}  // namespace falcon::tools
