// The HTTP server of `falcon serve` on Boost.Beast (http_server.h). One session type per
// transport (plain TCP, TLS) over the same code (Session<Derived>); a table of connections for
// the connection limits; a bounded worker pool; a thread per streamed answer.
#include "serve/http_server.h"

#include <openssl/ssl.h>
#include <zlib.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <condition_variable>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <vector>

namespace falcon::serve {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::size_t kGzipMin = 1024;            // smaller answers are sent as they are
constexpr std::size_t kReadChunk = 4096;          // bytes asked of the socket at a time
constexpr std::size_t kStreamDiscard = 64 << 10;  // bytes a client may send during a stream
constexpr auto kTlsShutdown = std::chrono::seconds(1);
constexpr std::size_t kLingerBytes = 4 << 20;
constexpr std::size_t kEvictionSample = 64;
constexpr auto kLingerTime = std::chrono::seconds(2);

const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

bool compressible(std::string_view type) {
  return type.starts_with("application/json") || type.starts_with("text/") ||
         type.starts_with("application/javascript") || type.starts_with("image/svg");
}

std::string gzip(const std::string& in) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("gzip: deflateInit2 failed");
  }
  std::string out(deflateBound(&z, static_cast<uLong>(in.size())) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("gzip: deflate did not finish");
  return out;
}

// The refusal for a parse that failed with `ec`. `start_line_done`: the parser got past the
// request line; else `buffered` (the bytes not yet parsed) tells an overlong request target
// from overlong headers. nullopt: nothing to answer (the client went away, or was too slow: a
// timeout closes the connection).
std::optional<Refusal> refusal_for(const beast::error_code& ec, bool start_line_done,
                                   std::string_view buffered, const HttpLimits& limits) {
  if (ec == http::error::end_of_stream || ec == net::error::eof ||
      ec == net::error::operation_aborted || ec == net::error::connection_reset ||
      ec == beast::error::timeout) {
    return std::nullopt;
  }
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
    if (!start_line_done && buffered.size() > limits.max_target_bytes) {
      return Refusal{
          414, fmt::format("the request target is longer than {} bytes", limits.max_target_bytes)};
    }
    return Refusal{431, fmt::format("the request line and headers are larger than {} bytes",
                                    limits.max_header_bytes)};
  }
  if (ec == http::error::body_limit) {
    return Refusal{413,
                   fmt::format("the request body is larger than {} bytes", limits.max_body_bytes)};
  }
  if (ec == http::error::bad_version && !start_line_done) {
    // A well-formed request line of another version (HTTP/2.0, HTTP/0.9) is 505; anything else
    // there is malformed.
    const std::string_view line = buffered.substr(0, buffered.find("\r\n"));
    const std::size_t sp = line.rfind(' ');
    const std::string_view version = sp == std::string_view::npos ? "" : line.substr(sp + 1);
    const bool well_formed =
        std::count(line.begin(), line.end(), ' ') == 2 && version.size() == 8 &&
        version.starts_with("HTTP/") && std::isdigit(static_cast<unsigned char>(version[5])) &&
        version[6] == '.' && std::isdigit(static_cast<unsigned char>(version[7]));
    if (well_formed) return Refusal{505, "this HTTP version is not served (1.1 and 1.0 are)"};
  }
  if (ec.category() == http::make_error_code(http::error::bad_method).category() ||
      ec == http::error::partial_message) {
    return Refusal{400, fmt::format("malformed request: {}", ec.message())};
  }
  return std::nullopt;  // a socket error: nobody to answer
}

// Checks a parsed request head against the limits and fills `out` from it (not the body).
std::optional<Refusal> accept_head(const http::request_parser<http::string_body>& parser,
                                   const HttpLimits& limits, Request& out) {
  const auto& msg = parser.get();
  out.method = std::string(msg.method_string());
  const std::string_view target(msg.target().data(), msg.target().size());
  out.target = std::string(target.substr(0, std::min<std::size_t>(target.size(), 1024)));
  if (msg.version() != 11 && msg.version() != 10) {
    return Refusal{505, fmt::format("HTTP version {}.{} is not served (1.1 and 1.0 are)",
                                    msg.version() / 10, msg.version() % 10)};
  }
  if (!is_known_method(out.method)) {
    return Refusal{501, "this server does not implement that method"};
  }
  if (target.size() > limits.max_target_bytes) {
    return Refusal{
        414, fmt::format("the request target is longer than {} bytes", limits.max_target_bytes)};
  }
  std::size_t fields = 0;
  for (const auto& field : msg) {
    if (++fields > limits.max_header_fields) {
      return Refusal{431, fmt::format("more than {} header fields", limits.max_header_fields)};
    }
    const std::string_view name(field.name_string().data(), field.name_string().size());
    const std::string_view value(field.value().data(), field.value().size());
    for (const char ch : value) {
      const auto u = static_cast<unsigned char>(ch);
      if ((u < 0x20 && ch != '\t') || u == 0x7f) {
        return Refusal{400, "a header value holds a control character"};
      }
    }
    out.headers.add(std::string(name), std::string(value));
  }
  if (msg.count(http::field::transfer_encoding) > 0) {
    return Refusal{411, "request bodies must be sent with a Content-Length, not chunked"};
  }
  if (msg.version() == 11 && msg.count(http::field::host) != 1) {
    return Refusal{400, "an HTTP/1.1 request needs exactly one Host header"};
  }
  out.keep_alive = msg.keep_alive();
  out.version = static_cast<int>(msg.version());
  if (out.method == "HEAD") {
    out.method = "GET";
    out.head = true;
  }
  return decode_target(target, out);
}

// The answer as Beast writes it: status, fields, the body gzip'd when the client takes it and
// the type compresses; a HEAD answer keeps its Content-Length and loses its body.
http::response<http::string_body> to_message(Response& res, const Request& req, bool keep_alive) {
  http::response<http::string_body> msg;
  msg.version(11);
  msg.result(static_cast<unsigned>(res.status <= 0 ? 200 : res.status));
  for (const auto& [name, value] : res.headers.items()) msg.insert(name, value);
  const bool has_body = !(res.status == 204 || res.status == 304 || res.status < 200);
  if (has_body && res.body.size() >= kGzipMin && !res.headers.has("Content-Encoding") &&
      compressible(res.headers.get("Content-Type").value_or("")) &&
      has_token(req.header("Accept-Encoding").value_or(""), "gzip")) {
    res.body = gzip(res.body);
    msg.set(http::field::content_encoding, "gzip");
    msg.set(http::field::vary, "Accept-Encoding");
  }
  msg.keep_alive(keep_alive);
  if (keep_alive && req.version == 10) msg.set(http::field::connection, "keep-alive");
  if (req.head) {
    msg.content_length(res.body.size());
  } else {
    msg.body() = std::move(res.body);
    if (has_body) msg.prepare_payload();
  }
  return msg;
}

enum class ConnState { kHandshake, kIdle, kHeader, kBody, kBusy, kWriting, kStreaming };

bool evictable(ConnState s) {
  return s == ConnState::kHandshake || s == ConnState::kIdle || s == ConnState::kHeader;
}

}  // namespace

// What the server's table knows of a connection.
class Connection {
 public:
  virtual ~Connection() = default;
  // Closes the connection from any thread (posted to its strand) if it is still idle or slow
  // then (evictable): one that started a request meanwhile is left alone.
  virtual void close_from_outside() = 0;
  // Budget for long heads was given back: a connection waiting for it reads on (posted to its
  // strand); any other ignores it.
  virtual void resume_head() = 0;

  void set_state(ConnState s) {
    state_.store(s, std::memory_order_relaxed);
    since_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
  }
  ConnState state() const { return state_.load(std::memory_order_relaxed); }
  Clock::rep since() const { return since_.load(std::memory_order_relaxed); }
  // Chosen to make room and not closed yet: not chosen again (each new connection must close
  // one of its own, or the table would outgrow max_connections while closes are under way).
  bool evicting() const { return evicting_.load(std::memory_order_relaxed); }
  void set_evicting(bool e) { evicting_.store(e, std::memory_order_relaxed); }
  const std::string& address() const { return address_; }

  // Under the server's table_mutex: where the connection is in the server's list of TLS
  // handshakes under way, if it is.
  std::optional<std::list<Connection*>::iterator> handshake_at;

 protected:
  std::string address_;

 private:
  std::atomic<ConnState> state_{ConnState::kHandshake};
  std::atomic<Clock::rep> since_{Clock::now().time_since_epoch().count()};
  std::atomic<bool> evicting_{false};
};

struct HttpServer::Impl {
  HttpServerOptions options;
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  net::steady_timer accept_retry{ioc};
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  net::thread_pool workers;
  std::atomic<bool> stopping{false};
  std::atomic<bool> bound{false};
  std::string bound_address;

  mutable std::mutex tls_mutex;
  std::shared_ptr<ssl::context> tls;  // null: plain HTTP

  // The connection table: for the limits and for closing on stop.
  mutable std::mutex table_mutex;
  std::condition_variable table_changed;
  struct Slot {
    std::weak_ptr<Connection> connection;
    std::size_t index = 0;  // in `order`
  };
  std::unordered_map<Connection*, Slot> connections;
  std::vector<Connection*> order;  // the same connections, for sampling in O(1)
  std::size_t sample_at = 0;
  std::unordered_map<std::string, std::size_t> per_address;
  std::size_t streams = 0;
  // TLS handshakes under way and not chosen to make room, oldest first (max_handshakes).
  std::list<Connection*> handshakes;

  std::atomic<std::uint64_t> accepted{0};
  std::atomic<std::uint64_t> refused{0};
  std::atomic<std::uint64_t> evicted{0};
  std::atomic<std::uint64_t> timeouts{0};
  std::atomic<std::uint64_t> overloaded{0};
  std::atomic<std::uint64_t> handler_errors{0};
  std::atomic<std::uint64_t> in_workers{0};
  std::atomic<std::uint64_t> body_bytes{0};
  std::atomic<std::uint64_t> header_bytes{0};  // ReadBuffer: beyond each one's first kReadChunk
  // Connections whose head waits, unread, for header_bytes to fall (oldest first), and how many
  // times budget was given back (both under head_mutex).
  std::mutex head_mutex;
  std::deque<std::weak_ptr<Connection>> head_waiters;
  std::uint64_t head_releases = 0;

  explicit Impl(HttpServerOptions o)
      : options(std::move(o)), workers(static_cast<std::size_t>(std::max(1, options.workers))) {}

  std::shared_ptr<ssl::context> tls_context() const {
    std::lock_guard lock(tls_mutex);
    return tls;
  }

  // Every connection still alive. A session's last reference must never be dropped while
  // table_mutex is held: ~Session takes it (forget()), and the thread would wait on itself. So
  // whoever locks a slot's weak pointer keeps what it got until the lock is released.
  std::vector<std::shared_ptr<Connection>> live_connections() const {
    std::vector<std::shared_ptr<Connection>> live;
    std::lock_guard lock(table_mutex);
    live.reserve(connections.size());
    for (const auto& [raw, slot] : connections) {
      if (auto c = slot.connection.lock()) live.push_back(std::move(c));
    }
    return live;
  }

  void do_accept();
  void on_accept(const beast::error_code& ec, tcp::socket socket);
  bool admit(const std::string& address, bool tls);
  std::shared_ptr<Connection> oldest_handshake();
  void enroll(const std::shared_ptr<Connection>& c, bool tls);
  void forget(Connection* c);
  // The connection's TLS handshake ended (either way) or it was chosen to make room.
  void handshake_over(Connection* c) {
    std::lock_guard lock(table_mutex);
    end_handshake(c);
  }
  void end_handshake(Connection* c) {  // under table_mutex
    if (!c->handshake_at) return;
    handshakes.erase(*c->handshake_at);
    c->handshake_at.reset();
  }
  void maybe_finish();

  // Runs `job` on a worker unless too many wait; false when refused.
  bool to_worker(std::function<void()> job) {
    const std::size_t cap =
        static_cast<std::size_t>(std::max(1, options.workers)) + options.max_queued;
    if (in_workers.fetch_add(1) >= cap) {
      in_workers.fetch_sub(1);
      ++overloaded;
      return false;
    }
    net::post(workers, [this, job = std::move(job)] {
      job();
      in_workers.fetch_sub(1);
    });
    return true;
  }
  // Counts `n` request body bytes in; false when they would pass max_body_bytes_in_flight.
  bool reserve_body(std::uint64_t n) {
    if (body_bytes.fetch_add(n) + n > options.max_body_bytes_in_flight) {
      body_bytes.fetch_sub(n);
      ++overloaded;
      return false;
    }
    return true;
  }
  std::uint64_t head_releases_now() {
    std::lock_guard lock(head_mutex);
    return head_releases;
  }
  // Queues `c` until budget for long heads is given back, or wakes it at once when some was
  // given back since its read failed (`releases_then`): no release goes unseen.
  void wait_for_head_budget(const std::shared_ptr<Connection>& c, std::uint64_t releases_then) {
    {
      std::lock_guard lock(head_mutex);
      if (head_releases == releases_then) {
        head_waiters.push_back(c);
        return;
      }
    }
    c->resume_head();
  }
  // Some budget was given back: the oldest waiting connection tries again.
  void head_budget_freed() {
    std::shared_ptr<Connection> next;
    {
      std::lock_guard lock(head_mutex);
      ++head_releases;
      while (!next && !head_waiters.empty()) {
        next = head_waiters.front().lock();
        head_waiters.pop_front();
      }
    }
    if (next) next->resume_head();
  }
  // Reserves a stream thread; false when max_streams run.
  bool reserve_stream() {
    std::lock_guard lock(table_mutex);
    if (streams >= options.max_streams) {
      ++overloaded;
      return false;
    }
    ++streams;
    return true;
  }
  // Called last by a stream's thread. While stopping, the last stream may be what the I/O
  // threads wait for (maybe_finish); the lock keeps serve() from returning before the post.
  void release_stream() {
    std::lock_guard lock(table_mutex);
    --streams;
    if (stopping) net::post(ioc, [this] { maybe_finish(); });
    table_changed.notify_all();
  }
};

namespace {

// The sink of a streamed answer, shared by its session (I/O thread) and its producer (a stream
// thread): one chunk at a time, the producer waits for each.
struct StreamState {
  std::mutex mutex;
  std::condition_variable changed;
  bool closed = false;
  bool writing = false;
  bool ok = true;
  std::string chunk;
};

// A connection's read buffer: beast's flat_buffer, bounded by the header limit, whose memory
// beyond its first kReadChunk bytes is drawn from the server's max_header_bytes_in_flight.
// Almost every head fits in that first chunk and never draws on it; many clients each holding a
// long unfinished head take no more than the budget between them. A prepare() that would pass
// it fails as a full buffer does (beast reports buffer_overflow) after giving the memory back,
// and over_budget() tells the session to wait for budget rather than answer 431.
class ReadBuffer : public beast::flat_buffer {
 public:
  ReadBuffer(std::size_t limit, HttpServer::Impl& server)
      : beast::flat_buffer(limit), server_(server) {}
  ~ReadBuffer() { release(); }
  ReadBuffer(const ReadBuffer&) = delete;
  ReadBuffer& operator=(const ReadBuffer&) = delete;

  mutable_buffers_type prepare(std::size_t n) {
    auto out = beast::flat_buffer::prepare(n);  // throws std::length_error past the limit
    if (capacity() > kReadChunk + counted_) {
      const std::uint64_t more = capacity() - kReadChunk - counted_;
      if (server_.header_bytes.fetch_add(more) + more >
          server_.options.max_header_bytes_in_flight) {
        failed_at_ = server_.head_releases_now();
        server_.header_bytes.fetch_sub(more);
        shrink_to_fit();  // keeps what was read, gives back what was just taken
        over_budget_ = true;
        throw std::length_error("max_header_bytes_in_flight");
      }
      counted_ += more;
    }
    return out;
  }
  // Between requests (nothing buffered): gives back all it drew on the budget.
  void trim() {
    if (size() > 0 || counted_ == 0) return;
    shrink_to_fit();
    release();
  }
  // Once nothing more of the connection will be parsed (it lingers, then closes).
  void drop() {
    clear();
    shrink_to_fit();
    release();
  }
  bool over_budget() const { return over_budget_; }
  void clear_over_budget() { over_budget_ = false; }
  // How many times budget had been given back when it was found spent.
  std::uint64_t failed_at() const { return failed_at_; }

 private:
  void release() {
    if (counted_ == 0) return;
    server_.header_bytes.fetch_sub(counted_);
    counted_ = 0;
    server_.head_budget_freed();
  }
  HttpServer::Impl& server_;
  std::uint64_t counted_ = 0;
  std::uint64_t failed_at_ = 0;
  bool over_budget_ = false;
};

template <class Derived>
class Session : public Connection {
 public:
  Session(HttpServer::Impl& server, std::string address)
      : server_(server), buffer_(server.options.limits.max_header_bytes + kReadChunk, server) {
    address_ = std::move(address);
  }
  // The session leaves the server's table last, after the derived session's socket and timers
  // are destroyed: once the table is empty the server may end its I/O threads and destroy the
  // io_context, so nothing of the session may touch it afterwards (a follow's producer thread
  // can drop the last reference off the I/O threads).
  ~Session() override {
    release_body();
    server_.forget(this);
  }

  void start() {
    net::dispatch(stream().get_executor(), [self = self()] { self->derived().on_start(); });
  }

  void close_from_outside() override {
    net::post(stream().get_executor(), [self = self()] {
      if (evictable(self->state())) return self->close();
      self->set_evicting(false);  // it started a request meanwhile: left alone, choosable again
    });
  }

  void resume_head() override {
    net::post(stream().get_executor(), [self = self()] {
      if (!self->waiting_head_ || self->closed_) return;
      self->waiting_head_ = false;
      self->head_timer_->cancel();
      self->tcp().expires_at(self->head_deadline_);
      self->continue_head();
    });
  }

 protected:
  Derived& derived() { return static_cast<Derived&>(*this); }
  auto& stream() { return derived().stream(); }
  beast::tcp_stream& tcp() { return beast::get_lowest_layer(stream()); }
  std::shared_ptr<Derived> self() { return derived().shared_from_this(); }
  const HttpLimits& limits() const { return server_.options.limits; }

  // Waits for the first byte of the next request (idle_timeout), then reads its headers.
  void next_request() {
    if (server_.stopping || closed_) return close();
    set_state(ConnState::kIdle);
    release_body();
    buffer_.trim();
    request_ = Request{};
    response_ = Response{};
    if (buffer_.size() > 0) return read_header();
    tcp().expires_after(server_.options.idle_timeout);
    stream().async_read_some(buffer_.prepare(kReadChunk),
                             [self = self()](beast::error_code ec, std::size_t n) {
                               self->buffer_.commit(n);
                               if (ec) {
                                 if (ec == beast::error::timeout) ++self->server_.timeouts;
                                 return self->close();
                               }
                               self->read_header();
                             });
  }

  void read_header() {
    set_state(ConnState::kHeader);
    head_deadline_ = Clock::now() + server_.options.header_timeout;
    tcp().expires_at(head_deadline_);
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(limits().max_header_bytes));
    parser_->body_limit(limits().max_body_bytes);
    continue_head();
  }

  // Reads (more of) the head with the parser as it is: it has taken the start line and the whole
  // fields that came before a wait for head budget.
  void continue_head() {
    http::async_read_header(
        stream(), buffer_, *parser_,
        [self = self()](beast::error_code ec, std::size_t) { self->on_header(ec); });
  }

  // A long head found the budget spent: it waits, unread (the client's sends back up in the
  // socket), until some is given back, within the head's own deadline (header_timeout).
  void wait_for_head_budget() {
    buffer_.clear_over_budget();
    waiting_head_ = true;
    if (!head_timer_) head_timer_.emplace(stream().get_executor());
    head_timer_->expires_at(head_deadline_);
    head_timer_->async_wait([self = self()](beast::error_code ec) {
      if (ec || !self->waiting_head_) return;
      self->waiting_head_ = false;
      ++self->server_.timeouts;
      self->close();
    });
    server_.wait_for_head_budget(self(), buffer_.failed_at());
  }

  void on_header(const beast::error_code& ec) {
    if (ec) return refuse_error(ec);
    request_.peer = address_;
    request_.tls = derived().is_tls();
    if (auto why = accept_head(*parser_, limits(), request_)) return refuse(*why);
    if (server_.options.on_head) {
      std::optional<Refusal> why;
      try {
        why = server_.options.on_head(request_);
      } catch (...) {
        why = Refusal{500, "internal error"};
      }
      if (why) return refuse(*why, parser_->is_done());
    }
    if (parser_->is_done()) return dispatch();
    if (const auto length = parser_->content_length(); length && *length > 0) {
      if (!server_.reserve_body(*length)) {
        return refuse({503, "the server holds too many request bodies; try again shortly"});
      }
      reserved_body_ = *length;
    }
    if (parser_->get()[http::field::expect] == "100-continue") {
      // The client waits for this before it sends the body (curl does for large bodies).
      auto cont = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
      tcp().expires_after(server_.options.write_timeout);
      http::async_write(stream(), *cont, [self = self(), cont](beast::error_code wec, std::size_t) {
        if (wec) return self->close();
        self->read_body();
      });
      return;
    }
    read_body();
  }

  void read_body() {
    set_state(ConnState::kBody);
    tcp().expires_after(server_.options.body_timeout);
    http::async_read(stream(), buffer_, *parser_,
                     [self = self()](beast::error_code ec, std::size_t) {
                       if (ec) return self->refuse_error(ec);
                       self->dispatch();
                     });
  }

  void refuse_error(const beast::error_code& ec) {
    if (ec == beast::error::timeout) ++server_.timeouts;
    if (buffer_.over_budget()) {
      if (parser_ && !parser_->is_header_done()) return wait_for_head_budget();
      ++server_.overloaded;  // a body's bytes, read ahead (rare): no head to wait for
      return refuse({503, "the server holds too many long request heads; try again shortly"});
    }
    const auto data = buffer_.data();
    const std::string_view buffered(static_cast<const char*>(data.data()), data.size());
    const bool start_line_done = parser_ && !parser_->get().target().empty();
    const auto why = refusal_for(ec, start_line_done, buffered, limits());
    if (!why) return close();
    if (request_.method.empty() && parser_ && parser_->is_header_done()) {
      request_.method = std::string(parser_->get().method_string());
    }
    refuse(*why);
  }

  // Answers `why`; the connection is closed after it unless `in_sync` (the request was read
  // whole, so the next one starts where it ended).
  void refuse(const Refusal& why, bool in_sync = false) {
    if (!in_sync) close_after_ = true;
    response_ = Response{};
    response_.status = why.status;
    if (server_.options.refuse) server_.options.refuse(request_, response_, why);
    for (const auto& [name, value] : why.headers.items()) response_.headers.set(name, value);
    if ((why.status == 503 || why.status == 429) && !response_.headers.has("Retry-After")) {
      response_.headers.set("Retry-After", "1");
    }
    write_answer();
  }

  void dispatch() {
    request_.body = std::move(parser_->get().body());
    parser_.reset();
    bool answered = false;
    try {
      answered = server_.options.on_request(request_, response_);
    } catch (...) {
      return refuse({500, "internal error"});
    }
    if (answered) return write_answer();
    set_state(ConnState::kBusy);
    const bool queued = server_.to_worker([self = self()] {
      try {
        self->server_.options.handle(self->request_, self->response_);
      } catch (...) {
        self->response_ = Response{};
        self->response_.status = 500;
        if (self->server_.options.refuse) {
          self->server_.options.refuse(self->request_, self->response_, {500, "internal error"});
        }
      }
      net::post(self->stream().get_executor(), [self] { self->write_answer(); });
    });
    if (!queued) refuse({503, "the server is busy; try again shortly"}, true);
  }

  void write_answer() {
    if (closed_) return;
    if (response_.stream) return start_stream();
    set_state(ConnState::kWriting);
    const bool keep_alive = request_.keep_alive && !close_after_ && !server_.stopping;
    message_.emplace(to_message(response_, request_, keep_alive));
    tcp().expires_after(server_.options.write_timeout);
    http::async_write(stream(), *message_,
                      [self = self(), keep_alive](beast::error_code ec, std::size_t) {
                        self->message_.reset();
                        if (ec) {
                          if (ec == beast::error::timeout) ++self->server_.timeouts;
                          return self->close();
                        }
                        if (self->close_after_) return self->linger();
                        if (!keep_alive) return self->derived().shutdown();
                        self->next_request();
                      });
  }

  // After refusing a request whose body was not read: the sending side is shut and what the
  // client still sends is read and dropped for a moment (at most kLingerBytes, kLingerTime), so
  // that the close does not reset the connection before the client has read the answer.
  void linger() {
    if (closed_) return;
    if (state() != ConnState::kIdle) {
      set_state(ConnState::kIdle);  // evictable
      buffer_.drop();
      // The answer is complete: the client sees its end at once (FIN) while what it still sends
      // is drained.
      beast::error_code ignored;
      tcp().socket().shutdown(tcp::socket::shutdown_send, ignored);
      tcp().expires_after(kLingerTime);  // for the whole of the lingering, not per read
    }
    auto scratch = std::make_shared<std::array<char, 4096>>();
    stream().async_read_some(net::buffer(*scratch),
                             [self = self(), scratch](beast::error_code ec, std::size_t n) {
                               self->discarded_ += n;
                               if (ec || self->discarded_ > kLingerBytes) return self->close();
                               self->linger();
                             });
  }

  // --- Streamed answers: the header (chunked, Connection: close), then the producer's chunks
  // on a thread of its own, while a read watches for the client going away.
  void start_stream() {
    if (!server_.reserve_stream()) {
      response_.stream = nullptr;
      return refuse({503, "too many streams are open; try again shortly"}, true);
    }
    set_state(ConnState::kStreaming);
    stream_state_ = std::make_shared<StreamState>();
    auto header = std::make_shared<http::response<http::empty_body>>();
    header->version(11);
    header->result(static_cast<unsigned>(response_.status));
    for (const auto& [name, value] : response_.headers.items()) header->insert(name, value);
    header->chunked(true);
    header->keep_alive(false);
    auto serializer = std::make_shared<http::response_serializer<http::empty_body>>(*header);
    tcp().expires_after(server_.options.write_timeout);
    http::async_write_header(
        stream(), *serializer,
        [self = self(), header, serializer](beast::error_code ec, std::size_t) {
          if (ec) {
            self->server_.release_stream();
            return self->close();
          }
          self->watch_client();
          self->run_producer();
        });
  }

  void watch_client() {
    // No deadline on this read: it only notices the client going away (or sending too much).
    tcp().expires_never();
    auto scratch = std::make_shared<std::array<char, 1024>>();
    stream().async_read_some(net::buffer(*scratch),
                             [self = self(), scratch](beast::error_code ec, std::size_t n) {
                               // The stream's last chunk is written: this read was cancelled
                               // so that the (TLS) shutdown is the only read.
                               if (self->finishing_) return self->derived().shutdown();
                               self->discarded_ += n;
                               if (ec || self->discarded_ > kStreamDiscard) {
                                 self->end_stream_state();
                                 return self->close();
                               }
                               self->watch_client();
                             });
  }

  class Sink final : public ChunkSink {
   public:
    explicit Sink(std::shared_ptr<Derived> session) : session_(std::move(session)) {}
    bool write(std::string_view data) override {
      if (data.empty()) return open();
      auto& st = *session_->stream_state_;
      std::unique_lock lock(st.mutex);
      if (st.closed || session_->server_.stopping) return false;
      st.chunk.assign(data);
      st.writing = true;
      lock.unlock();
      net::post(session_->stream().get_executor(), [s = session_] { s->write_chunk(); });
      lock.lock();
      st.changed.wait(lock, [&] { return !st.writing || st.closed; });
      return st.ok && !st.closed;
    }
    bool open() const override {
      auto& st = *session_->stream_state_;
      std::lock_guard lock(st.mutex);
      return !st.closed && !session_->server_.stopping;
    }

   private:
    std::shared_ptr<Derived> session_;
  };

  void write_chunk() {
    auto& st = *stream_state_;
    if (closed_) return end_stream_state();
    tcp().expires_after(server_.options.write_timeout);
    net::async_write(stream(), http::make_chunk(net::buffer(st.chunk)),
                     [self = self()](beast::error_code ec, std::size_t) {
                       auto& s = *self->stream_state_;
                       {
                         std::lock_guard lock(s.mutex);
                         s.writing = false;
                         s.ok = !ec;
                         if (ec) s.closed = true;
                       }
                       s.changed.notify_all();
                       if (ec) self->close();
                     });
  }

  void end_stream_state() {
    if (!stream_state_) return;
    {
      std::lock_guard lock(stream_state_->mutex);
      stream_state_->closed = true;
      stream_state_->ok = false;
    }
    stream_state_->changed.notify_all();
  }

  void run_producer() {
    auto producer = std::move(response_.stream);
    try {
      start_producer(std::move(producer));
    } catch (const std::system_error&) {  // no thread to be had
      server_.release_stream();
      close();
    }
  }

  void start_producer(std::function<void(ChunkSink&)> producer) {
    HttpServer::Impl& server = server_;
    std::thread([self = self(), producer = std::move(producer), &server]() mutable {
      produce(std::move(self), std::move(producer));
      server.release_stream();  // the thread's last touch of the server: it holds nothing now
    }).detach();
  }

  // Runs a stream's producer, then hands the session back to its I/O threads; takes both by
  // value so that neither outlives this call on the producer's thread.
  static void produce(std::shared_ptr<Derived> self, std::function<void(ChunkSink&)> producer) {
    {
      Sink sink(self);
      try {
        producer(sink);
      } catch (...) {
        self->end_stream_state();  // an unterminated chunked body tells the client
      }
    }
    producer = nullptr;
    auto executor = self->stream().get_executor();
    net::post(executor, [self = std::move(self)] { self->finish_stream(); });
  }

  void finish_stream() {
    bool ok = false;
    {
      std::lock_guard lock(stream_state_->mutex);
      ok = !stream_state_->closed;
      stream_state_->closed = true;
    }
    if (!ok || closed_) return close();
    tcp().expires_after(server_.options.write_timeout);
    net::async_write(stream(), http::make_chunk_last(),
                     [self = self()](beast::error_code ec, std::size_t) {
                       if (ec) return self->close();
                       if (self->closed_) return;
                       // The client watch's read is pending (or its handler queued); a TLS
                       // shutdown reads too, and two reads at once would leave the session
                       // waiting on neither. The watch starts the shutdown once cancelled.
                       self->finishing_ = true;
                       beast::error_code ignored;
                       self->tcp().socket().cancel(ignored);
                     });
  }

  void release_body() {
    if (reserved_body_ == 0) return;
    server_.body_bytes.fetch_sub(reserved_body_);
    reserved_body_ = 0;
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    waiting_head_ = false;
    if (head_timer_) head_timer_->cancel();
    end_stream_state();
    beast::error_code ignored;
    tcp().socket().shutdown(tcp::socket::shutdown_both, ignored);
    tcp().close();
  }

  HttpServer::Impl& server_;
  ReadBuffer buffer_;
  Clock::time_point head_deadline_;              // of the head being read
  std::optional<net::steady_timer> head_timer_;  // while waiting for head budget
  bool waiting_head_ = false;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::response<http::string_body>> message_;
  Request request_;
  Response response_;
  std::shared_ptr<StreamState> stream_state_;
  std::size_t discarded_ = 0;
  std::uint64_t reserved_body_ = 0;  // of server_.body_bytes, until the request is answered
  bool close_after_ = false;
  bool closed_ = false;
  bool finishing_ = false;  // a streamed answer's last chunk is written: shut down next
};

class PlainSession final : public Session<PlainSession>,
                           public std::enable_shared_from_this<PlainSession> {
 public:
  PlainSession(HttpServer::Impl& server, tcp::socket&& socket, std::string address)
      : Session(server, std::move(address)), stream_(std::move(socket)) {}

  beast::tcp_stream& stream() { return stream_; }
  static bool is_tls() { return false; }
  void on_start() { next_request(); }
  void shutdown() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    close();
  }

 private:
  beast::tcp_stream stream_;
};

class TlsSession final : public Session<TlsSession>,
                         public std::enable_shared_from_this<TlsSession> {
 public:
  TlsSession(HttpServer::Impl& server, tcp::socket&& socket, std::string address,
             std::shared_ptr<ssl::context> context)
      : Session(server, std::move(address)),
        context_(std::move(context)),
        stream_(std::move(socket), *context_) {}

  beast::ssl_stream<beast::tcp_stream>& stream() { return stream_; }
  static bool is_tls() { return true; }
  void on_start() {
    set_state(ConnState::kHandshake);
    tcp().expires_after(server_.options.header_timeout);
    stream_.async_handshake(ssl::stream_base::server,
                            [self = shared_from_this()](beast::error_code ec) {
                              self->server_.handshake_over(self.get());
                              if (ec) {
                                if (ec == beast::error::timeout) ++self->server_.timeouts;
                                return self->close();
                              }
                              self->next_request();
                            });
  }
  void shutdown() {
    tcp().expires_after(kTlsShutdown);
    stream_.async_shutdown([self = shared_from_this()](beast::error_code) { self->close(); });
  }

 private:
  std::shared_ptr<ssl::context> context_;  // kept while the connection lives (a reload swaps)
  beast::ssl_stream<beast::tcp_stream> stream_;
};

}  // namespace

// --- The server.

void HttpServer::Impl::do_accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    on_accept(ec, std::move(socket));
  });
}

void HttpServer::Impl::on_accept(const beast::error_code& ec, tcp::socket socket) {
  if (stopping || !acceptor.is_open()) return;
  if (ec) {
    // Out of descriptors or memory: wait a moment instead of spinning on the error.
    accept_retry.expires_after(std::chrono::milliseconds(50));
    accept_retry.async_wait([this](beast::error_code) {
      if (!stopping) do_accept();
    });
    return;
  }
  beast::error_code endpoint_ec;
  const tcp::endpoint peer = socket.remote_endpoint(endpoint_ec);
  if (endpoint_ec) {
    do_accept();
    return;
  }
  std::string address = peer.address().to_string();
  auto context = tls_context();
  if (!admit(address, context != nullptr)) {
    ++refused;
    beast::error_code ignored;
    socket.close(ignored);
    do_accept();
    return;
  }
  ++accepted;
  socket.set_option(tcp::no_delay(true), endpoint_ec);  // small JSON answers: no Nagle delay
  if (context) {
    auto s = std::make_shared<TlsSession>(*this, std::move(socket), address, std::move(context));
    enroll(s, true);
    s->start();
  } else {
    auto s = std::make_shared<PlainSession>(*this, std::move(socket), address);
    enroll(s, false);
    s->start();
  }
  do_accept();
}

// Counts `address` in (true) or refuses it (false). At max_handshakes (a TLS connection), the
// oldest handshake under way is closed to make room: half handshakes, each holding OpenSSL's and
// Asio's buffers, cannot take the server's memory, and whole ones do not wait behind them. At
// max_connections, the oldest of a sample of connections that are idle or still sending their
// request head is closed to make room (kEvictionSample of them, so that a storm of connections
// costs O(1) each): slow clients cannot hold every slot, a client with a request in progress is
// never cut off.
bool HttpServer::Impl::admit(const std::string& address, bool tls) {
  std::shared_ptr<Connection> victim;
  std::vector<std::shared_ptr<Connection>> sampled;  // released after the lock (live_connections)
  {
    std::lock_guard lock(table_mutex);
    std::size_t& mine = per_address[address];
    if (mine >= options.max_connections_per_address) {
      if (mine == 0) per_address.erase(address);
      return false;
    }
    if (tls && handshakes.size() >= options.max_handshakes) {
      victim = oldest_handshake();  // also a slot of max_connections
    }
    if (!victim && connections.size() >= options.max_connections) {
      Clock::rep oldest = 0;
      const std::size_t n = order.size();
      for (std::size_t k = 0; k < std::min(n, kEvictionSample); ++k) {
        Connection* raw = order[(sample_at + k) % n];
        auto c = connections[raw].connection.lock();
        if (!c) continue;
        sampled.push_back(c);
        if (!evictable(c->state()) || c->evicting()) continue;
        if (!victim || c->since() < oldest) {
          victim = std::move(c);
          oldest = victim->since();
        }
      }
      sample_at = (sample_at + kEvictionSample) % std::max<std::size_t>(n, 1);
      if (!victim) {
        if (mine == 0) per_address.erase(address);
        return false;
      }
    }
    if (victim) {  // not chosen again, and its handshake's slot is the newcomer's
      victim->set_evicting(true);
      end_handshake(victim.get());
    }
    ++mine;
  }
  if (victim) {
    ++evicted;
    victim->close_from_outside();
  }
  return true;
}

// Under table_mutex: the oldest TLS handshake under way, or null if none is alive. A connection
// chosen to make room leaves the list as it is chosen, so none on it is being closed already.
std::shared_ptr<Connection> HttpServer::Impl::oldest_handshake() {
  while (!handshakes.empty()) {
    Connection* raw = handshakes.front();
    if (auto c = connections.at(raw).connection.lock()) return c;
    end_handshake(raw);  // its last reference is gone: on its way out of the table anyway
  }
  return nullptr;
}

void HttpServer::Impl::enroll(const std::shared_ptr<Connection>& c, bool tls) {
  std::lock_guard lock(table_mutex);
  connections.emplace(c.get(), Slot{c, order.size()});
  order.push_back(c.get());
  if (tls) c->handshake_at = handshakes.insert(handshakes.end(), c.get());
}

void HttpServer::Impl::forget(Connection* c) {
  {
    std::lock_guard lock(table_mutex);
    end_handshake(c);
    if (const auto it = connections.find(c); it != connections.end()) {
      const std::size_t index = it->second.index;
      order[index] = order.back();
      connections[order[index]].index = index;
      order.pop_back();
      connections.erase(it);
    }
    if (auto it = per_address.find(c->address()); it != per_address.end()) {
      if (--it->second == 0) per_address.erase(it);
    }
  }
  table_changed.notify_all();
  if (stopping) net::post(ioc, [this] { maybe_finish(); });
}

// While stopping: once the last connection and stream are gone, lets the I/O threads return.
void HttpServer::Impl::maybe_finish() {
  std::lock_guard lock(table_mutex);
  if (connections.empty() && streams == 0 && work) work.reset();
}

HttpServer::HttpServer(HttpServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {
  if (!impl_->options.on_request || !impl_->options.handle) {
    throw std::invalid_argument("HttpServer: on_request and handle are required");
  }
}

HttpServer::~HttpServer() {
  stop();
  impl_->workers.join();
}

namespace {

// The server's TLS context: TLS 1.2+, forward-secret AEAD suites, the certificate and key.
std::shared_ptr<ssl::context> make_tls_context(const std::string& cert_file,
                                               const std::string& key_file) {
  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                       ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                       ssl::context::single_dh_use);
  SSL_CTX* native = context->native_handle();
  SSL_CTX_set_options(native, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  if (SSL_CTX_set_cipher_list(native, kTls12Ciphers) != 1) {
    throw std::runtime_error("TLS: the cipher list was refused by OpenSSL");
  }
  beast::error_code ec;
  context->use_certificate_chain_file(cert_file, ec);
  if (ec) {
    throw std::runtime_error(
        fmt::format("TLS: cannot use certificate {}: {}", cert_file, ec.message()));
  }
  context->use_private_key_file(key_file, ssl::context::pem, ec);
  if (ec) {
    throw std::runtime_error(fmt::format("TLS: cannot use key {}: {}", key_file, ec.message()));
  }
  if (SSL_CTX_check_private_key(native) != 1) {
    throw std::runtime_error(
        fmt::format("TLS: key {} does not match certificate {}", key_file, cert_file));
  }
  return context;
}

// The first address `host` resolves to for listening on `port`.
tcp::endpoint resolve_listen(net::io_context& ioc, const std::string& host, int port) {
  if (port < 0 || port > 65535) throw std::runtime_error(fmt::format("bad port {}", port));
  beast::error_code ec;
  tcp::resolver resolver(ioc);
  const auto results = resolver.resolve(
      host, std::to_string(port), tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || results.empty()) {
    throw std::runtime_error(fmt::format("cannot resolve listen address {}: {}", host,
                                         ec ? ec.message() : "no address"));
  }
  return results.begin()->endpoint();
}

}  // namespace

void HttpServer::use_tls(const std::string& cert_file, const std::string& key_file) {
  auto context = make_tls_context(cert_file, key_file);
  std::lock_guard lock(impl_->tls_mutex);
  impl_->tls = std::move(context);
}

void HttpServer::check_tls(const std::string& cert_file, const std::string& key_file) {
  (void)make_tls_context(cert_file, key_file);
}

std::string HttpServer::resolve(const std::string& host) {
  net::io_context ioc;
  return resolve_listen(ioc, host, 0).address().to_string();
}

bool HttpServer::tls() const { return impl_->tls_context() != nullptr; }

int HttpServer::bind(const std::string& host, int port) {
  const tcp::endpoint endpoint = resolve_listen(impl_->ioc, host, port);
  beast::error_code ec;
  auto& acceptor = impl_->acceptor;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    acceptor.close(ec);
    throw std::runtime_error(fmt::format("cannot listen on {}:{}: {}", host, port, ec.message()));
  }
  impl_->bound_address = endpoint.address().to_string();
  impl_->bound = true;
  return acceptor.local_endpoint().port();
}

std::string HttpServer::bound_address() const { return impl_->bound_address; }

bool HttpServer::is_loopback_address(const std::string& address) {
  beast::error_code ec;
  const auto a = net::ip::make_address(address, ec);
  if (ec) return false;
  if (a.is_v4()) return a.to_v4().is_loopback();
  const auto v6 = a.to_v6();
  if (v6.is_v4_mapped()) return net::ip::make_address_v4(net::ip::v4_mapped, v6).is_loopback();
  return v6.is_loopback();
}

void HttpServer::serve() {
  if (!impl_->bound) throw std::runtime_error("HttpServer::serve: bind() first");
  if (impl_->stopping) return;
  impl_->work.emplace(impl_->ioc.get_executor());
  impl_->do_accept();
  std::vector<std::thread> threads;
  // A handler that throws (out of memory, say) ends that connection, not the server: run() is
  // entered again.
  const auto run = [impl = impl_.get()] {
    for (;;) {
      try {
        impl->ioc.run();
        return;
      } catch (const std::exception&) {
        ++impl->handler_errors;
      }
    }
  };
  for (int i = 1; i < std::max(1, impl_->options.io_threads); ++i) threads.emplace_back(run);
  run();
  for (auto& t : threads) t.join();
  // Answers still being produced on workers post back to sessions that are gone: wait for them.
  std::unique_lock lock(impl_->table_mutex);
  impl_->table_changed.wait(lock, [&] { return impl_->streams == 0; });
}

void HttpServer::stop() {
  if (impl_->stopping.exchange(true)) return;
  net::post(impl_->ioc, [impl = impl_.get()] {
    beast::error_code ignored;
    impl->acceptor.close(ignored);
    impl->accept_retry.cancel();
    for (const auto& c : impl->live_connections()) {
      if (evictable(c->state())) c->close_from_outside();
    }
    impl->maybe_finish();
  });
}

bool HttpServer::stopping() const { return impl_->stopping; }

HttpServer::Stats HttpServer::stats() const {
  Stats s;
  {
    std::lock_guard lock(impl_->table_mutex);
    s.connections_open = impl_->connections.size();
    s.handshakes = impl_->handshakes.size();
    s.streams_open = impl_->streams;
  }
  const auto live = impl_->live_connections();
  s.connections_idle = static_cast<std::uint64_t>(std::count_if(
      live.begin(), live.end(), [](const auto& c) { return c->state() == ConnState::kIdle; }));
  s.connections_accepted = impl_->accepted;
  s.connections_refused = impl_->refused;
  s.connections_evicted = impl_->evicted;
  s.timeouts = impl_->timeouts;
  s.overloaded = impl_->overloaded;
  s.workers_busy = impl_->in_workers;
  s.body_bytes_in_flight = impl_->body_bytes;
  s.header_bytes_in_flight = impl_->header_bytes;
  return s;
}

std::optional<ParsedRequest> parse_request_bytes(std::string_view bytes, const HttpLimits& limits) {
  http::request_parser<http::string_body> parser;
  parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
  parser.body_limit(limits.max_body_bytes);
  ParsedRequest out;
  beast::error_code ec;
  std::size_t used = 0;
  // As a connection reads: the head first (and the limits it is checked against), then the body.
  while (!parser.is_header_done()) {
    const std::size_t n = parser.put(net::buffer(bytes.data() + used, bytes.size() - used), ec);
    used += n;
    if (ec == http::error::need_more) {
      if (bytes.size() - used > 0 && n > 0) continue;
      if (used > limits.max_header_bytes + kReadChunk) ec = http::error::buffer_overflow;
      if (ec == http::error::need_more) return std::nullopt;
    }
    if (ec) {
      const auto why = refusal_for(ec, !parser.get().target().empty(), bytes.substr(used), limits);
      out.refused = true;
      out.refusal = why.value_or(Refusal{400, "malformed request"});
      return out;
    }
  }
  if (auto why = accept_head(parser, limits, out.request)) {
    out.refused = true;
    out.refusal = *why;
    return out;
  }
  while (!parser.is_done()) {
    const std::size_t n = parser.put(net::buffer(bytes.data() + used, bytes.size() - used), ec);
    used += n;
    if (ec == http::error::need_more) return std::nullopt;
    if (ec) {
      out.refused = true;
      out.refusal = refusal_for(ec, true, bytes.substr(used), limits)
                        .value_or(Refusal{400, "malformed request"});
      return out;
    }
    if (n == 0) return std::nullopt;
  }
  out.request.body = std::move(parser.get().body());
  out.consumed = used;
  return out;
}

}  // namespace falcon::serve
