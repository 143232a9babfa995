#include "logs/rank_splitter.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <queue>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "falcon/errors.h"
#include "logs/staged_entry.h"

namespace falcon::logs {
namespace {

// A record in a run buffer or file: this header, the insertId, the line (without '\n').
struct RecordHeader {
  std::int32_t rank;
  std::uint32_t id_size;
  std::int64_t timestamp;
  std::uint32_t line_size;
  std::uint32_t pad;
};
static_assert(sizeof(RecordHeader) == 24);

RecordHeader header_at(const char* p) {
  RecordHeader h;
  std::memcpy(&h, p, sizeof h);
  return h;
}

std::string_view id_at(const char* p, const RecordHeader& h) {
  return {p + sizeof(RecordHeader), h.id_size};
}

[[noreturn]] void fail_io(const char* what, const std::string& path) {
  throw LogRetrievalError(fmt::format("cannot {} the temporary file {} of a log split: {}", what,
                                      path, std::strerror(errno)));
}

// Runs `task(i)` for i in [0, count) on `threads` threads; rethrows the first exception after
// every thread stopped (a thread stops taking tasks once one failed).
void parallel_for(std::size_t count, std::size_t threads,
                  const std::function<void(std::size_t, std::size_t)>& task) {
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr first;
  std::mutex mutex;
  const auto body = [&](std::size_t worker) {
    for (;;) {
      if (failed.load()) return;
      const std::size_t i = next.fetch_add(1);
      if (i >= count) return;
      try {
        task(worker, i);
      } catch (...) {
        std::lock_guard lock(mutex);
        if (!first) first = std::current_exception();
        failed = true;
        return;
      }
    }
  };
  threads = std::max<std::size_t>(1, std::min(threads, count));
  std::vector<std::thread> pool;
  for (std::size_t w = 1; w < threads; ++w) pool.emplace_back(body, w);
  body(0);
  for (auto& t : pool) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace

// One sorted run: where each rank's records are in its worker's file.
struct RankSplitter::Run {
  std::size_t worker = 0;
  std::map<int, std::pair<std::int64_t, std::int64_t>> ranks;  // rank -> (offset, bytes)
};

// One decoding thread's state: its decoder, its run buffer and its temporary file.
struct RankSplitter::Worker {
  explicit Worker(const RankQuery& query) : decoder(query) {}
  ~Worker() {
    if (fd >= 0) ::close(fd);
  }

  StagedEntryDecoder decoder;
  std::string arena;                   // records
  std::vector<std::uint64_t> offsets;  // of the records in arena
  std::int64_t decoded = 0;
  int fd = -1;
  std::string path;
  std::int64_t file_size = 0;
  std::string pending;  // a line split across pieces of an object
  std::int64_t line_number = 0;

  void add(const StagedEntry& e) {
    const RecordHeader h{e.rank, static_cast<std::uint32_t>(e.insert_id.size()), e.timestamp_nanos,
                         static_cast<std::uint32_t>(e.line.size()), 0};
    offsets.push_back(arena.size());
    arena.append(reinterpret_cast<const char*>(&h), sizeof h);
    arena.append(e.insert_id);
    arena.append(e.line);
    ++decoded;
  }

  // Sorts the buffer and appends it to the file as a run.
  Run spill(std::size_t self, const std::string& temp_dir) {
    Run run;
    run.worker = self;
    if (offsets.empty()) return run;
    const char* base = arena.data();
    std::sort(offsets.begin(), offsets.end(), [base](std::uint64_t a, std::uint64_t b) {
      const RecordHeader ha = header_at(base + a);
      const RecordHeader hb = header_at(base + b);
      if (ha.rank != hb.rank) return ha.rank < hb.rank;
      if (ha.timestamp != hb.timestamp) return ha.timestamp < hb.timestamp;
      return id_at(base + a, ha) < id_at(base + b, hb);
    });
    if (fd < 0) {
      path = fmt::format("{}/falcon-split-XXXXXX", temp_dir);
      fd = ::mkostemp(path.data(), O_CLOEXEC);
      if (fd < 0) fail_io("create", path);
      ::unlink(path.c_str());
    }
    std::string out;
    out.reserve(std::min<std::size_t>(arena.size(), 1 << 20));
    const auto flush = [&] {
      std::size_t written = 0;
      while (written < out.size()) {
        const ssize_t n = ::pwrite(fd, out.data() + written, out.size() - written,
                                   file_size + static_cast<std::int64_t>(written));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) fail_io("write", path);
        written += static_cast<std::size_t>(n);
      }
      file_size += static_cast<std::int64_t>(out.size());
      out.clear();
    };
    std::int64_t at = file_size;
    for (const std::uint64_t o : offsets) {
      const RecordHeader h = header_at(base + o);
      const std::size_t size = sizeof h + h.id_size + h.line_size;
      auto [it, added] = run.ranks.try_emplace(h.rank, at, 0);
      it->second.second += static_cast<std::int64_t>(size);
      at += static_cast<std::int64_t>(size);
      out.append(base + o, size);
      if (out.size() >= (1 << 20)) flush();
    }
    flush();
    arena.clear();
    offsets.clear();
    return run;
  }
};

RankSplitter::RankSplitter(const RankQuery& query, SplitterOptions options)
    : query_(query), options_(std::move(options)) {
  options_.threads = std::max<std::size_t>(1, options_.threads);
  if (options_.temp_dir.empty()) {
    const char* tmp = ::getenv("TMPDIR");
    options_.temp_dir = tmp != nullptr && tmp[0] == '/' ? tmp : "/tmp";
  }
}

RankSplitter::~RankSplitter() = default;

void RankSplitter::add_objects(std::size_t count, const ObjectReader& read,
                               const std::function<std::string(std::size_t)>& name_of,
                               const ObjectProgress& progress) {
  while (workers_.size() < options_.threads) {
    workers_.push_back(std::make_unique<Worker>(query_));
  }
  const std::size_t budget =
      std::max<std::size_t>(options_.memory_bytes / options_.threads, std::size_t{64} << 10);
  std::mutex mutex;  // runs_, progress
  std::size_t done = 0;
  std::int64_t lines = 0;
  parallel_for(count, options_.threads, [&](std::size_t self, std::size_t index) {
    Worker& w = *workers_[self];
    // Reserve what the records may take (the offsets take 8 bytes a record more).
    if (w.arena.capacity() < budget) w.arena.reserve(budget - budget / 8);
    const std::int64_t before = w.decoded;
    w.pending.clear();
    w.line_number = 0;
    const auto take_line = [&](std::string_view line) {
      ++w.line_number;
      std::optional<StagedEntry> entry;
      try {
        entry = w.decoder.decode(line);
      } catch (const std::invalid_argument& e) {
        throw LogRetrievalError(fmt::format("{} line {} is not a LogEntry: {}", name_of(index),
                                            w.line_number, e.what()));
      }
      if (!entry) return;
      w.add(*entry);
      if (w.arena.size() + w.offsets.size() * sizeof(std::uint64_t) >= budget - budget / 8) {
        Run run = w.spill(self, options_.temp_dir);
        std::lock_guard lock(mutex);
        runs_.push_back(std::move(run));
      }
    };
    read(index, [&](std::string_view piece) {
      while (!piece.empty()) {
        const auto newline = piece.find('\n');
        if (newline == std::string_view::npos) {
          w.pending.append(piece);
          return;
        }
        if (w.pending.empty()) {
          take_line(piece.substr(0, newline));
        } else {
          w.pending.append(piece.substr(0, newline));
          take_line(w.pending);
          w.pending.clear();
        }
        piece.remove_prefix(newline + 1);
      }
    });
    if (!w.pending.empty()) {  // a last line without '\n'
      take_line(w.pending);
      w.pending.clear();
    }
    std::lock_guard lock(mutex);
    ++done;
    lines += w.decoded - before;
    if (progress) progress(done, lines);
  });
  for (std::size_t self = 0; self < workers_.size(); ++self) {
    Run run = workers_[self]->spill(self, options_.temp_dir);
    if (!run.ranks.empty()) runs_.push_back(std::move(run));
  }
  decoded_ = 0;
  for (const auto& w : workers_) {
    decoded_ += w->decoded;
    w->arena = std::string();  // the run buffers are not needed until more objects come
    w->offsets = std::vector<std::uint64_t>();
  }
}

std::set<int> RankSplitter::ranks() const {
  std::set<int> out;
  for (const Run& run : runs_) {
    for (const auto& [rank, where] : run.ranks) out.insert(rank);
  }
  return out;
}

namespace {

// Reads one run's records of one rank, through a buffer.
class SegmentReader {
 public:
  SegmentReader(int fd, const std::string& path, std::int64_t offset, std::int64_t size,
                std::size_t buffer_bytes)
      : fd_(fd), path_(path), next_(offset), end_(offset + size), buffer_size_(buffer_bytes) {}

  // Loads the next record; false at the end.
  bool advance() {
    if (!fill(sizeof(RecordHeader))) return false;
    header = header_at(buffer_.data() + pos_);
    const std::size_t size = sizeof(RecordHeader) + header.id_size + header.line_size;
    if (!fill(size)) {
      throw LogRetrievalError(
          fmt::format("the temporary file {} of a log split ends inside a "
                      "record",
                      path_));
    }
    const char* p = buffer_.data() + pos_ + sizeof(RecordHeader);
    id = std::string_view(p, header.id_size);
    line = std::string_view(p + header.id_size, header.line_size);
    pos_ += size;
    return true;
  }

  RecordHeader header{};
  std::string_view id;
  std::string_view line;

 private:
  // Makes `n` bytes available at pos_; false when the segment has fewer left.
  bool fill(std::size_t n) {
    if (buffer_.size() - pos_ >= n) return true;
    buffer_.erase(0, pos_);
    pos_ = 0;
    const std::size_t want = std::max(n, buffer_size_);
    while (buffer_.size() < want && next_ < end_) {
      const std::size_t chunk = static_cast<std::size_t>(
          std::min<std::int64_t>(end_ - next_, static_cast<std::int64_t>(want - buffer_.size())));
      const std::size_t old = buffer_.size();
      buffer_.resize(old + chunk);
      const ssize_t got = ::pread(fd_, buffer_.data() + old, chunk, next_);
      if (got < 0 && errno == EINTR) {
        buffer_.resize(old);
        continue;
      }
      if (got <= 0) fail_io("read", path_);
      buffer_.resize(old + static_cast<std::size_t>(got));
      next_ += got;
    }
    return buffer_.size() >= n;
  }

  int fd_;
  const std::string& path_;
  std::int64_t next_;
  std::int64_t end_;
  std::size_t buffer_size_;
  std::string buffer_;
  std::size_t pos_ = 0;
};

}  // namespace

void RankSplitter::merge_rank(int rank, RankLineWriter& out, RankSplit& split) {
  std::vector<const Run*> mine;
  for (const Run& run : runs_) {
    if (run.ranks.contains(rank)) mine.push_back(&run);
  }
  if (mine.empty()) return;
  const std::size_t buffer =
      std::clamp<std::size_t>(options_.merge_read_bytes / mine.size(), 4096, 1 << 20);
  std::vector<std::unique_ptr<SegmentReader>> readers;
  for (const Run* run : mine) {
    const auto [offset, size] = run->ranks.at(rank);
    const Worker& w = *workers_[run->worker];
    readers.push_back(std::make_unique<SegmentReader>(w.fd, w.path, offset, size, buffer));
  }
  const auto later = [&](std::size_t a, std::size_t b) {
    const SegmentReader& ra = *readers[a];
    const SegmentReader& rb = *readers[b];
    if (ra.header.timestamp != rb.header.timestamp) {
      return ra.header.timestamp > rb.header.timestamp;
    }
    return ra.id > rb.id;
  };
  std::priority_queue<std::size_t, std::vector<std::size_t>, decltype(later)> heap(later);
  for (std::size_t i = 0; i < readers.size(); ++i) {
    if (readers[i]->advance()) heap.push(i);
  }
  std::string line;
  std::string last_id;
  std::int64_t last_ts = 0;
  bool any = false;
  std::int64_t dropped = 0;
  while (!heap.empty()) {
    const std::size_t i = heap.top();
    heap.pop();
    SegmentReader& r = *readers[i];
    if (any && r.header.timestamp == last_ts && r.id == last_id) {
      ++dropped;  // the same entry again (copies and sinks repeat entries)
    } else {
      line.assign(r.line);
      line += '\n';
      out.write(line);
      if (!any) split.first_nanos = r.header.timestamp;
      split.last_nanos = r.header.timestamp;
      ++split.lines;
      split.bytes += static_cast<std::int64_t>(line.size());
      last_ts = r.header.timestamp;
      last_id.assign(r.id);
      any = true;
    }
    if (r.advance()) heap.push(i);
  }
  duplicates_ += dropped;
}

std::map<int, RankSplit> RankSplitter::write_ranks(
    const std::set<int>& ranks,
    const std::function<std::unique_ptr<RankLineWriter>(int rank)>& open) {
  const std::vector<int> order(ranks.begin(), ranks.end());
  std::vector<RankSplit> splits(order.size());
  parallel_for(order.size(), options_.threads, [&](std::size_t, std::size_t i) {
    std::unique_ptr<RankLineWriter> out = open(order[i]);
    merge_rank(order[i], *out, splits[i]);
    out->finish();
  });
  std::map<int, RankSplit> result;
  for (std::size_t i = 0; i < order.size(); ++i) result[order[i]] = splits[i];
  return result;
}

}  // namespace falcon::logs
