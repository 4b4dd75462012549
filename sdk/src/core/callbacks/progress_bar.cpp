#include "core/callbacks/progress_bar.hpp"

#include <unistd.h>

#include <cmath>

namespace kx::core {
namespace {

constexpr int kBarWidth = 20;
constexpr double kRedrawSeconds = 0.05;  // Keras redraws at most every 50 ms

std::string format_per_step(double seconds_per_step) {
  char buf[32];
  if (seconds_per_step >= 1 || seconds_per_step == 0)
    std::snprintf(buf, sizeof buf, "%.0fs/step", seconds_per_step);
  else if (seconds_per_step >= 1e-3)
    std::snprintf(buf, sizeof buf, "%.0fms/step", seconds_per_step * 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.0fus/step", seconds_per_step * 1e6);
  return buf;
}

std::string format_metrics(const Metrics& m) {
  std::string s;
  char buf[64];
  for (const auto& [name, value] : m) {
    std::snprintf(buf, sizeof buf, " - %s: %.4f", name.c_str(), value);
    s += buf;
  }
  return s;
}

}  // namespace

ProgressBar::ProgressBar(int verbose, std::FILE* out)
    : verbose_(verbose), out_(out), terminal_(out && isatty(fileno(out))) {}

double ProgressBar::elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

void ProgressBar::message(const std::string& line) {
  if (verbose_ <= 0) return;
  // On a terminal the line takes the place of a bar drawn in the middle of an epoch, which the next
  // update draws again below it.
  if (verbose_ == 1 && terminal_)
    std::fprintf(out_, "\r%s\x1b[K\n", line.c_str());
  else
    std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

void ProgressBar::begin_epoch(int epoch, int epochs, int64_t steps, int64_t first_step) {
  steps_ = steps;
  first_step_ = first_step;
  start_ = last_draw_ = Clock::now();
  message("Epoch " + std::to_string(epoch + 1) + "/" + std::to_string(epochs));
}

bool ProgressBar::due(int64_t step) const {
  if (verbose_ != 1 || !terminal_ || step >= steps_) return false;
  return step <= 1 || std::chrono::duration<double>(Clock::now() - last_draw_).count() >= kRedrawSeconds;
}

void ProgressBar::update(int64_t step, const Metrics& m) {
  if (!due(step)) return;
  last_draw_ = Clock::now();
  std::fprintf(out_, "\r%s\x1b[K", format_line(1, true, step, steps_, elapsed(), m, first_step_).c_str());
  std::fflush(out_);
}

void ProgressBar::end_epoch(const Metrics& m) {
  if (verbose_ <= 0) return;
  const std::string line = format_line(verbose_, terminal_, steps_, steps_, elapsed(), m, first_step_);
  std::fprintf(out_, "%s%s\n", verbose_ == 1 && terminal_ ? "\r" : "", line.c_str());
  std::fflush(out_);
}

std::string ProgressBar::format_line(int verbose, bool terminal, int64_t step, int64_t steps, double seconds,
                                     const Metrics& m, int64_t first_step) {
  const std::string total = std::to_string(steps);
  std::string count = std::to_string(step);
  count = std::string(total.size() > count.size() ? total.size() - count.size() : 0, ' ') + count + "/" + total;
  const double per_step = step > first_step ? seconds / static_cast<double>(step - first_step) : 0.0;
  if (verbose == 2)
    return count + " - " + std::to_string(static_cast<long long>(seconds)) + "s - " + format_per_step(per_step) +
           format_metrics(m);
  const int done = steps > 0 ? static_cast<int>(kBarWidth * step / steps) : kBarWidth;
  std::string bar;
  for (int i = 0; i < done; ++i) bar += "\u2501";
  if (done < kBarWidth) {
    // The part still to do: dimmed segments on a terminal, as Keras draws it; blanks elsewhere.
    if (terminal) bar += "\x1b[2m";
    for (int i = done; i < kBarWidth; ++i) bar += terminal ? "\u2501" : " ";
    if (terminal) bar += "\x1b[0m";
  }
  // While running, the time is the estimate of what is left; at the end, the time taken.
  const double shown = step < steps ? per_step * static_cast<double>(steps - step) : seconds;
  return count + " " + bar + " " + std::to_string(static_cast<long long>(std::lround(shown))) + "s " +
         format_per_step(per_step) + format_metrics(m);
}

}  // namespace kx::core
