// fleet-xpk: the xpk-compatible executable of the local fleet (see fleet/fake_xpk.h).
// Point it at a running falcon-fleet with FALCON_FLEET_URL=http://127.0.0.1:PORT.
#include "fleet/fake_xpk.h"

int main(int argc, char** argv) {
  const auto api = falcon::fleet::fleet_api_from_environment();
  return falcon::fleet::run_fake_xpk({argv + 1, argv + argc}, api.get(),
                                     falcon::fleet::process_env());
}
