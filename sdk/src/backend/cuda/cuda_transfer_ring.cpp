#include "backend/cuda/cuda_transfer_ring.hpp"

#include <vector>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_resources.hpp"

namespace kx::backend::cuda {
namespace {

// An event for ordering only (no timing), destroyed with its owner.
class OwnedEvent {
 public:
  OwnedEvent() {
    check(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreate");
  }
  OwnedEvent(OwnedEvent&& o) noexcept : event_(o.event_) { o.event_ = nullptr; }
  OwnedEvent(const OwnedEvent&) = delete;
  OwnedEvent& operator=(const OwnedEvent&) = delete;
  OwnedEvent& operator=(OwnedEvent&&) = delete;
  ~OwnedEvent() {
    if (event_) cudaEventDestroy(event_);
  }
  operator cudaEvent_t() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

class CudaTransferRing final : public TransferRing {
 public:
  CudaTransferRing(Backend& be, int device, cudaStream_t compute, int slots, size_t slot_bytes)
      : device_(device), compute_(compute), slot_bytes_(slot_bytes), copies_(device),
        device_slots_(be.allocate(static_cast<size_t>(slots) * slot_bytes)) {
    check(cudaSetDevice(device_), "cudaSetDevice");
    for (int s = 0; s < slots; ++s) {
      pinned_.push_back(std::make_unique<PinnedArray<char>>(slot_bytes));
      copied_.emplace_back();
      released_.emplace_back();
    }
    // The slots were allocated and zeroed on the compute stream, the uploads run on the copy stream:
    // memory from the stream-ordered pool reaches another stream through an event. Every slot is
    // released once now, so that its first upload waits for the allocation, the zeroing and whatever
    // compute last used the pool's block (the ring this one replaces, say).
    for (OwnedEvent& e : released_) check(cudaEventRecord(e, compute_), "cudaEventRecord");
  }
  // The copy stream (a member) finishes its copies before it goes; then the events and pinned memory.
  ~CudaTransferRing() override {
    cudaSetDevice(device_);
    cudaStreamSynchronize(copies_);
  }

  void* host_slot(int slot) override { return pinned_[static_cast<size_t>(slot)]->get(); }
  void* device_slots() override { return device_slots_.data(); }
  void wait_host_writable(int slot) override {
    check(cudaEventSynchronize(copied_[static_cast<size_t>(slot)]), "waiting for a batch copy");
  }
  void upload(int slot, size_t bytes) override {
    const auto s = static_cast<size_t>(slot);
    check(cudaSetDevice(device_), "cudaSetDevice");
    check(cudaStreamWaitEvent(copies_, released_[s], 0), "ordering a batch copy");
    check(cudaMemcpyAsync(device_slots_.data<char>() + s * slot_bytes_, host_slot(slot), bytes, cudaMemcpyHostToDevice,
                          copies_),
          "copying a batch to the device");
    check(cudaEventRecord(copied_[s], copies_), "cudaEventRecord");
    check(cudaStreamWaitEvent(compute_, copied_[s], 0), "ordering the step after its batch");
  }
  void release(int slot) override {
    check(cudaSetDevice(device_), "cudaSetDevice");
    check(cudaEventRecord(released_[static_cast<size_t>(slot)], compute_), "cudaEventRecord");
  }

 private:
  int device_;
  cudaStream_t compute_;
  size_t slot_bytes_;
  OwnedStream copies_;
  DeviceBuffer device_slots_;
  std::vector<std::unique_ptr<PinnedArray<char>>> pinned_;
  std::vector<OwnedEvent> copied_, released_;
};

}  // namespace

std::unique_ptr<TransferRing> make_cuda_transfer_ring(Backend& be, int device,
                                                      cudaStream_t compute, int slots, size_t slot_bytes) {
  return std::make_unique<CudaTransferRing>(be, device, compute, slots, slot_bytes);
}

}  // namespace kx::backend::cuda
