// Which of this machine's addresses the other workers can reach. A host name often resolves to a
// loopback address on the machine itself (Debian maps it to 127.0.1.1 in /etc/hosts), which is right
// when every worker runs here and wrong as soon as one does not.
#pragma once
#include <string>

namespace kx::workers {

// The host to bind Gloo's connections to and to announce: the interface named by GLOO_SOCKET_IFNAME
// (Gloo's and PyTorch's variable) when set; else `own_host`, unless it resolves to a loopback address
// while `workers_elsewhere`, in which case the first non-loopback IPv4 interface that is up.
// Status::Comm when no such address exists.
std::string reachable_host(const std::string& own_host, bool workers_elsewhere);

// Whether every address `host` resolves to is a loopback address (false when it does not resolve).
bool resolves_to_loopback(const std::string& host);

}  // namespace kx::workers
