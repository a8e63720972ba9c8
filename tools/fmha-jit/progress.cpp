#include "tools/fmha-jit/progress.hpp"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>

#include "tools/fmha-jit/cli.hpp"
#include "tools/fmha-jit/format.hpp"

namespace fmha_jit::cli {
namespace {

constexpr int kBarWidth = 30;
// Often enough for the elapsed clock to look alive, rarely enough to cost nothing.
constexpr auto kTickInterval = std::chrono::milliseconds(250);

// Goes back to column 0 and erases the line (ANSI EL), so a shorter redraw leaves no tail.
constexpr const char* kClearLine = "\r\033[K";

}  // namespace

Progress::Style Progress::pick(bool silent) {
  if (silent) return Style::none;
  return ::isatty(::fileno(stderr)) ? Style::bar : Style::lines;
}

Progress::Progress(std::size_t total, Style style, bool verbose)
    : total_(total), style_(style), verbose_(verbose) {
  if (style_ != Style::bar || total_ == 0) return;
  // A library warning (a spilling kernel, say) would otherwise be appended to the bar's line.
  spdlog::set_pattern(std::string(kClearLine) + kLogPattern);
  std::lock_guard lock(mutex_);
  draw_locked();
  ticker_ = std::thread([this] { tick(); });
}

Progress::~Progress() { finish(); }

void Progress::tick() {
  std::unique_lock lock(mutex_);
  while (!finished_) {
    wake_.wait_for(lock, kTickInterval);
    if (!finished_) draw_locked();
  }
}

void Progress::draw_locked() {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double fraction = total_ ? static_cast<double>(done_) / static_cast<double>(total_) : 1.0;
  const int filled = static_cast<int>(fraction * kBarWidth);
  // The ETA assumes the remaining kernels cost what the finished ones did on average.
  const std::string eta = done_ == 0 ? "--"
                                     : human_seconds(elapsed / static_cast<double>(done_) *
                                                     static_cast<double>(total_ - done_));
  fmt::print(stderr, "{}[{:#<{}}{:.<{}}] {}/{} {:3.0f}%  elapsed {}  ETA {}", kClearLine, "",
             filled, "", kBarWidth - filled, done_, total_, fraction * 100, human_seconds(elapsed),
             eta);
  std::fflush(stderr);
}

void Progress::print_above_locked(const std::string& text) {
  fmt::print(stderr, "{}{}\n", kClearLine, text);
}

void Progress::step(const std::string& what, bool failed, const std::string& detail) {
  std::lock_guard lock(mutex_);
  ++done_;
  if (style_ == Style::none) return;
  const std::string line = fmt::format("[{}/{}] {}", done_, total_, what);
  if (style_ == Style::lines) {
    fmt::print(stderr, "{}\n", line);
    if (!detail.empty()) fmt::print(stderr, "{}\n", detail);
    std::fflush(stderr);
    return;
  }
  if (failed || verbose_) print_above_locked(line);
  if (!detail.empty()) print_above_locked(detail);
  draw_locked();
}

void Progress::finish() {
  {
    std::lock_guard lock(mutex_);
    if (finished_) return;
    finished_ = true;
    if (style_ == Style::bar && total_ > 0) {
      draw_locked();  // the final 100% state, left on screen
      fmt::print(stderr, "\n");
      std::fflush(stderr);
      spdlog::set_pattern(kLogPattern);
    }
  }
  wake_.notify_all();
  if (ticker_.joinable()) ticker_.join();
}

}  // namespace fmha_jit::cli
