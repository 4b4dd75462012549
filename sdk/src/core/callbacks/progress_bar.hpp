// Keras 3's progress output (keras/src/utils/progbar.py with ProgbarLogger): "Epoch 1/2" (when there
// are several epochs), then
// "1563/1563 ━━━━━━━━━━━━━━━━━━━━ 7s 4ms/step - accuracy: 0.8884 - loss: 0.3830 - val_...".
// verbose 1 redraws the bar in place on a terminal (with Keras's colours) and prints one line per
// epoch otherwise; verbose 2 prints "1563/1563 - 7s - 4ms/step - ..." once per epoch. evaluate shows
// the same bar without the epoch line.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kx::core {

using Metrics = std::vector<std::pair<std::string, double>>;  // printed in this order

class ProgressBar {
 public:
  ProgressBar(int verbose, std::FILE* out);
  void message(const std::string& line);
  // first_step > 0 when a resumed epoch starts part-way: time per step counts the steps run here.
  // "Epoch i/N" is printed when epochs > 1, as Keras.
  void begin_epoch(int epoch, int epochs, int64_t steps, int64_t first_step = 0);
  // The same without the epoch line (evaluate).
  void begin(int64_t steps);
  // After every step: Keras times the steps after the first (the first is not representative).
  void step_done(int64_t step);
  // Whether update(step, ...) would redraw now: the metrics are needed only then.
  bool due(int64_t step) const;
  void update(int64_t step, const Metrics& m);
  void end_epoch(const Metrics& m);

  // Exposed for tests: the line for `step` of `steps`, `elapsed` seconds after the start, at
  // `per_step` seconds a step. Keras's formats: the count right-aligned to the total's digits, a bar of
  // 20, the time left (while running, "%ds", "m:ss" or "h:mm:ss") or taken (at the end, rounded), the
  // time per step in s, ms or us, and each metric with 4 decimals, or in e-notation at 1e-3 and below.
  static std::string format_line(int verbose, bool terminal, int64_t step, int64_t steps, double elapsed,
                                 double per_step, const Metrics& m);

 private:
  using Clock = std::chrono::steady_clock;
  double elapsed() const;
  double per_step(int64_t step) const;
  int verbose_;
  std::FILE* out_;
  bool terminal_;
  int64_t steps_ = 0;
  int64_t first_step_ = 0;
  Clock::time_point start_, last_draw_;
  std::optional<Clock::time_point> after_first_step_;
};

}  // namespace kx::core
