// What every subcommand of fmha-jit shares: the global options, the way a command reports failure,
// and the registration functions main.cpp calls (one per cmd_*.cpp file).
#pragma once

#include <CLI/CLI.hpp>

#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>

namespace fmha_jit::cli {

// Log lines read "fmha-jit: warning: ..." and, for the final failure, "fmha-jit: error: ...".
inline constexpr const char* kLogPattern = "%n: %l: %v";

struct GlobalOptions {
  std::string cache_dir;  // filled with cache::default_cache_root() before parsing
  bool verbose = false;
  bool quiet = false;

  // Absolute, so that paths printed from it (entries, failed sources) work from any folder.
  std::filesystem::path cache_root() const {
    std::error_code ec;
    auto root = std::filesystem::absolute(cache_dir, ec);
    return ec ? std::filesystem::path(cache_dir) : root;
  }
};

// Thrown by a command whose work finished but failed as a whole (a kernel did not compile, verify
// found bad entries, ...). main() prints the message as the one error line and exits 1.
class CommandFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A registered subcommand and what runs when it was selected. Commands run after parsing, never
// from CLI11 callbacks, so that their exceptions reach main()'s single error handler.
struct Command {
  CLI::App* app = nullptr;
  std::function<void()> run;
};

// --cache-dir, -v/--verbose and -q/--quiet, bound to `g`. Added to the main app and to each
// subcommand, so they are accepted before or after the subcommand name and shown in its --help.
void add_common_options(CLI::App& app, GlobalOptions& g);

Command add_prebuild_command(CLI::App& app, const GlobalOptions& g);
Command add_list_command(CLI::App& app, const GlobalOptions& g);
Command add_info_command(CLI::App& app, const GlobalOptions& g);
Command add_verify_command(CLI::App& app, const GlobalOptions& g);
Command add_clear_command(CLI::App& app, const GlobalOptions& g);
Command add_arch_command(CLI::App& app, const GlobalOptions& g);
Command add_export_command(CLI::App& app, const GlobalOptions& g);
Command add_import_command(CLI::App& app, const GlobalOptions& g);
Command add_bench_jit_command(CLI::App& app, const GlobalOptions& g);
Command add_run_command(CLI::App& app, const GlobalOptions& g);
Command add_bench_command(CLI::App& app, const GlobalOptions& g);

}  // namespace fmha_jit::cli
