// Keras 3's model.summary() text (keras/src/utils/summary_utils.py print_summary, as printed without a
// terminal's colours): the title, a table of the layers (name and class, output shape with the batch
// as None, parameter count, and for a model that is not a chain the layers each reads), and the
// totals with their sizes in bytes.
#include <string>
#include <vector>

#include "core/model/model_impl.hpp"
#include "core/model/summary_table.hpp"
#include "kx/error.hpp"

namespace kx {
namespace {

constexpr int kSequentialLineLength = 88;  // Keras's default_line_length for each layout
constexpr int kFunctionalLineLength = 108;

std::string keras_shape(const Shape& s) {
  std::string out = "(None";
  for (int64_t d : s) out += ", " + std::to_string(d);
  return out + ")";
}

// Keras's " Total params: 101,770 (397.54 KB)" lines; values are float32 (4 bytes) but the optimizer's
// iteration counter, an int64.
std::string totals_line(const char* what, int64_t count, double bytes) {
  return std::string(" ") + what + ": " + core::with_thousands(count) + " (" + core::readable_memory_size(bytes) + ")\n";
}

}  // namespace

std::string Model::Impl::summary(int line_length) const {
  // Wider than any terminal is a caller's mistake: a table of 2^31 columns is gigabytes of text.
  constexpr int kWidestLine = 4096;
  require(line_length >= 0 && line_length <= kWidestLine, Status::InvalidArgument,
          "summary line length must be 0.." + std::to_string(kWidestLine) + ", got " + std::to_string(line_length));
  // A chain prints as Keras's Sequential (no input row, three columns); any other graph as a
  // Functional model, whose table starts with the input and says what each layer reads.
  const bool functional = !net.is_chain();
  if (line_length == 0) line_length = functional ? kFunctionalLineLength : kSequentialLineLength;
  std::vector<core::SummaryColumn> columns = {{"Layer (type)", false}, {"Output Shape", false}, {"Param #", true}};
  std::vector<double> positions = {0.45, 0.80, 1.0};
  if (functional) {
    columns.push_back({"Connected to", false});
    positions = {0.3, 0.56, 0.74, 1.0};
  }
  std::vector<std::vector<std::string>> rows;
  auto tensor_name = [&](int t) { return t == 0 ? net.input_name : net.layers[static_cast<size_t>(t - 1)]->name(); };
  if (functional) rows.push_back({net.input_name + " (InputLayer)", keras_shape(net.shapes.front()), "0", "-"});
  const std::vector<int> order = functional ? net.keras_layer_order() : [&] {
    std::vector<int> o;
    for (int i = 0; i < static_cast<int>(net.layers.size()); ++i) o.push_back(i);
    return o;
  }();
  for (int i : order) {
    const core::Layer& layer = *net.layers[static_cast<size_t>(i)];
    int64_t params = 0;
    for (const core::ParamSpec& p : layer.params()) params += num_elements(p.shape);
    std::vector<std::string> row = {layer.name() + " (" + layer.class_name() + ")",
                                    keras_shape(net.shapes[static_cast<size_t>(i) + 1]), core::with_thousands(params)};
    if (functional) {
      std::string reads;
      for (int t : net.inputs[static_cast<size_t>(i)]) reads += (reads.empty() ? "" : ", ") + tensor_name(t) + "[0][0]";
      row.push_back(reads);
    }
    rows.push_back(std::move(row));
  }

  const int64_t trainable = net.num_trainable_params();
  const int64_t frozen = net.num_params - trainable;
  // Keras counts the optimizer's variables once it is built (by the first fit): the iteration count,
  // the learning rate, and a slot per trained value for each moment (Adam's two, SGD's momentum,
  // RMSprop's velocity, momentum and average gradient) and
  // for the moving average (use_ema).
  int64_t slots = 0;
  const bool optimizer_built = compiled && optimizer_steps > 0;
  if (optimizer_built) {
    slots = optimizer.slot_count();
    if (optimizer.use_ema) ++slots;
  }
  const int64_t optimizer_params = optimizer_built ? 2 + slots * trainable : 0;
  const double optimizer_bytes = optimizer_built ? 8.0 + 4.0 + 4.0 * static_cast<double>(slots * trainable) : 0;

  std::string out = std::string("Model: \"") + (functional ? "functional" : "sequential") + "\"\n";
  out += core::render_summary_table(line_length, positions, columns, rows);
  out += totals_line("Total params", net.num_params + optimizer_params,
                     4.0 * static_cast<double>(net.num_params) + optimizer_bytes);
  out += totals_line("Trainable params", trainable, 4.0 * static_cast<double>(trainable));
  out += totals_line("Non-trainable params", frozen, 4.0 * static_cast<double>(frozen));
  if (optimizer_built) out += totals_line("Optimizer params", optimizer_params, optimizer_bytes);
  return out;
}

std::string Model::summary(int line_length) const { return impl_->summary(line_length); }

}  // namespace kx
