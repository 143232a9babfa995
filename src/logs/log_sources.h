// The lazy line sources behind stream_log and the polling loop behind follow_log.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "falcon/clock.h"
#include "falcon/log_retriever.h"
#include "gcp/logging_client.h"
#include "logs/rank_query.h"

namespace falcon::logs {

// Lines of the query's entries, oldest first: one entries:list page of 1000 each time the
// previous page is used up. No request before the first next().
std::unique_ptr<LogLineSource> make_forward_source(gcp::LoggingClient client, RankQuery query);

// The last `tail_lines` lines, oldest first. The first next() reads newest-first pages of
// min(tail_lines, 1000) entries until it has `tail_lines` accepted entries or the log ends (one
// request when tail_lines <= 1000 and the server's entries all belong to the query), and holds
// those lines. tail_lines <= 0: no lines and no request.
std::unique_ptr<LogLineSource> make_tail_source(gcp::LoggingClient client, RankQuery query,
                                                int tail_lines);

// follow_log's loop (see CloudLogRetriever::follow_log). `reads_per_minute` bounds the pace.
void follow_entries(const gcp::LoggingClient& client, const RankQuery& query,
                    std::optional<int> tail_lines, const FollowOptions& options,
                    int reads_per_minute, const Clock& clock,
                    const std::function<void(const std::string&)>& on_line);

}  // namespace falcon::logs
