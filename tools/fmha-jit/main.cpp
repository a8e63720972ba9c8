// fmha-jit: the command-line front end of the kernel cache. Parses the command line, sets up
// logging, runs the selected subcommand and turns any failure into one error line and exit 1.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <exception>
#include <string>
#include <vector>

#include "cache/cache_dir.hpp"
#include "dispatcher/environment.hpp"
#include "fmha_jit/error.hpp"
#include "tools/fmha-jit/cli.hpp"

namespace fmha_jit::cli {

void add_common_options(CLI::App& app, GlobalOptions& g) {
  app.add_option("--cache-dir", g.cache_dir, "Kernel cache root")
      ->capture_default_str()
      ->type_name("DIR");
  auto* verbose = app.add_flag("-v,--verbose", g.verbose, "Debug logging and per-kernel detail");
  auto* quiet = app.add_flag("-q,--quiet", g.quiet, "Only warnings, errors and requested data");
  verbose->excludes(quiet);
}

}  // namespace fmha_jit::cli

namespace {

// Logs go to stderr so that --json output on stdout stays parseable; the pattern makes the
// library's warnings read "fmha-jit: warning: ..." and the final error "fmha-jit: error: ...".
void setup_logging() {
  using fmha_jit::cli::kLogPattern;
  auto logger = spdlog::stderr_color_mt("fmha-jit");
  logger->set_pattern(kLogPattern);
  spdlog::set_default_logger(logger);
}

// Compiler messages span lines ("Tried:\n..."); the error report is one line by contract.
std::string one_line(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  std::string out;
  for (char c : text) {
    if (c == '\n') {
      out += "; ";
    } else {
      out += c;
    }
  }
  return out;
}

int fail(const std::string& message) {
  spdlog::error("{}", one_line(message));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace fmha_jit::cli;
  setup_logging();

  CLI::App app{"Prebuild, inspect and ship the fused-attention JIT kernel cache.", "fmha-jit"};
  app.set_version_flag("--version", FMHA_JIT_VERSION);
  // At most one; "none" is reported after parsing, so that an unknown word or flag is named as
  // such instead of CLI11's "A subcommand is required".
  app.require_subcommand(0, 1);

  GlobalOptions g;
  try {
    g.cache_dir = fmha_jit::cache::default_cache_root().string();
  } catch (const std::exception& e) {  // no HOME and no usable temp directory
    return fail(e.what());
  }
  add_common_options(app, g);

  std::vector<Command> commands = {
      add_prebuild_command(app, g), add_list_command(app, g),  add_info_command(app, g),
      add_verify_command(app, g),   add_clear_command(app, g), add_export_command(app, g),
      add_import_command(app, g),   add_arch_command(app, g),  add_bench_jit_command(app, g),
      add_run_command(app, g),      add_bench_command(app, g),
  };
  for (auto& c : commands) add_common_options(*c.app, g);
  // Set after the subcommands exist: CLI11 copies a parent's footer into subcommands made later.
  app.footer("Run `fmha-jit COMMAND --help` for the options of one command.");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (app.get_subcommands().empty()) {
    std::string names;
    for (const auto& c : commands) names += (names.empty() ? "" : ", ") + c.app->get_name();
    return app.exit(CLI::RequiredError("A command (one of: " + names + ")"));
  }
  if (g.verbose) spdlog::set_level(spdlog::level::debug);
  if (g.quiet) spdlog::set_level(spdlog::level::warn);

  try {
    // Before any command: a variable set to a value not accepted fails every command alike.
    fmha_jit::dispatch::check_environment();
    for (auto& c : commands) {
      if (app.got_subcommand(c.app)) c.run();
    }
  } catch (const fmha_jit::Error& e) {
    spdlog::debug("error code: {}", fmha_jit::to_string(e.code()));
    return fail(e.what());
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  return 0;
}
