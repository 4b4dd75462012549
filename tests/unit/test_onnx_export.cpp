// ONNX export from C++ (run under the sanitizers too): a functional model with every layer kind is
// written, and a small protobuf reader here finds its graph, the op types and one initializer per
// weight (and per constant). tests/python/test_onnx_export.py runs such files in OpenCV.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kx/kx.hpp"

namespace kx {
namespace {

// The length-delimited fields of a message, by field number (other wire types skipped).
std::multimap<int, std::string> fields(const std::string& m) {
  std::multimap<int, std::string> out;
  size_t i = 0;
  auto varint = [&] {
    uint64_t v = 0;
    for (int shift = 0; i < m.size(); shift += 7) {
      const auto b = static_cast<unsigned char>(m[i++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) break;
    }
    return v;
  };
  while (i < m.size()) {
    const uint64_t tag = varint();
    switch (tag & 7) {
      case 0: varint(); break;
      case 1: i += 8; break;
      case 5: i += 4; break;
      case 2: {
        const uint64_t n = varint();
        EXPECT_LE(i + n, m.size()) << "a field runs past its message";
        out.emplace(static_cast<int>(tag >> 3), m.substr(i, n));
        i += n;
        break;
      }
      default: ADD_FAILURE() << "wire type " << (tag & 7); return out;
    }
  }
  EXPECT_EQ(i, m.size());
  return out;
}

LayerSpec spec(LayerKind kind, const char* name) {
  LayerSpec s;
  s.kind = kind;
  s.name = name;
  return s;
}

TEST(OnnxExport, EveryLayerKindBecomesNodesAndInitializers) {
  Model m = Model::functional(Strategy::default_strategy(), {8, 8, 3}, "image");
  LayerSpec pad = spec(LayerKind::ZeroPadding2D, "pad");
  pad.pad_top = pad.pad_left = 1;
  m.add(pad, {"image"});
  LayerSpec conv = spec(LayerKind::Conv2D, "conv");
  conv.filters = 4, conv.kernel_h = conv.kernel_w = 3, conv.padding = Padding::Same, conv.activation = Activation::Relu;
  m.add(conv, {"pad"});
  m.add(spec(LayerKind::BatchNormalization, "bn"), {"conv"});
  m.add(spec(LayerKind::Add, "sum"), {"conv", "bn"});
  m.add(spec(LayerKind::Concatenate, "cat"), {"sum", "bn"});
  LayerSpec act = spec(LayerKind::Activation, "act");
  act.activation = Activation::Sigmoid;
  m.add(act, {"cat"});
  m.add(spec(LayerKind::MaxPooling2D, "max"), {"act"});
  m.add(spec(LayerKind::AveragePooling2D, "avg"), {"max"});
  m.add(spec(LayerKind::GlobalAveragePooling2D, "gap"), {"avg"});
  LayerSpec norm = spec(LayerKind::Normalization, "norm");
  norm.mean = {0.5f};
  norm.variance = {2.0f};
  m.add(norm, {"gap"});
  LayerSpec drop = spec(LayerKind::Dropout, "drop");
  drop.rate = 0.5f;
  m.add(drop, {"norm"});
  m.add(spec(LayerKind::Flatten, "flat"), {"drop"});
  LayerSpec out = spec(LayerKind::Dense, "out");
  out.units = 3, out.activation = Activation::Softmax;
  m.add(out, {"flat"});
  const auto path = std::filesystem::temp_directory_path() / "kx_unit_export.onnx";
  EXPECT_THROW(m.export_onnx(path.string()), Error);  // before compile
  m.compile({});
  m.export_onnx(path.string());
  std::ifstream f(path, std::ios::binary);
  std::stringstream bytes;
  bytes << f.rdbuf();
  std::filesystem::remove(path);

  const auto model = fields(bytes.str());
  ASSERT_EQ(model.count(7), 1u);  // graph
  const auto graph = fields(model.find(7)->second);
  std::multiset<std::string> ops;
  for (auto [it, end] = graph.equal_range(1); it != end; ++it) ops.insert(fields(it->second).find(4)->second);
  EXPECT_EQ(ops.count("BatchNormalization"), 2u);  // bn, and norm's statistics in the same form
  for (const char* op : {"Pad", "Conv", "Relu", "Add", "Concat", "Sigmoid", "MaxPool",
                         "AveragePool", "GlobalAveragePool", "Flatten", "Gemm", "Softmax", "Identity"})
    EXPECT_EQ(ops.count(op), 1u) << op;
  EXPECT_EQ(ops.count("Transpose"), 1u);  // in; nothing after the pooling needs kx's order back
  EXPECT_EQ(ops.count("Dropout"), 0u);
  // conv kernel+bias, bn 4, norm 4 (as a BatchNormalization), dense kernel+bias, the pads.
  EXPECT_EQ(graph.count(5), 2u + 4u + 4u + 2u + 1u);
  EXPECT_EQ(fields(graph.find(11)->second).find(1)->second, "image");   // the input's name
  EXPECT_EQ(fields(graph.find(12)->second).find(1)->second, "output");
}

// The op types of an exported model's nodes, and the nodes' bytes (their attributes' strings).
struct ExportedNodes {
  std::multiset<std::string> ops;
  std::string bytes;
};

ExportedNodes export_nodes(Model& m, const char* file) {
  const auto path = std::filesystem::temp_directory_path() / file;
  m.export_onnx(path.string());
  std::ifstream f(path, std::ios::binary);
  std::stringstream bytes;
  bytes << f.rdbuf();
  f.close();
  std::filesystem::remove(path);
  ExportedNodes out;
  const auto graph = fields(fields(bytes.str()).find(7)->second);
  for (auto [it, end] = graph.equal_range(1); it != end; ++it) {
    out.ops.insert(fields(it->second).find(4)->second);
    out.bytes += it->second;
  }
  return out;
}

size_t occurrences(const std::string& text, const std::string& word) {
  size_t n = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
  return n;
}

TEST(OnnxExport, RecurrentLayersAndAttentionBecomeOnnxOperators) {
  Model m = Model::functional(Strategy::default_strategy(), {6, 4});
  m.add_layer(R"({"class_name": "GRU", "config": {"name": "gru", "units": 5, "return_sequences": true}})");
  m.add_layer(R"({"class_name": "Bidirectional", "config": {"name": "bi", "layer": {"class_name": "LSTM",
                 "config": {"units": 3, "return_sequences": true}}}})");
  m.add_layer(R"({"class_name": "LSTM", "config": {"name": "back", "units": 4, "return_sequences": true,
                 "go_backwards": true, "activation": "relu"}})");
  m.add_layer(R"({"class_name": "MultiHeadAttention", "config": {"name": "att", "num_heads": 2, "key_dim": 3},
                 "kwargs": {"use_causal_mask": true}})",
              {"back", "back"});
  m.add_layer(R"({"class_name": "Bidirectional", "config": {"name": "last", "layer": {"class_name": "GRU",
                 "config": {"units": 2, "use_bias": false}}}})");
  m.compile({});
  const ExportedNodes nodes = export_nodes(m, "kx_unit_sequences.onnx");
  EXPECT_EQ(nodes.ops.count("LSTM"), 2u);
  EXPECT_EQ(nodes.ops.count("GRU"), 2u);
  EXPECT_EQ(nodes.ops.count("Gather"), 1u);  // go_backwards reads the steps reversed
  EXPECT_EQ(nodes.ops.count("Softmax"), 1u);
  EXPECT_EQ(nodes.ops.count("Where"), 1u);  // the causal mask
  EXPECT_EQ(occurrences(nodes.bytes, "bidirectional"), 2u);
  EXPECT_EQ(occurrences(nodes.bytes, "linear_before_reset"), 2u);  // Keras 3's GRU
  EXPECT_EQ(occurrences(nodes.bytes, "Relu"), 2u);                 // back's cell input and output
}

TEST(OnnxExport, RecurrentLayersRefuseWhatOnnxComputesOtherwise) {
  const auto refused = [](const Shape& input, const std::vector<std::string>& layers, const char* why) {
    Model m = Model::sequential(Strategy::default_strategy(), input);
    for (const std::string& layer : layers) m.add_layer(layer);
    m.compile({});
    try {
      export_nodes(m, "kx_unit_refused.onnx");
      ADD_FAILURE() << "exported: " << layers.back();
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::Unsupported);
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  // Keras carries the state over masked steps; ONNX's sequence_lens only ends a sequence early.
  refused({6},
          {R"({"class_name": "Embedding", "config": {"input_dim": 5, "output_dim": 3, "mask_zero": true}})",
           R"({"class_name": "LSTM", "config": {"units": 2}})"},
          "mask");
  // ONNX's bidirectional runs the forward layer forward.
  refused({4, 3},
          {R"({"class_name": "Bidirectional", "config": {"layer": {"class_name": "LSTM",
              "config": {"units": 2, "go_backwards": true}}}})"},
          "backwards");
  // The same Embedding without mask_zero exports.
  Model m = Model::sequential(Strategy::default_strategy(), {6});
  m.add_layer(R"({"class_name": "Embedding", "config": {"input_dim": 5, "output_dim": 3}})");
  m.add_layer(R"({"class_name": "LSTM", "config": {"units": 2}})");
  m.compile({});
  EXPECT_EQ(export_nodes(m, "kx_unit_embedding_lstm.onnx").ops.count("LSTM"), 1u);
}

}  // namespace
}  // namespace kx
