// A small writer of the Prometheus text exposition format (0.0.4): families with HELP and TYPE,
// samples with escaped label values, and a histogram of request latencies.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace falcon::serve {

using Labels = std::vector<std::pair<std::string, std::string>>;

class PrometheusText {
 public:
  // Starts a family; `type` is "counter", "gauge" or "histogram".
  void family(const std::string& name, const char* type, const std::string& help);
  // One sample line: name{labels} value.
  void sample(const std::string& name, const Labels& labels, double value);
  const std::string& text() const { return out_; }

 private:
  std::string out_;
};

// `value` with \, " and newline escaped as the format asks.
std::string escape_label_value(const std::string& value);

// Cumulative latency buckets (seconds) of a histogram, plus +Inf, sum and count.
class LatencyHistogram {
 public:
  static constexpr std::array<double, 12> kBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                     0.05,   0.1,   0.25,   0.5,   1,    5};
  void observe(double seconds);
  // The _bucket, _sum and _count samples of family `name` with `labels`.
  void write(PrometheusText& out, const std::string& name, const Labels& labels) const;

 private:
  std::array<std::uint64_t, kBounds.size()> buckets_{};  // non-cumulative counts
  std::uint64_t count_ = 0;
  double sum_ = 0;
};

}  // namespace falcon::serve
