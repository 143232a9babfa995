#include "util/closest.h"

#include <algorithm>
#include <array>
#include <unordered_map>

namespace falcon {
namespace {

// difflib.SequenceMatcher with `b` fixed (set_seq2) and no junk function: only the number of
// matched characters is needed, which is all ratio() uses.
class Matcher {
 public:
  explicit Matcher(std::string_view b) : b_(b) {
    for (std::size_t j = 0; j < b.size(); ++j) {
      positions_[static_cast<unsigned char>(b[j])].push_back(j);
    }
    // difflib's autojunk: in a sequence of 200 or more, a character that occurs in more than
    // 1% (+1) of the positions is "popular" and never starts a match.
    if (b.size() >= 200) {
      const std::size_t limit = b.size() / 100 + 1;
      for (auto& p : positions_) {
        if (p.size() > limit) p.clear();
      }
    }
  }

  // Characters in the matching blocks of `a` against b.
  std::size_t matched(std::string_view a) const {
    std::size_t total = 0;
    struct Range {
      std::size_t alo, ahi, blo, bhi;
    };
    std::vector<Range> queue = {{0, a.size(), 0, b_.size()}};
    while (!queue.empty()) {
      const Range r = queue.back();
      queue.pop_back();
      const auto [i, j, k] = longest_match(a, r.alo, r.ahi, r.blo, r.bhi);
      if (k == 0) continue;
      total += k;
      if (r.alo < i && r.blo < j) queue.push_back({r.alo, i, r.blo, j});
      if (i + k < r.ahi && j + k < r.bhi) queue.push_back({i + k, r.ahi, j + k, r.bhi});
    }
    return total;
  }

 private:
  struct Match {
    std::size_t i, j, size;
  };

  // find_longest_match: the longest block, earliest in a, then earliest in b; then extended
  // over equal neighbours (which may be popular characters).
  Match longest_match(std::string_view a, std::size_t alo, std::size_t ahi, std::size_t blo,
                      std::size_t bhi) const {
    Match best{alo, blo, 0};
    std::unordered_map<std::size_t, std::size_t> run, next_run;  // j -> length of match ending at j
    for (std::size_t i = alo; i < ahi; ++i) {
      next_run.clear();
      for (std::size_t j : positions_[static_cast<unsigned char>(a[i])]) {
        if (j < blo) continue;
        if (j >= bhi) break;
        std::size_t k = 1;
        if (j > 0) {
          if (auto it = run.find(j - 1); it != run.end()) k = it->second + 1;
        }
        next_run[j] = k;
        if (k > best.size) best = {i + 1 - k, j + 1 - k, k};
      }
      std::swap(run, next_run);
    }
    while (best.i > alo && best.j > blo && a[best.i - 1] == b_[best.j - 1]) {
      --best.i;
      --best.j;
      ++best.size;
    }
    while (best.i + best.size < ahi && best.j + best.size < bhi &&
           a[best.i + best.size] == b_[best.j + best.size]) {
      ++best.size;
    }
    return best;
  }

  std::string_view b_;
  std::array<std::vector<std::size_t>, 256> positions_;
};

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

std::vector<std::string> closest_matches(std::string_view word,
                                         const std::vector<std::string_view>& candidates,
                                         std::size_t n) {
  struct Scored {
    std::size_t matched, total;  // ratio = 2 * matched / total (1 when total is 0)
    std::string_view name;
  };
  const Matcher matcher(word);
  std::vector<Scored> scored;
  scored.reserve(candidates.size());
  for (std::string_view c : candidates) {
    scored.push_back({matcher.matched(c), c.size() + word.size(), c});
  }
  // Higher ratio first (compared exactly, as fractions), then the larger name, as difflib's
  // heapq.nlargest over (score, name) pairs does.
  const auto better = [](const Scored& x, const Scored& y) {
    const std::size_t xt = std::max<std::size_t>(x.total, 1),
                      yt = std::max<std::size_t>(y.total, 1);
    const std::size_t xm = x.total == 0 ? 1 : 2 * x.matched;
    const std::size_t ym = y.total == 0 ? 1 : 2 * y.matched;
    if (xm * yt != ym * xt) return xm * yt > ym * xt;
    return x.name > y.name;
  };
  const std::size_t keep = std::min(n, scored.size());
  std::partial_sort(scored.begin(), scored.begin() + static_cast<std::ptrdiff_t>(keep),
                    scored.end(), better);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < keep; ++i) out.emplace_back(scored[i].name);
  return out;
}

std::vector<std::string> suggest_names(std::string_view word,
                                       const std::vector<std::string_view>& candidates,
                                       std::size_t n) {
  constexpr std::size_t kNear = 2;
  std::vector<std::string> ranked = closest_matches(word, candidates, candidates.size());
  std::vector<std::pair<std::size_t, std::string>> keyed;
  keyed.reserve(ranked.size());
  for (std::string& name : ranked) {
    // Lengths that differ by more than kNear rule out a near name without the quadratic work.
    const std::size_t gap =
        name.size() > word.size() ? name.size() - word.size() : word.size() - name.size();
    const std::size_t d = gap > kNear ? kNear + 1 : std::min(edit_distance(word, name), kNear + 1);
    keyed.emplace_back(d, std::move(name));
  }
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (std::size_t i = 0; i < keyed.size() && i < n; ++i) out.push_back(std::move(keyed[i].second));
  return out;
}

std::string nearest_by_edit_distance(std::string_view word,
                                     const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    // A word far longer than every candidate is no typo of one; skip the quadratic work.
    if (word.size() > c.size() + best_distance) continue;
    const std::size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

}  // namespace falcon
