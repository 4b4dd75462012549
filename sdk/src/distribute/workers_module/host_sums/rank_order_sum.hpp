// The sum every launcher computes: element i of the result is ((0 + x0[i]) + x1[i]) + ... in worker
// rank order, the order in which one process adds its replicas. So N workers hold the bits of N
// replicas in one process, whatever the launcher (TF_CONFIG over TCP or shared memory, mpirun) and
// whatever N. Worker r owns part r of the buffer: it gathers every worker's copy of that part, adds
// them in rank order, and every worker then takes each part from its owner.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

namespace kx::workers {

// sum[i] = (0 + sources[0][i]) + sources[1][i] + ..., blocked so the partial sums stay in cache.
// `sum` may be one of the sources.
template <typename T>
void add_in_rank_order(const std::vector<const T*>& sources, size_t count, T* sum) {
  constexpr size_t kBlock = 1024;
  alignas(64) T block[kBlock];
  for (size_t first = 0; first < count; first += kBlock) {
    const size_t len = std::min(kBlock, count - first);
    const T* const a = sources.front() + first;
    for (size_t i = 0; i < len; ++i) block[i] = T(0) + a[i];  // T(0) + makes -0 into 0, as one process
    for (size_t r = 1; r < sources.size(); ++r) {
      const T* const b = sources[r] + first;
      for (size_t i = 0; i < len; ++i) block[i] += b[i];
    }
    std::memcpy(sum + first, block, len * sizeof(T));
  }
}

// The first element of worker r's part of `count` elements split among n workers.
inline size_t rank_part_begin(size_t count, size_t r, size_t n) { return count * r / n; }

// The rank-order sum through memory every worker of a host maps: segment(r) is worker r's slot
// (slot_bytes each, two per worker, alternating between calls through `uses`). Each worker copies into
// its slot the parts the others own, sums its own part from its buffer and the others' slots (into
// its buffer, then its slot for the others), and copies the other parts' sums from their owners'
// slots. `barrier()` returns once every worker has reached it, with what each wrote before it
// visible to all after it. A worker that starts the next call before another has copied this one's
// result writes into the other slot; the barrier in that next call then frees the first one again.
template <typename T, typename Segment, typename Barrier>
void sum_in_segments(size_t n, size_t me, T* data, size_t count, size_t slot_bytes, unsigned long long& uses,
                     Segment segment_base, Barrier barrier) {
  const size_t slot_elements = slot_bytes / sizeof(T);
  std::vector<const T*> sources;
  for (size_t done = 0; done < count; done += slot_elements) {
    const size_t len = std::min(slot_elements, count - done);
    const size_t slot = (uses++ % 2) * slot_bytes;
    const auto segment = [&](size_t r) { return reinterpret_cast<T*>(segment_base(r) + slot); };
    const auto begin_of = [&](size_t r) { return rank_part_begin(len, r, n); };
    const auto bytes_of = [&](size_t r) { return (begin_of(r + 1) - begin_of(r)) * sizeof(T); };
    T* const chunk = data + done;
    T* const own_slot = segment(me);
    for (size_t r = 0; r < n; ++r)
      if (r != me) std::memcpy(own_slot + begin_of(r), chunk + begin_of(r), bytes_of(r));
    barrier();
    const size_t begin = begin_of(me);
    sources.clear();
    for (size_t r = 0; r < n; ++r) sources.push_back((r == me ? chunk : segment(r)) + begin);
    add_in_rank_order(sources, begin_of(me + 1) - begin, chunk + begin);
    std::memcpy(own_slot + begin, chunk + begin, bytes_of(me));
    barrier();
    for (size_t r = 0; r < n; ++r)
      if (r != me) std::memcpy(chunk + begin_of(r), segment(r) + begin_of(r), bytes_of(r));
  }
}

}  // namespace kx::workers
