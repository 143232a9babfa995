#include "serve/prometheus_text.h"

#include <fmt/format.h>

#include <cmath>

namespace falcon::serve {
namespace {

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15)
    return fmt::format("{}", static_cast<long long>(v));
  return fmt::format("{}", v);
}

}  // namespace

std::string escape_label_value(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void PrometheusText::family(const std::string& name, const char* type, const std::string& help) {
  std::string escaped_help;
  for (const char c : help) {
    if (c == '\\') {
      escaped_help += "\\\\";
    } else if (c == '\n') {
      escaped_help += "\\n";
    } else {
      escaped_help += c;
    }
  }
  out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, escaped_help, name, type);
}

void PrometheusText::sample(const std::string& name, const Labels& labels, double value) {
  out_ += name;
  if (!labels.empty()) {
    out_ += '{';
    for (std::size_t i = 0; i < labels.size(); ++i) {
      if (i > 0) out_ += ',';
      out_ += fmt::format("{}=\"{}\"", labels[i].first, escape_label_value(labels[i].second));
    }
    out_ += '}';
  }
  out_ += ' ';
  out_ += format_value(value);
  out_ += '\n';
}

void LatencyHistogram::observe(double seconds) {
  ++count_;
  sum_ += seconds;
  for (std::size_t i = 0; i < kBounds.size(); ++i) {
    if (seconds <= kBounds[i]) {
      ++buckets_[i];
      return;
    }
  }
}

void LatencyHistogram::write(PrometheusText& out, const std::string& name,
                             const Labels& labels) const {
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < kBounds.size(); ++i) {
    cumulative += buckets_[i];
    Labels with_le = labels;
    with_le.emplace_back("le", format_value(kBounds[i]));
    out.sample(name + "_bucket", with_le, static_cast<double>(cumulative));
  }
  Labels inf = labels;
  inf.emplace_back("le", "+Inf");
  out.sample(name + "_bucket", inf, static_cast<double>(count_));
  out.sample(name + "_sum", labels, sum_);
  out.sample(name + "_count", labels, static_cast<double>(count_));
}

}  // namespace falcon::serve
