// A stack of lines that holds little memory: lines pushed newest first come back oldest first
// (a tail is read newest-first and printed oldest-first), and beyond a memory budget the earlier
// pushes wait in an unlinked temporary file. So a tail of a million lines costs a temporary file
// of their size, not a million log entries in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace falcon::logs {

class LineSpool {
 public:
  // Holds at most `memory_bytes` of lines (4 bytes more per line) in memory, in one buffer
  // allocated on the first push, plus 64 KiB for reading the file back.
  explicit LineSpool(std::size_t memory_bytes);
  ~LineSpool();  // closes (and so frees) the temporary file
  LineSpool(const LineSpool&) = delete;
  LineSpool& operator=(const LineSpool&) = delete;

  // Adds a line. The first push that passes the budget makes the temporary file ($TMPDIR, else
  // /tmp; mode 0600, unlinked at once). Throws LogRetrievalError naming the file when it cannot
  // be made or written. Not after pop().
  void push(std::string_view line);

  // The line pushed last that was not popped yet; nullopt when none is left. Throws
  // LogRetrievalError when the temporary file cannot be read.
  std::optional<std::string> pop();

  std::size_t size() const { return count_; }
  std::size_t memory_bytes() const { return buffer_.size(); }  // records held in memory now
  bool spilled() const { return fd_ >= 0; }

 private:
  void spill();
  void read_at(std::int64_t offset, std::size_t n, char* out);

  std::size_t budget_;
  // The latest pushes, in push order, as the file holds them: `<line bytes><uint32 length>`.
  std::string buffer_;
  std::size_t count_ = 0;
  int fd_ = -1;
  std::string path_;            // for messages; the file itself is already unlinked
  std::int64_t file_size_ = 0;  // records are `<line bytes><uint32 length>`
  std::int64_t read_end_ = 0;   // records before this offset are still to be popped
  std::string block_;           // a window of the file for reading it backwards
  std::int64_t block_start_ = 0;
};

}  // namespace falcon::logs
