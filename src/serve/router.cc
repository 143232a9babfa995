#include "serve/router.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace falcon::serve {

std::size_t Router::add(std::string method, std::string path, bool rest) {
  if (path.empty() || path.front() != '/') {
    throw std::logic_error(fmt::format("route {}: must start with /", path));
  }
  Route r{std::move(method), std::move(path), {}, rest};
  if (r.path != "/") {
    std::size_t pos = 1;
    while (pos <= r.path.size()) {
      std::size_t slash = r.path.find('/', pos);
      if (slash == std::string::npos) slash = r.path.size();
      const std::string_view seg = std::string_view(r.path).substr(pos, slash - pos);
      if (seg.empty()) throw std::logic_error(fmt::format("route {}: empty segment", r.path));
      const bool param = seg.front() == '{';
      if (param && (seg.size() < 3 || seg.back() != '}')) {
        throw std::logic_error(fmt::format("route {}: malformed parameter {}", r.path, seg));
      }
      r.segments.push_back({param ? std::string() : std::string(seg), param});
      pos = slash + 1;
    }
  }
  if (rest && (r.segments.empty() || !r.segments.back().param)) {
    throw std::logic_error(fmt::format("route {}: `rest` needs a last parameter", r.path));
  }
  for (const Route& other : routes_) {
    if (other.method == r.method && other.path == r.path) {
      throw std::logic_error(fmt::format("route {} {} added twice", r.method, r.path));
    }
  }
  routes_.push_back(std::move(r));
  return routes_.size() - 1;
}

bool Router::matches(const Route& r, const std::vector<std::string>& segments,
                     std::vector<std::string>* params) {
  const std::size_t n = r.segments.size();
  if (r.rest ? segments.size() < n : segments.size() != n) return false;
  for (std::size_t i = 0; i < n; ++i) {
    const Segment& s = r.segments[i];
    if (!s.param) {
      if (segments[i] != s.literal) return false;
      continue;
    }
    if (segments[i].empty()) return false;  // a parameter is never empty
    if (r.rest && i + 1 == n) {
      for (std::size_t j = i; j < segments.size(); ++j) {
        if (segments[j].empty()) return false;
      }
    }
  }
  if (params != nullptr) {
    params->clear();
    for (std::size_t i = 0; i < n; ++i) {
      if (!r.segments[i].param) continue;
      if (r.rest && i + 1 == n) {
        std::string joined = segments[i];
        for (std::size_t j = i + 1; j < segments.size(); ++j) joined += "/" + segments[j];
        params->push_back(std::move(joined));
      } else {
        params->push_back(segments[i]);
      }
    }
  }
  return true;
}

Router::Match Router::match(std::string_view method, const std::vector<std::string>& segments,
                            std::vector<std::string>& params) const {
  Match m;
  for (std::size_t i = 0; i < routes_.size(); ++i) {
    const Route& r = routes_[i];
    if (r.method != method) continue;
    if (matches(r, segments, &params)) {
      m.kind = Match::kFound;
      m.route = i;
      return m;
    }
  }
  for (const Route& r : routes_) {
    if (matches(r, segments, nullptr) &&
        std::find(m.allowed.begin(), m.allowed.end(), r.method) == m.allowed.end()) {
      m.allowed.push_back(r.method);
    }
  }
  if (!m.allowed.empty()) {
    m.kind = Match::kWrongMethod;
    if (std::find(m.allowed.begin(), m.allowed.end(), "GET") != m.allowed.end()) {
      m.allowed.push_back("HEAD");
    }
  }
  params.clear();
  return m;
}

}  // namespace falcon::serve
