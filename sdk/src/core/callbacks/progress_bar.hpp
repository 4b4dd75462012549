// Keras's progress output: "Epoch 1/2", then
// "1563/1563 ━━━━━━━━━━━━━━━━━━━━ 7s 4ms/step - accuracy: 0.8884 - loss: 0.3830 - val_...".
// verbose 1 redraws the bar in place on a terminal and prints one line per epoch otherwise;
// verbose 2 prints "1563/1563 - 7s - 4ms/step - ..." once per epoch.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
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
  void begin_epoch(int epoch, int epochs, int64_t steps, int64_t first_step = 0);
  // Whether update(step, ...) would redraw now: the metrics are needed only then.
  bool due(int64_t step) const;
  void update(int64_t step, const Metrics& m);
  void end_epoch(const Metrics& m);

  // Exposed for tests: the line for `step` of `steps` after `seconds`.
  static std::string format_line(int verbose, bool terminal, int64_t step, int64_t steps, double seconds,
                                 const Metrics& m, int64_t first_step = 0);

 private:
  using Clock = std::chrono::steady_clock;
  double elapsed() const;
  int verbose_;
  std::FILE* out_;
  bool terminal_;
  int64_t steps_ = 0;
  int64_t first_step_ = 0;
  Clock::time_point start_, last_draw_;
};

}  // namespace kx::core
