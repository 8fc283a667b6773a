// The `longattn` command: `run` (one forward, checked against the reference) and `bench`
// (a sweep). Bad command lines print one line on stderr and exit 2.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "commands.h"

int main(int argc, char** argv) {
  using namespace longattn::tools;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (const std::string& a : args)
    if (a == "--help" || a == "-h" || a == "help") {
      std::fputs(usage_text().c_str(), stdout);
      return 0;
    }
  if (!args.empty() && args[0] == "--version") {
    std::printf("longattn %s\n", longattn::version());
    return 0;
  }
  if (args.empty()) {
    std::fputs(usage_text().c_str(), stderr);
    return 2;
  }
  const std::string cmd = args[0];
  args.erase(args.begin());
  try {
    if (cmd == "run") return run_command(args);
    if (cmd == "bench") return bench_command(args);
    throw UsageError(cmd.rfind("-", 0) == 0 ? "unknown option " + cmd
                                             : "unknown command '" + cmd + "' (run, bench, --help)");
  } catch (const UsageError& e) {
    std::fprintf(stderr, "longattn: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "longattn: error: %s\n", e.what());
    return 1;
  }
}
