// samples/c/parameter_server.c with kx's internal test hooks (config/test_hooks.hpp), which the sample
// linked with libkx cannot reach: this program is the sample's main (built in under another name) with
// the C API's sources and the SDK linked in, and sets the hooks from its own arguments first:
//   ps_hold_file=PATH     a worker waits while PATH exists before it asks for each batch
//   ps_step_delay_ms=N    a worker pauses N ms after each of its steps
// Every argument, these too, then goes to the sample, which ignores the keys it does not know.
#include <chrono>
#include <cstdio>
#include <exception>
#include <string>

#include "config/test_hooks.hpp"

extern "C" int kx_parameter_server_sample_main(int argc, char** argv);

int main(int argc, char** argv) {
  kx::config::TestHooks& hooks = kx::config::test_hooks();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("ps_hold_file=", 0) == 0) {
      hooks.ps_hold_file = a.substr(a.find('=') + 1);
    } else if (a.rfind("ps_step_delay_ms=", 0) == 0) {
      try {
        hooks.ps_step_delay = std::chrono::milliseconds(std::stoi(a.substr(a.find('=') + 1)));
      } catch (const std::exception&) {
        std::fprintf(stderr, "%s: expected a number of milliseconds\n", a.c_str());
        return 2;
      }
    }
  }
  return kx_parameter_server_sample_main(argc, argv);
}
