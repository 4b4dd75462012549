// The TransferRing of a backend whose memory the host reads and writes (the CPU): the host slots and
// the device slots are separate buffers all the same, so the path a GPU takes is the path tested here.
#include <cstring>
#include <vector>

#include "backend/backend.hpp"
#include "kx/tensor.hpp"

namespace kx::backend {
namespace {

class HostTransferRing final : public TransferRing {
 public:
  HostTransferRing(Backend& be, int slots, size_t slot_bytes)
      : slot_bytes_(slot_bytes), device_(be.allocate(static_cast<size_t>(slots) * slot_bytes)) {
    for (int s = 0; s < slots; ++s) host_.emplace_back((slot_bytes + sizeof(float) - 1) / sizeof(float));
  }
  void* host_slot(int slot) override { return host_[static_cast<size_t>(slot)].data(); }
  void* device_slots() override { return device_.data(); }
  void wait_host_writable(int) override {}
  void upload(int slot, size_t bytes) override {
    std::memcpy(device_.data<char>() + static_cast<size_t>(slot) * slot_bytes_, host_slot(slot), bytes);
  }
  void release(int) override {}

 private:
  size_t slot_bytes_;
  DeviceBuffer device_;
  std::vector<FloatBuffer> host_;
};

}  // namespace

std::unique_ptr<TransferRing> make_host_transfer_ring(Backend& be, int slots, size_t slot_bytes) {
  return std::make_unique<HostTransferRing>(be, slots, slot_bytes);
}

}  // namespace kx::backend
