// LSTM and GRU runs as ONNX's LSTM and GRU operators (opset 13): the layer's input, [N, steps,
// features] in kx's order, made time-major for the operator, and its output made batch-major again.
#pragma once
#include <vector>

#include "core/layers/onnx_layer_export.hpp"
#include "core/layers/recurrent_sequence.hpp"

namespace kx::core {

// One run (an LSTM or GRU layer), or a Bidirectional's forward and backward runs (outputs side by
// side, the backward sequence in input order, as Keras's merge_mode "concat"); the layer's weights
// are the runs' in params() order. What ONNX cannot compute as kx does (a mask, an activation without
// an ONNX function) is not_exportable.
void export_recurrent_onnx(OnnxLayerExport& e, const std::vector<RecurrentSettings>& runs);

}  // namespace kx::core
