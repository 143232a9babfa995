// A small pool of connections shared by the threads of one store: a call borrows a connection
// for its statements and gives it back. At most `max` connections exist; a borrower waits when
// all are lent out. A broken connection (lost PostgreSQL session) is dropped, not given back.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "state/sql_connection.h"

namespace falcon::state {

class ConnectionPool {
 public:
  using Opener = std::function<std::unique_ptr<SqlConnection>()>;

  // `open` makes a new connection (and throws SqlError when it cannot). `max` >= 1.
  ConnectionPool(Opener open, int max);

  class Lent {
   public:
    Lent(ConnectionPool& pool, std::unique_ptr<SqlConnection> conn)
        : pool_(&pool), conn_(std::move(conn)) {}
    ~Lent();
    Lent(Lent&& other) noexcept = default;
    Lent(const Lent&) = delete;
    Lent& operator=(const Lent&) = delete;
    Lent& operator=(Lent&&) = delete;
    SqlConnection& operator*() const { return *conn_; }
    SqlConnection* operator->() const { return conn_.get(); }

   private:
    ConnectionPool* pool_;
    std::unique_ptr<SqlConnection> conn_;
  };

  // An idle connection, a new one when fewer than `max` exist, else waits for one to come back.
  // Throws SqlError when a new connection cannot be opened.
  Lent borrow();
  // Puts a connection made elsewhere (the one that ran the migrations) into the idle list.
  void adopt(std::unique_ptr<SqlConnection> conn);

 private:
  void give_back(std::unique_ptr<SqlConnection> conn);

  Opener open_;
  const int max_;
  std::mutex mutex_;
  std::condition_variable returned_;
  std::vector<std::unique_ptr<SqlConnection>> idle_;
  int existing_ = 0;  // idle + lent
};

}  // namespace falcon::state
