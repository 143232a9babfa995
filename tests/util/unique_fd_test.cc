// UniqueFd and the read/write helpers (util/unique_fd.h).
#include "util/unique_fd.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace falcon {
namespace {

bool is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1 || errno != EBADF; }

TEST(UniqueFd, ClosesWhatItOwnsAndNothingElse) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  {
    UniqueFd read_end(fds[0]);
    UniqueFd write_end(fds[1]);
    UniqueFd moved(std::move(write_end));
    EXPECT_FALSE(write_end.valid());
    EXPECT_EQ(moved.get(), fds[1]);
    const int kept = read_end.release();
    EXPECT_FALSE(read_end);
    EXPECT_EQ(kept, fds[0]);
  }
  EXPECT_TRUE(is_open(fds[0]));  // released: not closed
  EXPECT_FALSE(is_open(fds[1]));
  ::close(fds[0]);
  UniqueFd failed(-1);  // a failed open() is held as "none"
  EXPECT_FALSE(failed);
}

TEST(UniqueFd, MoveAssignmentClosesTheOldDescriptor) {
  int a[2];
  int b[2];
  ASSERT_EQ(::pipe(a), 0);
  ASSERT_EQ(::pipe(b), 0);
  UniqueFd fd(a[0]);
  fd = UniqueFd(b[0]);
  EXPECT_FALSE(is_open(a[0]));
  EXPECT_EQ(fd.get(), b[0]);
  for (int x : {a[1], b[1]}) ::close(x);
}

TEST(UniqueFd, WriteAllAndReadAllMoveEveryByteThroughAPipe) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  UniqueFd read_end(fds[0]);
  UniqueFd write_end(fds[1]);
  const std::string data(1 << 20, 'x');  // larger than a pipe buffer: short writes happen
  std::thread writer([&] {
    EXPECT_EQ(write_all(write_end.get(), data), 0);
    write_end.reset();
  });
  std::string got = "prefix:";
  EXPECT_EQ(read_all(read_end.get(), got), 0);
  writer.join();
  EXPECT_EQ(got, "prefix:" + data);
  EXPECT_EQ(write_all(-1, "x"), EBADF);
  EXPECT_EQ(read_all(-1, got), EBADF);
}

}  // namespace
}  // namespace falcon
