// fleet-gcloud: the gcloud stand-in of the local fleet (see fleet/fake_gcloud.h).
// Point it at a running falcon-fleet with FALCON_FLEET_URL=http://127.0.0.1:PORT.
#include <cstdlib>
#include <iostream>
#include <memory>
#include <thread>

#include "fleet/fake_gcloud.h"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  std::unique_ptr<falcon::fleet::HttpFleetApi> api;
  if (const char* url = std::getenv("FALCON_FLEET_URL"); url != nullptr && *url != '\0') {
    api = std::make_unique<falcon::fleet::HttpFleetApi>(url);
  }
  const falcon::fleet::FakeXpkEnv env{
      std::cout, std::cerr, std::cin,
      [](const std::string& name) -> std::optional<std::string> {
        const char* value = std::getenv(name.c_str());
        if (value == nullptr) return std::nullopt;
        return std::string(value);
      },
      [](std::chrono::milliseconds d) { std::this_thread::sleep_for(d); }};
  return falcon::fleet::run_fake_gcloud(args, api.get(), env);
}
