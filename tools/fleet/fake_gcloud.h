// fleet-gcloud: the local fleet's stand-in for the one gcloud command the layer runs itself,
// `gcloud container clusters get-credentials` (`falcon cluster warm-up`; xpk runs its own). It
// answers as gcloud 528 does, from the fleet's clusters:
//
//   fleet-gcloud container clusters get-credentials CLUSTER --project=P --location=L
//       stderr "Fetching cluster endpoint and auth data." and "kubeconfig entry generated for
//       CLUSTER.", exit 0, the context gke_P_L_CLUSTER merged into the first file of $KUBECONFIG
//       (else ~/.kube/config) and made current; a cluster the fleet does not have is gcloud's
//       404 ResponseError, exit 1; the fleet's credential latency for the cluster applies.
//   fleet-gcloud version
//       says what it is (for `falcon doctor`), exit 0.
//
// --zone and --region are accepted for --location; --dns-endpoint, --internal-ip and --quiet are
// accepted and change nothing. Anything else is refused with exit 2 and a message naming what
// the stand-in covers. Point it at a running falcon-fleet with FALCON_FLEET_URL.
#pragma once

#include <string>
#include <vector>

#include "fleet/fake_xpk.h"

namespace falcon::fleet {

// Runs one invocation (`args` is argv without the program name) and returns the exit code.
// `api` is null when FALCON_FLEET_URL is not set: get-credentials then says so and exits 1.
int run_fake_gcloud(const std::vector<std::string>& args, FleetApi* api, const FakeXpkEnv& env);

}  // namespace falcon::fleet
