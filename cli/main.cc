// falcon: the command-line interface over ClusterFabric. Thin: parse, call, print.
#include <iostream>

int main(int argc, char** argv) {
  (void)argc;
  (void)argv;
  std::cerr << "falcon: commands are not wired yet\n";
  return 1;
}
