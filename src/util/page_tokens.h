// The tokens a server hands out to page through a list (Kubernetes' `metadata.continue`,
// Google's `nextPageToken`). Each must be new: a server that gives a token it gave before would
// be followed forever, a call that never returns. Callers throw their own error, naming the
// list, when fresh() is false.
//
//   PageTokens tokens;
//   do { page = get(token); token = page.next; } while (!token.empty() && check(tokens, token));
#pragma once

#include <cstddef>
#include <functional>
#include <set>
#include <string>

namespace falcon {

class PageTokens {
 public:
  // Counts a page that gave `next`: true when `next` is the end ("") or a token not given
  // before, false when it was. Keeps a hash of each token, not the token (a token may be large).
  bool fresh(const std::string& next) {
    ++pages_;
    return next.empty() || seen_.insert(std::hash<std::string>{}(next)).second;
  }
  // Pages counted so far.
  std::size_t pages() const { return pages_; }

 private:
  std::set<std::size_t> seen_;
  std::size_t pages_ = 0;
};

}  // namespace falcon
