// CPU kernels of the sequence layers: the embedding lookup and its gradient, Masking's mask and its
// gradient, and one step of an LSTM or a GRU (the element-wise part; the layers run the GEMMs). See
// backend_ops.hpp for each.
#pragma once
#include <cstdint>

#include "backend/backend.hpp"

namespace kx::backend::cpu {

void embedding_forward(int64_t n, int64_t vocab, int64_t dim, const float* ids, const float* table, float* y,
                       float* mask, int threads);
void embedding_backward(int64_t n, int64_t vocab, int64_t dim, const float* ids, const float* dy, float* dtable,
                        int threads);
void masking_forward(int64_t positions, int64_t features, float mask_value, const float* x, float* y, float* mask,
                     int threads);
void masking_backward(int64_t positions, int64_t features, const float* mask, const float* dy, float* dx, int threads);
void lstm_step_forward(const RecurrentStep& s, float* gates, const float* c_prev, const float* h_prev,
                       const float* mask, float* c, float* h, float* y, int threads);
void lstm_step_backward(const RecurrentStep& s, float* gates, const float* c_prev, const float* c, const float* mask,
                        const float* dy, float* dh, float* dc, int threads);
void gru_step_forward(const RecurrentStep& s, float* gates, const float* recurrent, const float* h_prev,
                      const float* mask, float* h, float* y, int threads);
void gru_step_backward(const RecurrentStep& s, float* gates, float* recurrent, const float* h_prev, const float* mask,
                       const float* dy, float* dh, int threads);

}  // namespace kx::backend::cpu
