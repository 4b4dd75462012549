// One worker of a multi-worker job that checks the job computes the update of one replica in one
// process, step by step: at each step every worker saves its single-replica model (weights, Adam's
// slots and step count), loads it onto the multi-worker strategy, and both take the same global batch
// of Fashion-MNIST. The worst relative weight difference and loss difference over the steps are
// printed and written to OUT.
//
// Step by step, not two whole runs compared: the job sums a batch in parts (per replica, per worker)
// where one replica sums it whole, and in a ReLU network such a last-bit difference can flip a unit
// that sits at zero and then grow (see README, "multi-worker"). Each step here starts from the state
// one replica reached, so what is measured is the update itself.
//
// With device=cuda:N the job's replicas are on that GPU (TF32 off) and the reference stays on the CPU;
// exit code 77 when there is no such device (with probe=1, only that check).
//
//   multi_worker_stepwise [replicas=R] [steps=S] [batch=B] [device=cpu|cuda:N] out=FILE
//   (the cluster: TF_CONFIG or mpirun)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "kx/kx.hpp"
#include "reference.hpp"

namespace {

using namespace kx;

// KX_FASHION_MNIST_DIR, for machines without the Debian package (the GPU machine).
std::string data_dir() {
  const char* dir = std::getenv("KX_FASHION_MNIST_DIR");
  return dir ? dir : "/usr/share/datasets/fashion-mnist";
}

Model fashion_mlp(const Strategy& strategy) {
  Model m = Model::sequential(strategy, {28, 28});
  m.add_flatten();
  m.add_dense(256, Activation::Relu);
  m.add_dense(256, Activation::Relu);
  m.add_dense(10, Activation::Softmax);
  CompileOptions co;
  co.accuracy = true;
  co.seed = 7;
  m.compile(co);
  return m;
}

int run(const std::map<std::string, std::string>& args) {
  const auto number = [&](const char* key, long fallback) {
    const auto it = args.find(key);
    return it == args.end() ? fallback : std::atol(it->second.c_str());
  };
  const int replicas = static_cast<int>(number("replicas", 1));
  const int64_t steps = number("steps", 200), batch = number("batch", 96);
  const std::string out = args.count("out") ? args.at("out") : "";
  const std::string device = args.count("device") ? args.at("device") : "cpu";
  if (device != "cpu") {
    const int index = device.rfind("cuda:", 0) == 0 ? std::atoi(device.c_str() + 5) : 0;
    if (index >= device_count(DeviceKind::Cuda)) {
      std::fprintf(stderr, "no CUDA device %s\n", device.c_str());
      return 77;
    }
  }
  if (args.count("probe")) return 0;  // only whether the device exists

  Strategy job = Strategy::multi_worker(std::vector<std::string>(static_cast<size_t>(replicas), device));
  if (device == "cpu") job.set_num_threads(replicas);
  job.set_tf32(false);  // the update is compared, not the precision of the products
  Strategy one_replica = Strategy::mirrored({"cpu"});
  one_replica.set_num_threads(1);
  const int worker = job.worker_index();
  // Every worker computes the same single-replica run (one thread, the same seed and batches), so each
  // saves the same state; the files are the workers' own in case the directory is shared.
  const std::string state = (std::filesystem::path(out).parent_path() /
                             ("stepwise-state-" + std::to_string(worker) + ".kx")).string();

  Dataset data = Dataset::from_idx(data_dir() + "/train-images-idx3-ubyte.gz", data_dir() + "/train-labels-idx1-ubyte.gz")
                     .take(batch * steps);
  Model one = fashion_mlp(one_replica);
  double worst_weights = 0, worst_loss = 0;
  for (int64_t step = 0; step < steps; ++step) {
    one.save(state);
    Model many = Model::load(job, state);
    Dataset b = data.skip(step * batch).take(batch);
    b.batch(batch, false);
    FitOptions fo;
    History h_one, h_many;
    if (one.fit(b, fo, nullptr, &h_one) != Status::Ok || many.fit(b, fo, nullptr, &h_many) != Status::Ok) {
      std::fprintf(stderr, "worker %d: fit failed at step %lld\n", worker, static_cast<long long>(step));
      return 1;
    }
    worst_weights = std::max(worst_weights, test::relative_difference(many.get_weights(), one.get_weights()));
    const double loss = h_one.get("loss", 0);
    worst_loss = std::max(worst_loss, std::fabs(h_many.get("loss", 0) - loss) / loss);
  }
  std::filesystem::remove(state);
  std::printf("worker %d of %d, %d replicas each on %s: over %lld steps against one replica, max relative weight "
              "difference %.3g, loss %.3g\n",
              worker, job.num_workers(), replicas, device.c_str(), static_cast<long long>(steps), worst_weights,
              worst_loss);
  if (!out.empty()) std::ofstream(out) << worst_weights << " " << worst_loss << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const size_t eq = a.find('=');
    if (eq == std::string::npos) {
      std::fprintf(stderr, "usage: %s [replicas=R] [steps=S] [batch=B] [device=cpu|cuda:N] out=FILE\n", argv[0]);
      return 2;
    }
    args[a.substr(0, eq)] = a.substr(eq + 1);
  }
  try {
    return run(args);
  } catch (const Error& e) {
    std::fprintf(stderr, "multi_worker_stepwise: %s\n", e.what());
    return 1;
  }
}
