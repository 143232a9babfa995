// Splits staged NDJSON log objects (an entries:copy operation's output, a sink archive's hourly
// files: unordered, possibly repeating entries) into one stream of lines per rank, in the order
// entries:list returns them: by timestamp, then insertId, each entry once.
//
// Streamed, parallel and bounded: an external merge sort. Phase 1 (add_objects) decodes the
// objects on `threads` threads, each keeping decoded entries in a buffer of
// memory_bytes / threads; a full buffer is sorted by (rank, timestamp, insertId) and appended as
// a run to the thread's unlinked temporary file. Phase 2 (write_ranks) merges, rank by rank on
// `threads` threads, that rank's part of every run, dropping repeats of (timestamp, insertId),
// and hands each line to the rank's writer. Memory is the run buffers in phase 1 and one small
// read buffer per run and rank being merged in phase 2 (plus what the writers hold), whatever the
// size of the logs; the temporary files take the decoded entries' size on disk.
//
//   RankSplitter splitter(query, {.threads = 2});
//   splitter.add_objects(objects.size(), [&](std::size_t i, const ChunkSink& sink) {
//     storage.download_object(bucket, objects[i].name, sink);
//   });
//   splitter.write_ranks(splitter.ranks(), [&](int rank) { return open_upload(rank); });
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "logs/rank_query.h"

namespace falcon::logs {

struct SplitterOptions {
  std::size_t threads = 2;                    // decoding and merging threads (at least 1)
  std::size_t memory_bytes = 24ULL << 20;     // run buffers of all threads together
  std::size_t merge_read_bytes = 8ULL << 20;  // read buffers of one rank's merge, all runs
  std::string temp_dir;                       // empty: $TMPDIR, else /tmp
};

// Where one rank's lines go.
class RankLineWriter {
 public:
  virtual ~RankLineWriter() = default;
  // `line` ends in '\n'.
  virtual void write(std::string_view line) = 0;
  virtual void finish() = 0;
};

// What went to one rank.
struct RankSplit {
  std::int64_t lines = 0;
  std::int64_t bytes = 0;
  std::int64_t first_nanos = 0;  // valid when lines > 0
  std::int64_t last_nanos = 0;
};

class RankSplitter {
 public:
  using ChunkSink = std::function<void(std::string_view)>;
  // Streams object `index`'s bytes to the sink, in pieces split anywhere.
  using ObjectReader = std::function<void(std::size_t index, const ChunkSink& sink)>;
  // Told after each object: how many are done, how many lines of the query they held so far.
  using ObjectProgress = std::function<void(std::size_t objects_done, std::int64_t lines)>;

  // No I/O.
  RankSplitter(const RankQuery& query, SplitterOptions options);
  ~RankSplitter();
  RankSplitter(const RankSplitter&) = delete;
  RankSplitter& operator=(const RankSplitter&) = delete;

  // Phase 1: decodes objects 0..count-1, `read` called for each on one of the threads. Blocks.
  // Rethrows the first exception of a `read` (the other threads stop after their object);
  // throws LogRetrievalError naming the object (`name_of`) and line that is not a LogEntry, or
  // the temporary file that cannot be written. May be called more than once before write_ranks.
  void add_objects(std::size_t count, const ObjectReader& read,
                   const std::function<std::string(std::size_t)>& name_of,
                   const ObjectProgress& progress = {});

  // The ranks that have lines.
  std::set<int> ranks() const;
  // Entries of the query decoded (repeats included) and repeats dropped so far.
  std::int64_t entries_decoded() const { return decoded_; }
  std::int64_t duplicates() const { return duplicates_; }

  // Phase 2: for every rank of `ranks`, `open(rank)` gets the rank's lines in order, then
  // finish(). `open` is called on the merging threads, several at once: it must be thread-safe.
  // Ranks without lines get an open() and a finish() too. Blocks. Rethrows the first exception of a
  // writer. Call once, after add_objects.
  std::map<int, RankSplit> write_ranks(
      const std::set<int>& ranks,
      const std::function<std::unique_ptr<RankLineWriter>(int rank)>& open);

 private:
  struct Run;
  struct Worker;
  void merge_rank(int rank, RankLineWriter& out, RankSplit& split);

  const RankQuery& query_;
  SplitterOptions options_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<Run> runs_;
  std::int64_t decoded_ = 0;
  std::atomic<std::int64_t> duplicates_{0};
};

}  // namespace falcon::logs
