#include "distribute/workers_module/rendezvous/local_address.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>

#include <cstdlib>
#include <memory>

#include "kx/error.hpp"

namespace kx::workers {
namespace {

struct IfAddrsDeleter {
  void operator()(ifaddrs* a) const { freeifaddrs(a); }
};

// The first IPv4 address of an interface that is up: the one named, or any that is not loopback.
std::string interface_address(const char* name) {
  ifaddrs* raw = nullptr;
  if (getifaddrs(&raw) != 0) return "";
  const std::unique_ptr<ifaddrs, IfAddrsDeleter> list(raw);
  for (ifaddrs* i = raw; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
    if (name ? std::string(i->ifa_name) != name : (i->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof text);
    return text;
  }
  return "";
}

}  // namespace

bool resolves_to_loopback(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &list) != 0) return false;
  bool loopback = list != nullptr;
  for (addrinfo* a = list; a; a = a->ai_next) {
    if (a->ai_family == AF_INET)
      loopback = loopback && (ntohl(reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr.s_addr) >> 24) == 127;
    else if (a->ai_family == AF_INET6)
      loopback = loopback && IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr);
  }
  freeaddrinfo(list);
  return loopback;
}

std::string reachable_host(const std::string& own_host, bool workers_elsewhere) {
  if (const char* iface = std::getenv("GLOO_SOCKET_IFNAME"); iface && *iface) {
    const std::string address = interface_address(iface);
    require(!address.empty(), Status::Comm, std::string("GLOO_SOCKET_IFNAME=") + iface + ": no such interface with an IPv4 address that is up");
    return address;
  }
  if (!workers_elsewhere || !resolves_to_loopback(own_host)) return own_host;
  const std::string address = interface_address(nullptr);
  require(!address.empty(), Status::Comm,
          own_host + " resolves to a loopback address, other workers run elsewhere, and no other interface is up "
                     "(set GLOO_SOCKET_IFNAME to the interface they reach this machine on)");
  return address;
}

}  // namespace kx::workers
