#include "core/callbacks/progress_bar.hpp"

#include <unistd.h>

#include <cmath>

namespace kx::core {
namespace {

constexpr int kBarWidth = 20;
constexpr double kRedrawSeconds = 0.05;  // Keras redraws at most every 50 ms

// Keras's escapes on a terminal: bold, green, white, reset.
constexpr const char* kBold = "\x1b[1m";
constexpr const char* kGreen = "\x1b[32m";
constexpr const char* kWhite = "\x1b[37m";
constexpr const char* kReset = "\x1b[0m";

std::string printf_string(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);  // %.Nf rounds the exact binary value, ties to even, as Python
  return buf;
}

// Progbar._format_time: " 4ms/step".
std::string format_per_step(double s) {
  if (s >= 1 || s == 0) return printf_string("%.0fs/step", s);
  if (s >= 1e-3) return printf_string("%.0fms/step", s * 1000.0);
  return printf_string("%.0fus/step", s * 1000000.0);
}

// The time left while running: "%ds", "%d:%02d" past a minute, "%d:%02d:%02d" past an hour (Python's
// %d truncates).
std::string format_eta(double eta) {
  char buf[48];
  if (eta > 3600)
    std::snprintf(buf, sizeof buf, "%d:%02d:%02d", static_cast<int>(eta / 3600), static_cast<int>(std::fmod(eta, 3600) / 60),
                  static_cast<int>(std::fmod(eta, 60)));
  else if (eta > 60)
    std::snprintf(buf, sizeof buf, "%d:%02d", static_cast<int>(eta / 60), static_cast<int>(std::fmod(eta, 60)));
  else
    std::snprintf(buf, sizeof buf, "%ds", static_cast<int>(eta));
  return buf;
}

// " - loss: 0.3830": 4 decimals above 1e-3, else "1.0000e-04". verbose 2 compares the value itself
// (not its magnitude) with 1e-3, as Keras's.
std::string format_metrics(const Metrics& m, bool magnitude) {
  std::string s;
  for (const auto& [name, value] : m) {
    const bool fixed = magnitude ? std::fabs(value) > 1e-3 : value > 1e-3;
    s += " - " + name + ": " + printf_string(fixed ? "%.4f" : "%.4e", value);
  }
  return s;
}

}  // namespace

ProgressBar::ProgressBar(int verbose, std::FILE* out)
    : verbose_(verbose), out_(out), terminal_(out && isatty(fileno(out))) {}

double ProgressBar::elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

// Progbar._estimate_step_duration, counting the steps run here (a resumed epoch starts part-way).
double ProgressBar::per_step(int64_t step) const {
  const int64_t done = step - first_step_;
  if (done <= 0) return 0;
  if (after_first_step_ && done > 1)
    return std::chrono::duration<double>(Clock::now() - *after_first_step_).count() / static_cast<double>(done - 1);
  return elapsed() / static_cast<double>(done);
}

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

void ProgressBar::begin(int64_t steps) {
  steps_ = steps;
  first_step_ = 0;
  after_first_step_.reset();
  start_ = last_draw_ = Clock::now();
}

void ProgressBar::begin_epoch(int epoch, int epochs, int64_t steps, int64_t first_step) {
  begin(steps);
  first_step_ = first_step;
  if (epochs > 1) message("Epoch " + std::to_string(epoch + 1) + "/" + std::to_string(epochs));
}

void ProgressBar::step_done(int64_t step) {
  if (step - first_step_ == 1) after_first_step_ = Clock::now();
}

bool ProgressBar::due(int64_t step) const {
  if (verbose_ != 1 || !terminal_ || step >= steps_) return false;
  return step <= 1 || std::chrono::duration<double>(Clock::now() - last_draw_).count() >= kRedrawSeconds;
}

void ProgressBar::update(int64_t step, const Metrics& m) {
  if (!due(step)) return;
  last_draw_ = Clock::now();
  std::fprintf(out_, "\r%s\x1b[K", format_line(1, true, step, steps_, elapsed(), per_step(step), m).c_str());
  std::fflush(out_);
}

void ProgressBar::end_epoch(const Metrics& m) {
  if (verbose_ <= 0) return;
  // verbose 2 never times single steps (Keras updates its bar only at the end): elapsed / steps.
  const double unit = verbose_ == 2 ? (steps_ > first_step_ ? elapsed() / static_cast<double>(steps_ - first_step_) : 0)
                                    : per_step(steps_);
  const std::string line = format_line(verbose_, terminal_, steps_, steps_, elapsed(), unit, m);
  std::fprintf(out_, "%s%s\n", verbose_ == 1 && terminal_ ? "\r" : "", line.c_str());
  std::fflush(out_);
}

std::string ProgressBar::format_line(int verbose, bool terminal, int64_t step, int64_t steps, double elapsed,
                                     double per_step, const Metrics& m) {
  const std::string total = std::to_string(steps);
  std::string count = std::to_string(step);
  count = std::string(total.size() > count.size() ? total.size() - count.size() : 0, ' ') + count + "/" + total;
  if (verbose == 2)
    return count + " - " + printf_string("%.0f", elapsed) + "s - " + format_per_step(per_step) + format_metrics(m, false);
  const auto styled = [terminal](const char* style, const std::string& text) {
    return terminal ? style + text + kReset : text;
  };
  const int done = steps > 0 ? static_cast<int>(kBarWidth * step / steps) : kBarWidth;
  std::string done_part, rest;
  for (int i = 0; i < done; ++i) done_part += "\u2501";
  // The part still to do: Keras's white segments on a terminal; blanks in a log.
  for (int i = done; i < kBarWidth; ++i) rest += terminal ? "\u2501" : " ";
  std::string bar = styled(kBold, count) + " ";
  if (done > 0) bar += styled(kGreen, done_part);
  if (done < kBarWidth) bar += styled(kWhite, rest);
  // While running, the time left; at the end, the time taken.
  const std::string time = step < steps ? format_eta(per_step * static_cast<double>(steps - step))
                                        : printf_string("%.0f", elapsed) + "s";
  return bar + " " + styled(kBold, time) + " " + format_per_step(per_step) + format_metrics(m, true);
}

}  // namespace kx::core
