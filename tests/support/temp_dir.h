// A temporary directory removed (recursively) when the object goes out of scope.
#pragma once

#include <filesystem>
#include <string>

namespace falcon::testing {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // Writes `content` to `relative` under the directory (creating parents); returns the path.
  std::filesystem::path write(const std::string& relative, const std::string& content,
                              bool executable = false) const;

 private:
  std::filesystem::path path_;
};

// The whole content of a file.
std::string read_file(const std::filesystem::path& path);

}  // namespace falcon::testing
