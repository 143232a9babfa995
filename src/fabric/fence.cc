#include "falcon/fence.h"

#include <charconv>
#include <cstdlib>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>

#include "falcon/clock.h"
#include "falcon/errors.h"
#include "falcon/gcs_uri.h"
#include "falcon/http_client.h"
#include "falcon/log_retriever.h"

namespace falcon {

std::string fence_object_uri(const std::string& fence, const std::string& name) {
  GcsUri at = parse_gcs_uri(fence);
  if (!at.object.empty() && at.object.back() != '/') at.object += '/';
  const std::string uri = fmt::format("gs://{}/{}{}/epoch", at.bucket, at.object, name);
  parse_gcs_uri(uri);  // the whole name within Cloud Storage's rules
  return uri;
}

std::optional<FenceTicket> fence_ticket_from_environment() {
  const char* uri = std::getenv(kFenceUriEnv);
  const char* epoch = std::getenv(kFenceEpochEnv);
  const bool has_uri = uri != nullptr && uri[0] != '\0';
  const bool has_epoch = epoch != nullptr && epoch[0] != '\0';
  if (!has_uri && !has_epoch) return std::nullopt;
  if (!has_uri || !has_epoch) {
    throw std::invalid_argument(fmt::format("{} is set but {} is not: both or neither",
                                            has_uri ? kFenceUriEnv : kFenceEpochEnv,
                                            has_uri ? kFenceEpochEnv : kFenceUriEnv));
  }
  FenceTicket ticket{uri, 0};
  const std::string_view text(epoch);
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ticket.epoch);
  if (ec != std::errc() || end != text.data() + text.size() || ticket.epoch < 1) {
    throw std::invalid_argument(fmt::format("{}: '{}' is not an epoch (a whole number >= 1)",
                                            kFenceEpochEnv, text.substr(0, 32)));
  }
  parse_gcs_uri(ticket.uri);
  return ticket;
}

std::int64_t check_fence(const FenceTicket& ticket, const GcpSettings& settings) {
  if (ticket.epoch < 1) {
    throw std::invalid_argument(
        fmt::format("epoch: expected a whole number >= 1, got {}", ticket.epoch));
  }
  LogRetrieverOptions options;
  options.http = make_curl_http_client();
  options.clock = std::make_shared<SystemClock>();
  options.settings = settings;
  const CloudLogRetriever storage(std::move(options));
  const std::int64_t current = storage.read_fence_epoch(ticket.uri);
  if (current > ticket.epoch) throw FencedError(ticket.uri, ticket.epoch, current);
  return current;
}

}  // namespace falcon
