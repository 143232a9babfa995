// Small helpers shared by the C++ benchmarks: a scratch directory and process CPU time.
#pragma once

#include <stdlib.h>
#include <sys/resource.h>
#include <sys/time.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>

namespace falcon::bench {

// A scratch directory under $TMPDIR, removed with everything in it when destroyed.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "falcon-bench-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// User + system CPU seconds of RUSAGE_SELF or RUSAGE_CHILDREN (reaped children) so far.
inline double cpu_seconds(int who) {
  rusage usage{};
  getrusage(who, &usage);
  const auto seconds = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// The VALUE of `--name=VALUE` on the command line, if given.
inline std::optional<std::string> flag_text(int argc, char** argv, const std::string& name) {
  const std::string prefix = "--" + name + "=";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.starts_with(prefix)) return a.substr(prefix.size());
  }
  return std::nullopt;
}

// `--name=N` as a number, else `fallback`.
inline long flag(int argc, char** argv, const std::string& name, long fallback) {
  const std::optional<std::string> text = flag_text(argc, argv, name);
  return text ? std::strtol(text->c_str(), nullptr, 10) : fallback;
}

}  // namespace falcon::bench
