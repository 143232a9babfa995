#include "fleet/pod_logs.h"

#include <time.h>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "fleet/log_sink.h"

namespace falcon::fleet {
namespace {

constexpr int kFailLines = 3;
constexpr int kMarkerLines = 3;  // XPK Start, XPK End, EXIT_CODE
constexpr char kSuffixAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";

double unit(std::uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

std::int64_t at_fraction(std::int64_t start, std::int64_t duration, double fraction) {
  return start + static_cast<std::int64_t>(std::floor(static_cast<double>(duration) * fraction));
}

std::string step_text(const PodScript& s, int step, int sub) {
  const std::int64_t duration = std::max<std::int64_t>(0, s.end_ns - s.start_ns);
  const double interval_s =
      s.steps > 0 ? static_cast<double>(duration) * 0.93 / s.steps / 1e9 : 0.0;
  const std::uint64_t r =
      mix64(s.seed ^ (static_cast<std::uint64_t>(step) * 0x9E3779B97F4A7C15ULL));
  const double progress = static_cast<double>(step) / std::max(1, s.steps);
  const double loss = 0.35 + 2.2 * std::exp(-3.0 * progress) + (unit(r) - 0.5) * 0.02;
  const double step_time = std::max(0.001, interval_s * (1.0 + (unit(mix64(r)) - 0.5) * 0.06));
  switch (sub % 4) {
    case 0:
      return fmt::format("step={} loss={:.4f} step_time={:.3f}s tokens/s={:.1f}", step, loss,
                         step_time, 524288.0 / step_time);
    case 1:
      return fmt::format("step={} grad_norm={:.4f} learning_rate={:.3e}", step,
                         0.4 + unit(mix64(r + 1)) * 0.8, 3e-4 * std::min(1.0, 10 * progress));
    case 2:
      return fmt::format("step={} hbm_used_gib={:.2f} hbm_peak_gib={:.2f}", step,
                         11.5 + unit(mix64(r + 2)), 14.0 + unit(mix64(r + 3)) * 0.5);
    default:
      return fmt::format("step={} mfu={:.2f}% tflops_per_device={:.1f}", step,
                         48.0 + unit(mix64(r + 4)) * 4, 131.0 + unit(mix64(r + 5)) * 9);
  }
}

}  // namespace

std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

std::uint64_t hash_string(std::string_view text, std::uint64_t seed) {
  std::uint64_t h = 0xCBF29CE484222325ULL ^ seed;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001B3ULL;
  }
  return mix64(h);
}

std::string make_pod_name(const std::string& workload, int slice, int worker, std::uint64_t seed) {
  std::string suffix;
  std::uint64_t bits = mix64(seed);
  constexpr std::size_t kAlphabet = sizeof(kSuffixAlphabet) - 1;
  for (int i = 0; i < 5; ++i) {
    suffix += kSuffixAlphabet[bits % kAlphabet];
    bits /= kAlphabet;
  }
  return fmt::format("{}-slice-job-{}-{}-{}", workload, slice, worker, suffix);
}

std::string format_date_command(std::int64_t time_ns) {
  time_t secs = static_cast<time_t>(time_ns / 1'000'000'000);
  if (time_ns < 0 && time_ns % 1'000'000'000 != 0) --secs;
  struct tm tm_utc {};
  gmtime_r(&secs, &tm_utc);
  char buf[64];
  const std::size_t n = strftime(buf, sizeof buf, "%a %b %e %H:%M:%S UTC %Y", &tm_utc);
  return std::string(buf, n);
}

std::size_t PodScript::line_count() const {
  const std::size_t step_lines = static_cast<std::size_t>(std::max(0, steps)) *
                                 static_cast<std::size_t>(std::max(1, lines_per_step));
  return kMarkerLines + step_lines + (failing ? kFailLines : 0);
}

LogLine PodScript::line(std::size_t index) const {
  const std::int64_t duration = std::max<std::int64_t>(0, end_ns - start_ns);
  const std::size_t per_step = static_cast<std::size_t>(std::max(1, lines_per_step));
  const std::size_t step_lines = static_cast<std::size_t>(std::max(0, steps)) * per_step;
  const auto offset = static_cast<std::int64_t>(index);
  LogLine out;
  if (index == 0) {
    const std::int64_t stagger =
        std::min<std::int64_t>(duration / 200, static_cast<std::int64_t>(seed % 997) * 1'000'000);
    out.time_ns = start_ns + stagger;
    out.text = "XPK Start: " + format_date_command(out.time_ns);
    return out;
  }
  if (index <= step_lines) {
    const std::size_t s = index - 1;
    const int step = static_cast<int>(s / per_step) + 1;
    const int sub = static_cast<int>(s % per_step);
    out.time_ns = at_fraction(start_ns, duration, 0.05 + 0.93 * step / std::max(1, steps)) + offset;
    out.text = step_text(*this, step, sub);
    return out;
  }
  std::size_t rest = index - 1 - step_lines;
  if (failing) {
    if (rest < static_cast<std::size_t>(kFailLines)) {
      out.time_ns = at_fraction(start_ns, duration, 0.985) + offset;
      out.is_stderr = true;
      switch (rest) {
        case 0:
          out.text = "Traceback (most recent call last):";
          break;
        case 1:
          out.text = "  File \"/app/train.py\", line 212, in <module>";
          break;
        default:
          out.text =
              fmt::format("RuntimeError: simulated training failure at step {} (exit code {})",
                          std::max(0, steps), exit_code);
          break;
      }
      return out;
    }
    rest -= kFailLines;
  }
  // The end markers are the pod's last nanoseconds, so the run's lines are all written by the
  // time it ends; a run too short for its lines pushes them later, still strictly increasing.
  const auto from_end = static_cast<std::int64_t>(line_count() - 1 - index);
  out.time_ns = std::max(end_ns - from_end, at_fraction(start_ns, duration, 0.985) + offset);
  if (rest == 0) {
    out.text = "XPK End: " + format_date_command(end_ns);
  } else {
    out.text = fmt::format("EXIT_CODE={}", exit_code);
  }
  return out;
}

LogLine PodScript::termination_line(std::int64_t time_ns, int which) {
  LogLine out;
  out.time_ns = time_ns + which;
  out.text = which == 0 ? "XPK End: " + format_date_command(time_ns) : "EXIT_CODE=143";
  return out;
}

int steps_for_total_lines(int total_lines, bool failing) {
  return std::max(0, total_lines - kMarkerLines - (failing ? kFailLines : 0));
}

PodLogWriter::PodLogWriter(const PodIdentity& pod) : pod_(pod) {
  nlohmann::json labels = {
      {"compute.googleapis.com/resource_name", pod.node_name},
      {"k8s-pod/batch_kubernetes_io/job-name",
       fmt::format("{}-slice-job-{}", pod.workload, pod.slice)},
      {"k8s-pod/jobset_sigs_k8s_io/job-index", std::to_string(pod.slice)},
      {"k8s-pod/jobset_sigs_k8s_io/jobset-name", pod.workload},
      {"k8s-pod/jobset_sigs_k8s_io/replicatedjob-name", "slice-job"},
      {"k8s-pod/jobset_sigs_k8s_io/restart-attempt", std::to_string(pod.restart_attempt)},
      {"k8s-pod/kueue_x-k8s_io/podset", "slice-job"},
      {"k8s-pod/xpk_google_com/workload", pod.workload},
      {"logging.gke.io/top_level_controller_name", pod.workload},
      {"logging.gke.io/top_level_controller_type", "JobSet"},
  };
  if (!pod.omit_completion_index) {
    labels["k8s-pod/batch_kubernetes_io/job-completion-index"] = std::to_string(pod.worker);
  }
  nlohmann::json out = {
      {"logName", fmt::format("projects/{}/logs/stdout", pod.project)},
      {"resource",
       {{"type", "k8s_container"},
        {"labels",
         {{"project_id", pod.project},
          {"location", pod.location},
          {"cluster_name", pod.cluster_name},
          {"namespace_name", pod.namespace_name},
          {"pod_name", pod.pod_name},
          {"container_name", pod.container_name}}}}},
      {"labels", std::move(labels)},
      {"severity", "INFO"},
  };
  nlohmann::json err = out;
  err["logName"] = fmt::format("projects/{}/logs/stderr", pod.project);
  err["severity"] = "ERROR";
  stdout_shared_ = std::make_shared<const nlohmann::json>(std::move(out));
  stderr_shared_ = std::make_shared<const nlohmann::json>(std::move(err));
}

nlohmann::json PodLogWriter::entry(const LogLine& line) const {
  return make_log_entry(*shared(line.is_stderr), TextLine{line.time_ns, line.text});
}

}  // namespace falcon::fleet
