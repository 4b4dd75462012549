// A ps task's service: its shard of the parameters, served to the workers (pull, push) and to the
// chief (the whole state in and out), one thread per client.
#pragma once
#include "distribute/ps_cluster.hpp"

namespace kx::distribute {

// Returns when the chief has ended training and every live worker has said goodbye; Comm when the
// chief is lost. A lost worker is dropped: the others are served on.
void serve_parameters(PsCluster& cluster);

}  // namespace kx::distribute
