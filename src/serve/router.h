// Routes of `falcon serve` matched by path segments: literal segments and {name} parameters, and
// optionally a last parameter that takes the rest of the path. No regular expressions, no
// recursion: matching a request walks each route's segments once, whatever the request sends.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace falcon::serve {

class Router {
 public:
  // Adds `method path`, path in the OpenAPI spelling ("/v1/workloads/{cluster}/{name}"); with
  // `rest`, its last {parameter} takes every remaining segment, joined by "/" (at least one,
  // not empty). Returns the route's index (0, 1, ...). Throws std::logic_error for a path that is
  // not "/"-separated literal and {name} segments, or a route added twice.
  std::size_t add(std::string method, std::string path, bool rest = false);

  struct Match {
    enum Kind { kFound, kNoRoute, kWrongMethod };
    Kind kind = kNoRoute;
    std::size_t route = 0;             // kFound: the index add() returned
    std::vector<std::string> allowed;  // kWrongMethod: the methods the path has, for Allow
  };
  // The first route, in the order added, whose segments match `segments` (decoded) for
  // `method`; its parameters' values go to `params`, in order.
  Match match(std::string_view method, const std::vector<std::string>& segments,
              std::vector<std::string>& params) const;

  const std::string& method(std::size_t route) const { return routes_[route].method; }
  const std::string& path(std::size_t route) const { return routes_[route].path; }
  std::size_t size() const { return routes_.size(); }

 private:
  struct Segment {
    std::string literal;  // empty for a parameter
    bool param = false;
  };
  struct Route {
    std::string method;
    std::string path;
    std::vector<Segment> segments;
    bool rest = false;
  };
  static bool matches(const Route& r, const std::vector<std::string>& segments,
                      std::vector<std::string>* params);
  std::vector<Route> routes_;
};

}  // namespace falcon::serve
