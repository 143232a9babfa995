#include "serve/event_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_map>

namespace falcon::serve {

namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr std::uint64_t kListenKey = 0;
constexpr std::uint64_t kWakeKey = 1;
constexpr std::size_t kReadChunk = 64 << 10;
constexpr std::size_t kReadPerPass = 256 << 10;  // per connection and pass: others get a turn
constexpr std::size_t kGzipMin = 1024;           // smaller answers are sent as they are

const char* reason_phrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 304:
      return "Not Modified";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return status < 400 ? "OK" : "Error";
  }
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// A comma-separated header value holds `token` (case-insensitive), not refused by q=0.
bool has_token(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    const std::size_t comma = value.find(',');
    std::string_view item = value.substr(0, comma);
    value = comma == std::string_view::npos ? std::string_view{} : value.substr(comma + 1);
    std::string_view params;
    if (const std::size_t semi = item.find(';'); semi != std::string_view::npos) {
      params = item.substr(semi + 1);
      item = item.substr(0, semi);
    }
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (!iequals(item, token)) continue;
    std::string p(params);
    p.erase(std::remove_if(p.begin(), p.end(), [](char c) { return c == ' ' || c == '\t'; }),
            p.end());
    return !(p == "q=0" || p == "q=0." || p == "q=0.0" || p == "q=0.00" || p == "q=0.000");
  }
  return false;
}

bool compressible(std::string_view type) {
  if (type.substr(0, 5) == "text/") return type.substr(0, 17) != "text/event-stream";
  for (std::string_view t :
       {"application/json", "application/javascript", "application/xml", "image/svg+xml"}) {
    if (type.substr(0, t.size()) == t) return true;
  }
  return false;
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

// Writes all of `data` to the non-blocking socket, waiting up to `timeout` for each step.
bool write_all(int fd, const char* data, std::size_t n, std::chrono::milliseconds timeout) {
  while (n > 0) {
    const ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w > 0) {
      data += w;
      n -= static_cast<std::size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      const int r = ::poll(&p, 1, static_cast<int>(timeout.count()));
      if (r <= 0 || (p.revents & (POLLERR | POLLHUP)) != 0) return false;
      continue;
    }
    return false;
  }
  return true;
}

// The peer has not closed or reset the connection.
bool socket_alive(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 0) < 0) return false;
  if ((p.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) return false;
  if ((p.revents & POLLIN) != 0) {
    char c;
    const ssize_t r = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r == 0) return false;
    if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
  }
  return true;
}

bool is_token_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 ||
         std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

}  // namespace

RequestParse parse_request(std::string_view in, std::size_t max_header_bytes,
                           std::size_t max_body_bytes, Exchange& ex) {
  const auto refused = [](int status, std::string message) {
    RequestParse r;
    r.kind = RequestParse::kRefused;
    r.status = status;
    r.message = std::move(message);
    return r;
  };
  const std::string too_large =
      fmt::format("the request line and headers are larger than {} bytes", max_header_bytes);
  std::size_t start = 0;
  while (in.substr(start, 2) == "\r\n") start += 2;  // empty lines before a request
  const std::size_t end = in.find("\r\n\r\n", start);
  if (end == std::string_view::npos) {
    if (in.size() - start > max_header_bytes) return refused(431, too_large);
    return {};
  }
  if (end - start > max_header_bytes) return refused(431, too_large);
  const std::string_view head = in.substr(start, end - start);
  const std::size_t line_end = std::min(head.find("\r\n"), head.size());
  const std::string_view line = head.substr(0, line_end);
  const std::size_t sp1 = line.find(' ');
  const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || sp1 == 0 || line.find(' ', sp2 + 1) != line.npos) {
    return refused(400, "malformed request line");
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  for (const char ch : method) {
    if (!is_token_char(ch)) return refused(400, "malformed request method");
  }
  if (target.empty() || target.front() != '/') {
    return refused(400, "the request target must be a path starting with /");
  }
  for (const char ch : target) {
    if (static_cast<unsigned char>(ch) <= 0x20 || ch == 0x7f) {
      return refused(400, "the request target holds a control character");
    }
  }
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    return refused(505, fmt::format("HTTP version '{}' is not served (HTTP/1.1 and HTTP/1.0 are)",
                                    version.substr(0, 16)));
  }
  httplib::Request& req = ex.req;
  req = httplib::Request{};
  req.method = std::string(method);
  req.version = std::string(version);
  req.target = std::string(target);
  std::size_t pos = line_end + 2;
  bool has_length = false;
  std::size_t length = 0;
  while (pos < head.size()) {
    std::size_t next = head.find("\r\n", pos);
    if (next == std::string_view::npos) next = head.size();
    const std::string_view h = head.substr(pos, next - pos);
    pos = next + 2;
    const std::size_t colon = h.find(':');
    if (colon == 0 || colon == std::string_view::npos || h.front() == ' ' || h.front() == '\t') {
      return refused(400, "malformed header line");
    }
    const std::string_view name = h.substr(0, colon);
    for (const char ch : name) {
      if (!is_token_char(ch)) return refused(400, "malformed header name");
    }
    std::string_view value = h.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
      value.remove_prefix(1);
    }
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    for (const char ch : value) {
      if ((static_cast<unsigned char>(ch) < 0x20 && ch != '\t') || ch == 0x7f) {
        return refused(400, "a header value holds a control character");
      }
    }
    if (iequals(name, "Content-Length")) {
      if (value.empty() || value.size() > 18 ||
          value.find_first_not_of("0123456789") != std::string_view::npos) {
        return refused(400, "malformed Content-Length");
      }
      const std::size_t n = std::stoull(std::string(value));
      if (has_length && n != length) return refused(400, "conflicting Content-Length headers");
      has_length = true;
      length = n;
    } else if (iequals(name, "Transfer-Encoding")) {
      return refused(411, "request bodies must be sent with a Content-Length, not chunked");
    }
    req.headers.emplace(std::string(name), std::string(value));
  }
  if (length > max_body_bytes) {
    return refused(413, fmt::format("the request body is larger than {} bytes", max_body_bytes));
  }
  const std::size_t body_start = end + 4;
  if (in.size() - body_start < length) {
    RequestParse r;
    r.expect_continue = has_token(req.get_header_value("Expect"), "100-continue");
    req = httplib::Request{};
    return r;
  }
  req.body.assign(in.substr(body_start, length));
  const std::size_t q = req.target.find('?');
  req.path = httplib::detail::decode_url(req.target.substr(0, q), false);
  if (q != std::string::npos) {
    httplib::detail::parse_query_text(req.target.substr(q + 1), req.params);
  }
  const std::string connection = req.get_header_value("Connection");
  ex.keep_alive = req.version == "HTTP/1.1" ? !has_token(connection, "close")
                                            : has_token(connection, "keep-alive");
  ex.gzip_ok = has_token(req.get_header_value("Accept-Encoding"), "gzip");
  ex.head = false;
  if (req.method == "HEAD") {
    req.method = "GET";
    ex.head = true;
  }
  RequestParse r;
  r.kind = RequestParse::kRequest;
  r.consumed = body_start + length;
  return r;
}

void EventServer::serialize(Exchange& ex) {
  httplib::Response& res = ex.res;
  const int status = res.status <= 0 ? 200 : res.status;
  const bool has_body = !(status == 204 || status == 304 || status < 200);
  std::string compressed;
  const std::string* body = &res.body;
  if (ex.gzip_ok && has_body && res.body.size() >= kGzipMin &&
      compressible(res.get_header_value("Content-Type")) && !res.has_header("Content-Encoding")) {
    compressed = gzip(res.body);
    body = &compressed;
    res.set_header("Content-Encoding", "gzip");
    res.set_header("Vary", "Accept-Encoding");
  }
  std::string& out = ex.wire;
  out.clear();
  out.reserve(128 + res.headers.size() * 48 + (ex.head ? 0 : body->size()));
  out += "HTTP/1.1 ";
  out += std::to_string(status);
  out += ' ';
  out += reason_phrase(status);
  out += "\r\n";
  for (const auto& [name, value] : res.headers) {
    if (iequals(name, "Content-Length") || iequals(name, "Connection") ||
        iequals(name, "Transfer-Encoding")) {
      continue;
    }
    out += name;
    out += ": ";
    out += value;
    out += "\r\n";
  }
  out += ex.keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  if (has_body) {
    out += "Content-Length: ";
    out += std::to_string(body->size());
    out += "\r\n";
  }
  out += "\r\n";
  if (has_body && !ex.head) out += *body;
}

struct Conn {
  int fd = -1;
  std::uint64_t id = 0;
  std::string in;   // read, not yet parsed
  std::string out;  // to write from out_off
  std::size_t out_off = 0;
  bool busy = false;         // its request is in a batch or with a worker
  bool registered = false;   // in the loop's epoll set
  bool want_out = false;     // registered for EPOLLOUT too
  bool close_after = false;  // close once `out` is written
  bool peer_closed = false;  // read end of stream
  bool continue_sent = false;
  SteadyClock::time_point last_io;
  SteadyClock::time_point request_start;  // the first byte of the request in `in`
  std::string remote_addr;
  int remote_port = 0;
};

struct Loop;

struct EventServer::Impl {
  EventServerOptions o;
  int listen_fd = -1;
  std::vector<std::unique_ptr<Loop>> loops;
  std::atomic<bool> stopping{false};
  std::atomic<std::size_t> connections{0};
  std::atomic<std::uint64_t> next_id{2};
  std::size_t next_loop = 0;  // used by loop 0 only

  std::mutex work_mutex;
  std::condition_variable work_ready;
  std::deque<std::unique_ptr<Exchange>> work;
  bool workers_stop = false;
  std::vector<std::thread> workers;

  // The batcher: one thread finishes the loops' batches (on_loop_batch), so a loop goes on
  // reading and parsing while a batch's commit waits for the disk, and the requests parsed
  // meanwhile share the next commit.
  std::mutex batch_mutex;
  std::condition_variable batch_ready;
  std::vector<std::unique_ptr<Exchange>> batched;
  bool batcher_stop = false;
  std::thread batcher;

  explicit Impl(EventServerOptions options);
  ~Impl();

  void to_worker(std::unique_ptr<Exchange> ex) {
    {
      std::lock_guard lock(work_mutex);
      work.push_back(std::move(ex));
    }
    work_ready.notify_one();
  }
  void to_batcher(std::vector<std::unique_ptr<Exchange>> items) {
    {
      std::lock_guard lock(batch_mutex);
      if (batched.empty()) {
        batched = std::move(items);
      } else {
        for (auto& ex : items) batched.push_back(std::move(ex));
      }
    }
    batch_ready.notify_one();
  }
  void worker_main();
  void batcher_main();
  void stream(Exchange& ex);
};

struct Loop {
  EventServer::Impl& server;
  std::size_t index;
  int ep = -1;
  int wake = -1;
  std::unordered_map<std::uint64_t, std::unique_ptr<Conn>> conns;
  std::vector<std::unique_ptr<Exchange>> batch;
  std::vector<char> scratch = std::vector<char>(kReadChunk);  // recv's buffer
  bool listening = false;
  SteadyClock::time_point next_sweep;

  std::mutex mailbox_mutex;
  std::vector<int> new_fds;                         // accepted by loop 0 for this loop
  std::vector<std::unique_ptr<Exchange>> finished;  // from workers

  Loop(EventServer::Impl& s, std::size_t i) : server(s), index(i) {
    ep = ::epoll_create1(EPOLL_CLOEXEC);
    wake = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (ep < 0 || wake < 0) {
      throw std::runtime_error(fmt::format("event loop: {}", std::strerror(errno)));
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kWakeKey;
    ::epoll_ctl(ep, EPOLL_CTL_ADD, wake, &ev);
  }
  ~Loop() {
    for (auto& [id, c] : conns) ::close(c->fd);
    if (ep >= 0) ::close(ep);
    if (wake >= 0) ::close(wake);
  }

  void wake_up() const {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t w = ::write(wake, &one, sizeof one);
  }
  void post_fd(int fd) {
    {
      std::lock_guard lock(mailbox_mutex);
      new_fds.push_back(fd);
    }
    wake_up();
  }
  void post_finished(std::unique_ptr<Exchange> ex) {
    {
      std::lock_guard lock(mailbox_mutex);
      finished.push_back(std::move(ex));
    }
    wake_up();
  }
  void post_finished(std::vector<std::unique_ptr<Exchange>>& done) {
    {
      std::lock_guard lock(mailbox_mutex);
      for (auto& ex : done) finished.push_back(std::move(ex));
    }
    done.clear();
    wake_up();
  }

  void set_events(Conn& c, bool in, bool out) {
    epoll_event ev{};
    ev.events = (in ? EPOLLIN | EPOLLRDHUP : 0U) | (out ? EPOLLOUT : 0U);
    ev.data.u64 = c.id;
    if (!c.registered) {
      ::epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
      c.registered = true;
    } else {
      ::epoll_ctl(ep, EPOLL_CTL_MOD, c.fd, &ev);
    }
    c.want_out = out;
  }
  void unregister(Conn& c) {
    if (!c.registered) return;
    ::epoll_ctl(ep, EPOLL_CTL_DEL, c.fd, nullptr);
    c.registered = false;
    c.want_out = false;
  }

  void close_conn(std::uint64_t id) {
    const auto it = conns.find(id);
    if (it == conns.end()) return;
    unregister(*it->second);
    ::close(it->second->fd);
    conns.erase(it);
    --server.connections;
  }

  void adopt(int fd) {
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->id = server.next_id++;
    c->last_io = SteadyClock::now();
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      char host[NI_MAXHOST];
      char port[NI_MAXSERV];
      if (::getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof host, port,
                        sizeof port, NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
        c->remote_addr = host;
        c->remote_port = std::atoi(port);
      }
    }
    Conn& ref = *c;
    conns.emplace(ref.id, std::move(c));
    set_events(ref, true, false);
  }

  void accept_all() {
    for (int i = 0; i < 64; ++i) {
      const int fd = ::accept4(server.listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN, or an error the next wake-up sees again
      if (server.connections.load() >= server.o.max_connections || server.stopping) {
        ::close(fd);
        continue;
      }
      ++server.connections;
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      Loop& target = *server.loops[server.next_loop++ % server.loops.size()];
      if (&target == this) {
        adopt(fd);
      } else {
        target.post_fd(fd);
      }
    }
  }

  // Closes the listening socket: new clients are refused, not left in the backlog.
  void stop_listening() {
    if (!listening) return;
    ::epoll_ctl(ep, EPOLL_CTL_DEL, server.listen_fd, nullptr);
    ::close(server.listen_fd);
    server.listen_fd = -1;
    listening = false;
  }

  // Writes what it can of c.out; closes the connection when done and asked to. False: closed.
  bool flush(Conn& c) {
    while (c.out_off < c.out.size()) {
      const ssize_t w =
          ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
      if (w > 0) {
        c.out_off += static_cast<std::size_t>(w);
        c.last_io = SteadyClock::now();
        continue;
      }
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (!c.want_out && c.registered) set_events(c, true, true);
        return true;
      }
      close_conn(c.id);
      return false;
    }
    c.out.clear();
    c.out_off = 0;
    if (c.close_after || (c.peer_closed && !c.busy && c.in.empty())) {
      close_conn(c.id);
      return false;
    }
    if (c.want_out) set_events(c, true, false);
    return true;
  }

  // Reads what the socket has. False: closed.
  bool read_some(Conn& c) {
    std::size_t total = 0;
    while (total < kReadPerPass) {
      const ssize_t r = ::recv(c.fd, scratch.data(), scratch.size(), 0);
      if (r > 0) {
        if (c.in.empty()) c.request_start = SteadyClock::now();
        c.in.append(scratch.data(), static_cast<std::size_t>(r));
        c.last_io = SteadyClock::now();
        total += static_cast<std::size_t>(r);
        if (static_cast<std::size_t>(r) < scratch.size()) break;
        continue;
      }
      if (r == 0) {
        // Nothing more to read: stop asking (end of stream stays readable) and finish what
        // was asked before.
        c.peer_closed = true;
        set_events(c, false, c.want_out);
        break;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      close_conn(c.id);
      return false;
    }
    return true;
  }

  void answer(Conn& c, Exchange& ex) {
    c.busy = false;
    if (!ex.keep_alive || server.stopping) c.close_after = true;
    if (c.out.empty()) {
      c.out = std::move(ex.wire);
      c.out_off = 0;
    } else {
      c.out += ex.wire;
    }
  }

  // Answers `status` without asking the application for more than the body, and closes after.
  void refuse(Conn& c, int status, const std::string& message) {
    Exchange ex;
    ex.keep_alive = false;
    ex.req.remote_addr = c.remote_addr;
    if (server.o.refuse) {
      server.o.refuse(ex, status, message);
    } else {
      ex.res.status = status;
      ex.res.set_content(message + "\n", "text/plain");
    }
    if (ex.res.status <= 0) ex.res.status = status;
    EventServer::serialize(ex);
    c.in.clear();
    answer(c, ex);
  }

  // Takes one whole request from c.in into `ex`; answers a refusal.
  RequestParse::Kind parse(Conn& c, Exchange& ex) {
    const RequestParse p =
        parse_request(c.in, server.o.max_header_bytes, server.o.max_body_bytes, ex);
    switch (p.kind) {
      case RequestParse::kIncomplete:
        if (p.expect_continue && !c.continue_sent) {
          c.continue_sent = true;
          c.out += "HTTP/1.1 100 Continue\r\n\r\n";
        }
        return p.kind;
      case RequestParse::kRefused:
        refuse(c, p.status, p.message);
        return p.kind;
      case RequestParse::kRequest:
        break;
    }
    c.in.erase(0, p.consumed);
    c.continue_sent = false;
    if (!c.in.empty()) c.request_start = SteadyClock::now();
    ex.req.remote_addr = c.remote_addr;
    ex.req.remote_port = c.remote_port;
    return p.kind;
  }

  // Writes what is pending on `c`, then parses and starts the requests waiting on it, one at a
  // time: the next is parsed only once the answer before it is written (a streamed body is
  // written by a worker straight to the socket). False: closed.
  bool process(Conn& c) {
    for (;;) {
      if (!c.out.empty() || c.close_after) {
        if (!flush(c)) return false;
        if (!c.out.empty()) return true;  // EPOLLOUT goes on
      }
      if (c.busy || c.in.empty()) break;
      auto ex = std::make_unique<Exchange>();
      const RequestParse::Kind kind = parse(c, *ex);
      if (kind == RequestParse::kIncomplete) break;
      if (kind == RequestParse::kRefused) continue;  // written and closed above
      ex->conn = c.id;
      ex->loop = index;
      if (server.stopping) ex->keep_alive = false;  // its answer says the connection closes
      LoopAnswer how = LoopAnswer::kWorker;
      if (server.o.on_loop) {
        try {
          how = server.o.on_loop(*ex);
        } catch (const std::exception&) {
          how = LoopAnswer::kWorker;  // the worker's handler answers the error properly
        }
      }
      switch (how) {
        case LoopAnswer::kAnswered:
          EventServer::serialize(*ex);
          answer(c, *ex);
          break;
        case LoopAnswer::kBatched:
          // Out of the epoll set until the batcher gives it back, as with a worker.
          c.busy = true;
          unregister(c);
          batch.push_back(std::move(ex));
          break;
        case LoopAnswer::kWorker:
          hand_to_worker(c, std::move(ex));
          break;
      }
    }
    if (!c.out.empty()) return flush(c);  // a 100 Continue
    if (c.peer_closed && !c.busy) {
      close_conn(c.id);
      return false;
    }
    return true;
  }

  // The connection leaves the epoll set while a worker has its request: the loop never reads,
  // writes or closes a busy connection, so the worker may write a streamed body to the socket.
  void hand_to_worker(Conn& c, std::unique_ptr<Exchange> ex) {
    c.busy = true;
    unregister(c);
    ex->res = httplib::Response{};
    ex->state.reset();
    ex->fd = c.fd;
    server.to_worker(std::move(ex));
  }

  // The requests this pass batched go to the batcher in one hand-over.
  void send_batch() {
    if (batch.empty()) return;
    server.to_batcher(std::move(batch));
    batch.clear();
  }

  void take_mail() {
    std::uint64_t n;
    while (::read(wake, &n, sizeof n) > 0) {
    }
    std::vector<int> fds;
    std::vector<std::unique_ptr<Exchange>> done;
    {
      std::lock_guard lock(mailbox_mutex);
      fds.swap(new_fds);
      done.swap(finished);
    }
    for (const int fd : fds) {
      if (server.stopping) {
        ::close(fd);
        --server.connections;
      } else {
        adopt(fd);
      }
    }
    for (auto& ex : done) {
      const auto it = conns.find(ex->conn);
      if (it == conns.end()) continue;
      Conn& c = *it->second;
      if (ex->to_worker) {  // a batched request its batch could not finish
        ex->to_worker = false;
        hand_to_worker(c, std::move(ex));
        continue;
      }
      if (ex->streamed) {
        close_conn(c.id);
        continue;
      }
      set_events(c, true, false);
      answer(c, *ex);
      process(c);
    }
  }

  void sweep(SteadyClock::time_point now) {
    const auto& o = server.o;
    std::vector<std::uint64_t> expired;
    std::vector<Conn*> late;
    for (auto& [id, cp] : conns) {
      Conn& c = *cp;
      if (c.busy) continue;
      if (!c.out.empty()) {
        if (now - c.last_io > o.write_timeout) expired.push_back(id);
      } else if (server.stopping) {
        expired.push_back(id);
      } else if (!c.in.empty()) {
        if (now - c.request_start > o.request_timeout) late.push_back(&c);
      } else if (now - c.last_io > o.idle_timeout) {
        expired.push_back(id);
      }
    }
    for (const std::uint64_t id : expired) close_conn(id);
    for (Conn* c : late) {
      refuse(
          *c, 408,
          fmt::format("the request did not arrive whole within {} ms", o.request_timeout.count()));
      flush(*c);
    }
  }

  void run() {
    if (listening) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = kListenKey;
      ::epoll_ctl(ep, EPOLL_CTL_ADD, server.listen_fd, &ev);
    }
    std::vector<epoll_event> events(256);
    next_sweep = SteadyClock::now() + std::chrono::seconds(1);
    bool saw_stop = false;
    for (;;) {
      const bool stopping = server.stopping.load();
      if (stopping && !saw_stop) {
        saw_stop = true;
        stop_listening();
        next_sweep = SteadyClock::now();  // idle connections close now
      }
      if (stopping && conns.empty()) break;
      const int n =
          ::epoll_wait(ep, events.data(), static_cast<int>(events.size()), stopping ? 50 : 1000);
      if (n < 0 && errno != EINTR) break;
      for (int i = 0; i < n; ++i) {
        const epoll_event& e = events[static_cast<std::size_t>(i)];
        if (e.data.u64 == kListenKey) {
          accept_all();
          continue;
        }
        if (e.data.u64 == kWakeKey) {
          take_mail();
          continue;
        }
        const auto it = conns.find(e.data.u64);
        if (it == conns.end()) continue;
        Conn& c = *it->second;
        if (c.busy) continue;
        if ((e.events & EPOLLERR) != 0) {
          close_conn(c.id);
          continue;
        }
        if ((e.events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP)) != 0 && !read_some(c)) continue;
        process(c);
      }
      send_batch();
      const auto now = SteadyClock::now();
      if (now >= next_sweep) {
        sweep(now);
        next_sweep = now + (server.stopping ? std::chrono::milliseconds(50)
                                            : std::chrono::milliseconds(1000));
      }
    }
  }
};

EventServer::Impl::Impl(EventServerOptions options) : o(std::move(options)) {
  if (o.loops < 1) o.loops = 1;
  if (o.workers < 1) o.workers = 1;
}

EventServer::Impl::~Impl() {
  {
    std::lock_guard lock(batch_mutex);
    batcher_stop = true;
  }
  batch_ready.notify_all();
  if (batcher.joinable()) batcher.join();
  {
    std::lock_guard lock(work_mutex);
    workers_stop = true;
  }
  work_ready.notify_all();
  for (auto& t : workers) {
    if (t.joinable()) t.join();
  }
  loops.clear();
  if (listen_fd >= 0) ::close(listen_fd);
}

void EventServer::Impl::worker_main() {
  for (;;) {
    std::unique_ptr<Exchange> ex;
    {
      std::unique_lock lock(work_mutex);
      work_ready.wait(lock, [&] { return workers_stop || !work.empty(); });
      if (work.empty()) return;
      ex = std::move(work.front());
      work.pop_front();
    }
    try {
      o.handle(*ex);
    } catch (const std::exception& e) {
      ex->res = httplib::Response{};
      if (o.refuse) o.refuse(*ex, 500, e.what());
      if (ex->res.status <= 0) ex->res.status = 500;
    }
    if (stopping) ex->keep_alive = false;  // the loop closes it after this answer
    try {
      if (ex->res.content_provider_) {
        stream(*ex);
        ex->streamed = true;
      } else {
        EventServer::serialize(*ex);
      }
    } catch (const std::exception&) {
      ex->streamed = true;  // nothing sensible to write: close
    }
    Loop& loop = *loops[ex->loop];
    loop.post_finished(std::move(ex));
  }
}

void EventServer::Impl::batcher_main() {
  std::vector<std::unique_ptr<Exchange>> items;
  std::vector<Exchange*> ptrs;
  std::vector<std::vector<std::unique_ptr<Exchange>>> by_loop(loops.size());
  for (;;) {
    {
      std::unique_lock lock(batch_mutex);
      batch_ready.wait(lock, [&] { return batcher_stop || !batched.empty(); });
      if (batched.empty()) return;
      items.swap(batched);
    }
    ptrs.clear();
    for (auto& ex : items) ptrs.push_back(ex.get());
    try {
      o.on_loop_batch(ptrs);
    } catch (const std::exception&) {
      for (Exchange* ex : ptrs) ex->to_worker = true;  // each answered by its handler
    }
    for (auto& ex : items) {
      if (!ex->to_worker) {
        if (stopping) ex->keep_alive = false;
        EventServer::serialize(*ex);
      }
      by_loop[ex->loop].push_back(std::move(ex));
    }
    items.clear();
    for (std::size_t i = 0; i < loops.size(); ++i) {
      if (!by_loop[i].empty()) loops[i]->post_finished(by_loop[i]);
    }
  }
}

// A body from a content provider, written by this worker to the socket it owns meanwhile, then
// the connection closes. Streamed bodies (log reads and follows) are not compressed: a follow's
// lines must leave as they come.
void EventServer::Impl::stream(Exchange& ex) {
  httplib::Response& res = ex.res;
  const int status = res.status <= 0 ? 200 : res.status;
  const bool chunked = res.is_chunked_content_provider_;
  std::string head = fmt::format("HTTP/1.1 {} {}\r\n", status, reason_phrase(status));
  for (const auto& [name, value] : res.headers) {
    if (iequals(name, "Content-Length") || iequals(name, "Connection") ||
        iequals(name, "Transfer-Encoding") || iequals(name, "Content-Encoding")) {
      continue;
    }
    head += name;
    head += ": ";
    head += value;
    head += "\r\n";
  }
  head += chunked ? std::string("Transfer-Encoding: chunked\r\n")
                  : fmt::format("Content-Length: {}\r\n", res.content_length_);
  head += "Connection: close\r\n\r\n";
  const int fd = ex.fd;
  const auto timeout = o.write_timeout;
  bool ok = write_all(fd, head.data(), head.size(), timeout);
  if (!ok || ex.head) {
    res.content_provider_success_ = ok;
    return;
  }
  bool data_available = true;
  std::size_t offset = 0;
  httplib::DataSink sink;
  std::string chunk;
  sink.write = [&](const char* data, std::size_t n) {
    if (!ok) return false;
    if (n == 0) return true;
    if (chunked) {
      chunk = fmt::format("{:x}\r\n", n);
      chunk.append(data, n);
      chunk += "\r\n";
      ok = write_all(fd, chunk.data(), chunk.size(), timeout);
    } else {
      ok = write_all(fd, data, n, timeout);
    }
    offset += n;
    return ok;
  };
  sink.done = [&] {
    if (!data_available) return;
    data_available = false;
    if (chunked && ok) ok = write_all(fd, "0\r\n\r\n", 5, timeout);
  };
  sink.is_writable = [&] { return ok && socket_alive(fd); };
  while (ok && data_available) {
    if (!chunked && offset >= res.content_length_) break;
    const std::size_t remaining = chunked ? 0 : res.content_length_ - offset;
    if (!res.content_provider_(offset, remaining, sink)) ok = false;
  }
  res.content_provider_success_ = ok;
}

EventServer::EventServer(EventServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

EventServer::~EventServer() { stop(); }

int EventServer::bind(const std::string& host, int port) {
  if (impl_->listen_fd >= 0) throw std::runtime_error("EventServer::bind: bound already");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    throw std::runtime_error(
        fmt::format("cannot listen on {}:{}: {}", host, port, ::gai_strerror(rc)));
  }
  std::string error = "no address";
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd =
        ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 1024) != 0) {
      error = std::strerror(errno);
      ::close(fd);
      continue;
    }
    impl_->listen_fd = fd;
    break;
  }
  ::freeaddrinfo(found);
  if (impl_->listen_fd < 0) {
    throw std::runtime_error(fmt::format("cannot listen on {}:{}: {}", host, port, error));
  }
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  ::getsockname(impl_->listen_fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int bound = addr.ss_family == AF_INET6
                        ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                        : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  for (int i = 0; i < impl_->o.loops; ++i) {
    impl_->loops.push_back(std::make_unique<Loop>(*impl_, static_cast<std::size_t>(i)));
  }
  impl_->loops.front()->listening = true;
  return bound;
}

void EventServer::serve() {
  Impl& s = *impl_;
  if (s.listen_fd < 0) throw std::runtime_error("EventServer::serve: bind() first");
  for (int i = 0; i < s.o.workers; ++i) s.workers.emplace_back([&s] { s.worker_main(); });
  if (s.o.on_loop_batch) s.batcher = std::thread([&s] { s.batcher_main(); });
  std::vector<std::thread> others;
  for (std::size_t i = 1; i < s.loops.size(); ++i) {
    others.emplace_back([&s, i] { s.loops[i]->run(); });
  }
  s.loops.front()->run();
  for (auto& t : others) t.join();
  // Every connection is closed, so no batch is left in flight.
  if (s.batcher.joinable()) {
    {
      std::lock_guard lock(s.batch_mutex);
      s.batcher_stop = true;
    }
    s.batch_ready.notify_all();
    s.batcher.join();
  }
  {
    std::lock_guard lock(s.work_mutex);
    s.workers_stop = true;
  }
  s.work_ready.notify_all();
  for (auto& t : s.workers) t.join();
  s.workers.clear();
}

void EventServer::stop() {
  if (impl_->stopping.exchange(true)) return;
  for (auto& loop : impl_->loops) loop->wake_up();
}

}  // namespace falcon::serve
