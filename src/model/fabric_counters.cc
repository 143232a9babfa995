#include "falcon/fabric_counters.h"

#include "falcon/http_client.h"

namespace falcon {

void FabricCounters::xpk_call(std::string_view verb, std::string_view result) {
  std::lock_guard lock(mutex_);
  ++xpk_calls_[{std::string(verb), std::string(result)}];
}

void FabricCounters::logging_read(int status) {
  if (status >= 200 && status <= 299) {
    logging_ok_.fetch_add(1, std::memory_order_relaxed);
  } else if (status == 429) {
    logging_rate_limited_.fetch_add(1, std::memory_order_relaxed);
  } else {
    logging_failed_.fetch_add(1, std::memory_order_relaxed);
  }
}

void FabricCounters::upload_bytes(std::uint64_t bytes) {
  upload_requests_.fetch_add(1, std::memory_order_relaxed);
  upload_bytes_.fetch_add(bytes, std::memory_order_relaxed);
}

FabricCounters::Snapshot FabricCounters::snapshot() const {
  Snapshot s;
  {
    std::lock_guard lock(mutex_);
    s.xpk_calls = xpk_calls_;
  }
  s.logging_ok = logging_ok_.load(std::memory_order_relaxed);
  s.logging_rate_limited = logging_rate_limited_.load(std::memory_order_relaxed);
  s.logging_failed = logging_failed_.load(std::memory_order_relaxed);
  s.logging_reads = s.logging_ok + s.logging_rate_limited + s.logging_failed;
  s.upload_requests = upload_requests_.load(std::memory_order_relaxed);
  s.upload_bytes = upload_bytes_.load(std::memory_order_relaxed);
  return s;
}

namespace {

// The path of `url` (scheme and authority dropped, query kept).
std::string_view url_path(std::string_view url) {
  const auto scheme = url.find("://");
  if (scheme == std::string_view::npos) return url;
  const auto slash = url.find('/', scheme + 3);
  return slash == std::string_view::npos ? std::string_view() : url.substr(slash);
}

class CountingHttpClient final : public HttpClient {
 public:
  CountingHttpClient(std::shared_ptr<HttpClient> inner, std::shared_ptr<FabricCounters> counters)
      : inner_(std::move(inner)), counters_(std::move(counters)) {}

  HttpResponse send(const HttpRequest& request) override {
    std::string_view path = url_path(request.url);
    path = path.substr(0, path.find('?'));
    constexpr std::string_view kList = "/entries:list";
    const bool logging_read =
        path.size() >= kList.size() && path.substr(path.size() - kList.size()) == kList;
    const bool upload = (request.method == "POST" || request.method == "PUT") &&
                        path.rfind("/upload/storage/", 0) == 0;
    if (upload) counters_->upload_bytes(request.body.size());
    if (!logging_read) return inner_->send(request);
    try {
      HttpResponse response = inner_->send(request);
      counters_->logging_read(response.status);
      return response;
    } catch (...) {
      counters_->logging_read(0);
      throw;
    }
  }

 private:
  std::shared_ptr<HttpClient> inner_;
  std::shared_ptr<FabricCounters> counters_;
};

}  // namespace

std::shared_ptr<HttpClient> make_counting_http_client(std::shared_ptr<HttpClient> inner,
                                                      std::shared_ptr<FabricCounters> counters) {
  if (!counters) return inner;
  return std::make_shared<CountingHttpClient>(std::move(inner), std::move(counters));
}

}  // namespace falcon
