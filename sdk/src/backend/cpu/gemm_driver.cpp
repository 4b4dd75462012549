// The blocked GEMM driver: splits C into register tiles, orders them for cache reuse, splits a long K
// into passes (or, with too few tiles to share between threads, into slices summed afterwards), and
// shares the tiles between threads. Every tile and every slice is computed over K in the same order
// by one thread, so the result does not depend on the thread count.
#include <omp.h>

#include <algorithm>

#include "backend/activation_math.hpp"
#include "backend/cpu/gemm.hpp"
#include "backend/rounding_math.hpp"

namespace kx::backend::cpu {
namespace {

// Below this many multiply-adds a parallel region costs more than it saves.
constexpr int64_t kParallelFlops = 1 << 16;
// K is cut into passes only when a tile's rows of A over the whole K would not fit in L1 (and C is
// small enough to revisit): a pass's rows of A and of B then stay in the caches between the tiles
// that reuse them. Below that, passes would only change the rounding.
constexpr int64_t kLongK = 1024;
constexpr int64_t kPassDepth = 256;
constexpr int64_t kRevisitableC = 128 * 1024;  // floats of C (512 KB) worth reading once per pass
// B's rows of one pass that fit in a core's L2 cache: then every row block sweeps all panels while
// its rows of A are in L1; otherwise each panel sweeps all row blocks while the panel is in cache.
constexpr int64_t kCachedB = 128 * 1024;  // floats (512 KB)
// A long K over a small C: K is cut into slices of about this depth, each computed whole by one thread
// into a workspace block, tile after tile while the slice's rows of A and B stay in cache; then the
// blocks are summed in slice order. The threads share K instead of C, and each reads its rows from
// memory once. The number of slices is fixed by the shape (so are the sums), a multiple of
// kSliceMultiple so that two or four threads get as many each, at most kMaxSlices and, for a larger C,
// as many as kSliceWorkspace floats hold.
constexpr int64_t kSliceDepth = 1024;
constexpr int64_t kSliceMultiple = 4;
constexpr int64_t kMaxSlices = 64;
constexpr int64_t kSliceWorkspace = 1 << 20;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct TileGrid {
  int64_t row_blocks, panels;
  bool rows_outer;
  int64_t tiles() const { return row_blocks * panels; }
  // Row block and panel of the t-th tile in the chosen order.
  std::pair<int64_t, int64_t> at(int64_t t) const {
    return rows_outer ? std::pair{t / panels, t % panels} : std::pair{t % row_blocks, t / row_blocks};
  }
};

// Runs `kernel` over the grid's tiles [first, last) for k in [k0, k0 + depth).
void run_tiles(const GemmProblem& p, const TileGrid& grid, TileKernel kernel, int64_t first, int64_t last, int64_t k0,
               int64_t depth, float* C, int64_t ldc, float beta, bool epilogue) {
  for (int64_t t = first; t < last; ++t) {
    const auto [rb, panel] = grid.at(t);
    const int64_t i0 = rb * kTileRows, j0 = panel * kTileCols;
    Tile tile{depth,
              p.A + i0 * p.rsa + k0 * p.csa,
              p.rsa,
              p.csa,
              p.B + k0 * p.ldb + j0,
              p.ldb,
              C + i0 * ldc + j0,
              ldc,
              static_cast<int>(std::min<int64_t>(kTileRows, p.M - i0)),
              static_cast<int>(std::min<int64_t>(kTileCols, p.N - j0)),
              beta,
              epilogue && p.bias ? p.bias + j0 : nullptr,
              epilogue && p.relu,
              epilogue ? p.rounding : Rounding::None};
    kernel(tile);
  }
}

// The tile grid of `p`, and the passes its K is cut into.
struct Plan {
  TileGrid grid;
  int64_t passes, depth;
};

Plan plan(const GemmProblem& p) {
  TileGrid grid{ceil_div(p.M, kTileRows), ceil_div(p.N, kTileCols), true};
  const bool revisit_c = p.M * p.N <= kRevisitableC;
  const int64_t passes = revisit_c && p.K > kLongK ? ceil_div(p.K, kPassDepth) : 1;
  const int64_t depth = ceil_div(std::max<int64_t>(p.K, 1), passes);
  grid.rows_outer = depth * p.N <= kCachedB;
  return {grid, passes, depth};
}

// The plan of `sub`, some rows of a product planned as `whole`: the same passes and tile order, so
// each value of C is computed as `whole` computes it.
Plan plan_rows(const GemmProblem& sub, const Plan& whole) {
  return {{ceil_div(sub.M, kTileRows), whole.grid.panels, whole.grid.rows_outer}, whole.passes, whole.depth};
}

// A long K over a small C is sliced, whatever the thread count (the same sums).
bool slices_k(const GemmProblem& p) { return p.M * p.N <= kRevisitableC && p.K >= 4 * kSliceDepth; }

// Tiles [first, last) of the plan through every pass.
void run_passes(const GemmProblem& p, const Plan& pl, TileKernel kernel, int64_t first, int64_t last) {
  for (int64_t pass = 0; pass < pl.passes; ++pass) {
    const int64_t k0 = pass * pl.depth;
    const int64_t kn = std::clamp<int64_t>(p.K - k0, 0, pl.depth);
    run_tiles(p, pl.grid, kernel, first, last, k0, kn, p.C, p.ldc, pass == 0 ? p.beta : 1.0f, pass + 1 == pl.passes);
  }
}

// C = A B with K cut into slices: slice s goes to workspace block s, then the blocks are summed in order.
void sliced_gemm(const GemmProblem& p, TileKernel kernel, int threads, FloatBuffer& workspace) {
  const int64_t block = p.M * p.N;
  const int64_t most = std::max(kSliceMultiple, std::min(kMaxSlices, kSliceWorkspace / block) / kSliceMultiple * kSliceMultiple);
  const int64_t slices = std::min(most, ceil_div(ceil_div(p.K, kSliceDepth), kSliceMultiple) * kSliceMultiple);
  const int64_t depth = ceil_div(p.K, slices);
  if (workspace.size() < static_cast<size_t>(slices * block)) workspace.resize(static_cast<size_t>(slices * block));
  float* parts = workspace.data();
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t s = 0; s < slices; ++s) {
    const int64_t k0 = s * depth;
    GemmProblem slice{p.M, p.N, std::clamp<int64_t>(p.K - k0, 0, depth), p.A + k0 * p.csa, p.rsa, p.csa,
                      p.B + k0 * p.ldb, p.ldb, 0.0f, parts + s * block, p.N, nullptr, false, Rounding::None};
    const Plan pl = plan(slice);
    run_passes(slice, pl, kernel, 0, pl.grid.tiles());
  }
  const int64_t rows = p.M;
#pragma omp parallel for num_threads(threads) schedule(static) if (rows * p.N * slices >= kParallelFlops)
  for (int64_t i = 0; i < rows; ++i) {
    float* c = p.C + i * p.ldc;
    for (int64_t j = 0; j < p.N; ++j) {
      float v = parts[i * p.N + j];
      for (int64_t s = 1; s < slices; ++s) v += parts[s * block + i * p.N + j];
      if (p.beta != 0.0f) v += p.beta * c[j];
      if (p.bias) v += p.bias[j];
      if (p.relu) v = relu(v);
      c[j] = round_value(v, p.rounding);
    }
  }
}

}  // namespace

void serial_gemm(const GemmProblem& p, TileKernel kernel) {
  if (p.M <= 0 || p.N <= 0) return;
  const Plan pl = plan(p);
  run_passes(p, pl, kernel, 0, pl.grid.tiles());
}

bool gemm_by_row_ranges(const GemmProblem& p, TileKernel kernel, int threads, int64_t range_rows,
                        RangeDone range_done) {
  if (p.M <= 0 || p.N <= 0) return true;
  const Plan whole = plan(p);
  if (slices_k(p)) return false;
  const auto rows = [&](int64_t i0, int64_t i1) {
    GemmProblem sub = p;
    sub.M = i1 - i0;
    sub.A = p.A + i0 * p.rsa;
    sub.C = p.C + i0 * p.ldc;
    run_passes(sub, plan_rows(sub, whole), kernel, 0, ceil_div(sub.M, kTileRows) * whole.grid.panels);
  };
  // Each thread a contiguous run of ranges, as blocked_gemm shares its tiles.
  write_by_ranges(
      ceil_div(p.M, range_rows), p.M * p.N * p.K >= kParallelFlops ? threads : 1,
      [&](int64_t k) { rows(k * range_rows, std::min(p.M, (k + 1) * range_rows)); }, range_done);
  return true;
}

void blocked_gemm(const GemmProblem& p, TileKernel kernel, int threads, FloatBuffer& workspace) {
  if (p.M <= 0 || p.N <= 0) return;
  const Plan pl = plan(p);
  const TileGrid& grid = pl.grid;
  const int nt = p.M * p.N * p.K >= kParallelFlops ? static_cast<int>(std::max<int64_t>(1, threads)) : 1;

  if (slices_k(p)) return sliced_gemm(p, kernel, nt, workspace);
  const int threads_used = static_cast<int>(std::min<int64_t>(nt, grid.tiles()));
  // Each thread owns a contiguous range of tiles through every pass: no barrier between passes.
#pragma omp parallel num_threads(threads_used) if (threads_used > 1)
  {
    const int64_t id = omp_get_thread_num(), n = omp_get_num_threads();
    run_passes(p, pl, kernel, grid.tiles() * id / n, grid.tiles() * (id + 1) / n);
  }
}

}  // namespace kx::backend::cpu
