// Progress of a batch of kernel builds on stderr. On a terminal: one bar redrawn in place with
// count, percent, elapsed time and ETA (a ticker keeps the clock moving during long compiles).
// Otherwise (CI logs, pipes): one plain line per finished kernel, "[3/24] compiled NAME (1.23 s)".
// Thread-safe: workers report as they finish.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <thread>

namespace fmha_jit::cli {

class Progress {
 public:
  enum class Style { bar, lines, none };
  // bar when stderr is a terminal, else lines; none when `silent`.
  static Style pick(bool silent);

  // `verbose`: in bar style, also print every step's line above the bar.
  Progress(std::size_t total, Style style, bool verbose);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // One item finished; `what` is e.g. "compiled fmha_fwd_... (1.23 s)". `detail` (an error) is
  // printed under it in every style but none; in bar style only failures and verbose steps show.
  void step(const std::string& what, bool failed, const std::string& detail = {});
  // Clears the bar for good; later output starts on a clean line.
  void finish();

 private:
  void draw_locked();
  void print_above_locked(const std::string& text);
  void tick();

  std::size_t total_;
  std::size_t done_ = 0;
  Style style_;
  bool verbose_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::mutex mutex_;
  std::condition_variable wake_;
  std::thread ticker_;
};

}  // namespace fmha_jit::cli
