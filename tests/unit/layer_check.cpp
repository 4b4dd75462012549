#include "layer_check.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "backend/backend.hpp"
#include "kx/model.hpp"

namespace kx::test {

Checked check_layer(core::Layer& layer, const std::vector<Shape>& in_shapes, int64_t rows, const std::vector<float>& w,
                    const Reference& ref, double tol, bool check_w, const std::vector<float>& mask,
                    const std::vector<std::vector<float>>& given_inputs,
                    const std::vector<std::vector<float>>& input_masks) {
  auto be = backend::make_cpu_backend(2);
  const Shape out = layer.build_inputs(in_shapes);
  // Each input's mask (input_masks, or `mask` for the first) and where it comes from: the first input
  // with an equal mask.
  std::vector<std::vector<float>> masks(in_shapes.size());
  for (size_t k = 0; k < masks.size(); ++k) masks[k] = k < input_masks.size() ? input_masks[k] : std::vector<float>{};
  if (input_masks.empty() && !mask.empty()) masks[0] = mask;
  std::vector<int> sources;
  std::vector<const float*> mask_ptrs;
  for (size_t k = 0; k < masks.size(); ++k) {
    int source = masks[k].empty() ? -1 : static_cast<int>(k);
    for (size_t j = 0; j < k && source >= 0; ++j)
      if (masks[j] == masks[k]) source = sources[j];
    sources.push_back(source);
    mask_ptrs.push_back(masks[k].empty() ? nullptr : masks[k].data());
  }
  layer.take_input_masks(sources);
  std::vector<FloatBuffer> xs;
  std::vector<const float*> x_ptrs;
  std::vector<Vec> xd;
  for (size_t k = 0; k < in_shapes.size(); ++k) {
    const bool given = k < given_inputs.size() && !given_inputs[k].empty();
    xs.push_back(to_buffer(given ? given_inputs[k] : random_floats(rows * num_elements(in_shapes[k]), 100 + k)));
    EXPECT_EQ(xs.back().size(), static_cast<size_t>(rows * num_elements(in_shapes[k]))) << "input " << k;
    x_ptrs.push_back(xs.back().data());
    xd.push_back(to_double(xs.back().data(), xs.back().size()));
  }
  const int64_t ny = rows * num_elements(out);
  Checked r;
  r.y.assign(ny, 0.0f);
  r.scratch = FloatBuffer(std::max<int64_t>(layer.scratch_floats(rows), 1));
  FloatBuffer wb = to_buffer(w);
  core::LayerContext c;
  c.be = be.get();
  c.rows = rows;
  c.x = x_ptrs[0];
  c.xs = x_ptrs.data();
  c.y = r.y.data();
  c.w = wb.data();
  c.scratch = r.scratch.data();
  c.masks = mask_ptrs.data();
  c.mask = mask_ptrs.front();
  // The plan hands a call's workspace to other buffers between calls: backward may not find forward's.
  FloatBuffer workspace(std::max<int64_t>(layer.workspace_floats_on(*be, rows), 1));
  c.workspace = workspace.data();
  c.training = true;
  layer.forward(c);
  std::fill(workspace.begin(), workspace.end(), std::numeric_limits<float>::quiet_NaN());
  const Vec wd = to_double(w.data(), w.size());
  const Vec want = ref(xd, wd);
  EXPECT_EQ(want.size(), static_cast<size_t>(ny));
  { const long bad = first_mismatch(r.y, want, want.size(), 1e-5); EXPECT_EQ(bad, -1) << "forward: " << (bad >= 0 ? r.y[static_cast<size_t>(bad)] : 0.0f) << " vs " << (bad >= 0 ? want[static_cast<size_t>(bad)] : 0.0); }

  const std::vector<float> dyv = random_floats(ny, 77);
  FloatBuffer dy = to_buffer(dyv);
  const Vec dyd(dyv.begin(), dyv.end());
  std::vector<float*> dx_ptrs;
  for (size_t k = 0; k < xs.size(); ++k) r.dxs.emplace_back(xs[k].size());
  for (auto& b : r.dxs) dx_ptrs.push_back(b.data());
  r.dw = FloatBuffer(std::max<size_t>(w.size(), 1));
  c.dy = dy.data();
  c.dx = dx_ptrs[0];
  c.dxs = dx_ptrs.data();
  c.dw = r.dw.data();
  layer.backward(c);
  for (size_t k = 0; k < xs.size(); ++k) {
    const Vec g = numeric_gradient(
        [&](const Vec& v) {
          std::vector<Vec> in = xd;
          in[k] = v;
          return dot(dyd, ref(in, wd));
        },
        xd[k]);
    EXPECT_EQ(first_mismatch(r.dxs[k], g, g.size(), tol), -1) << "gradient of input " << k;
  }
  if (check_w && !w.empty()) {
    const Vec g = numeric_gradient([&](const Vec& v) { return dot(dyd, ref(xd, v)); }, wd);
    EXPECT_EQ(first_mismatch(r.dw, g, g.size(), tol), -1) << "parameter gradient";
  }
  return r;
}

LayerSpec spec_of(LayerKind kind, const char* name) {
  LayerSpec s;
  s.kind = kind;
  s.name = name;
  return s;
}

Model one_layer_model(const Shape& shape, const std::string& layer, uint64_t seed) {
  Model m = Model::functional(Strategy::mirrored({"cpu"}), shape, "x");
  m.add_layer(layer, {"x"});
  CompileOptions o;
  o.seed = seed;
  m.compile(o);
  return m;
}

std::vector<float> weights_after_training(const Shape& input, const std::vector<std::string>& layers, int replicas) {
  Model m = Model::sequential(Strategy::mirrored(std::vector<std::string>(static_cast<size_t>(replicas), "cpu")), input);
  for (const std::string& layer : layers) m.add_layer(layer);
  CompileOptions o;
  o.seed = 7;
  m.compile(o);
  int64_t per_sample = 1;
  for (int64_t d : input) per_sample *= d;
  const std::vector<float> x = random_floats(static_cast<size_t>(32 * per_sample), 3);
  std::vector<float> y(32);
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(i % 3);
  for (int step = 0; step < 5; ++step) m.train_on_batch(x.data(), y.data(), 32);
  return m.get_weights();
}


}  // namespace kx::test
