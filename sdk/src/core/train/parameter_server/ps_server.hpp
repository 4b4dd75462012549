// A ps task's service: its shard of the parameters, served to the workers (pull, push) and to the
// chief (the whole state in and out), one thread per client.
#pragma once
#include "core/train/parameter_server/ps_cluster.hpp"

namespace kx::distribute {

// Returns when the chief has ended training and every live worker has said goodbye; Comm when the
// chief is lost. A lost worker is dropped: the others are served on.
// threads: the CPU threads of its optimizer updates (0 = every core).
void serve_parameters(PsCluster& cluster, int threads);

}  // namespace kx::distribute
