// The xpk adapter that the prober, the workload manager and credential warm-up share: it runs
// `xpk workload ...` with a private kubeconfig per call and holds what is learnt once per
// configuration (whether this xpk has --namespace). Its interface is internal (src/xpk/
// xpk_cli.h); the public API only creates one and hands it on:
//
//   auto xpk = falcon::make_xpk_cli(falcon::make_posix_command_runner(), config.xpk);
//   falcon::ClusterProber prober(xpk, clock);
//   falcon::XpkWorkloadManager workloads(xpk, clock);
#pragma once

#include <memory>

#include "falcon/command_runner.h"
#include "falcon/config.h"

namespace falcon {
namespace xpk {
class XpkCli;  // opaque outside the library
}  // namespace xpk

// Resolves the state directory now (created lazily). Throws FalconError only if no state
// directory can be determined.
std::shared_ptr<const xpk::XpkCli> make_xpk_cli(std::shared_ptr<CommandRunner> runner,
                                                XpkSettings settings);

}  // namespace falcon
