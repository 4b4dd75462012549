// "host:port" addresses of workers, as TF_CONFIG writes them; shared by libkx and the workers module.
#pragma once
#include <string>

#include "kx/error.hpp"

namespace kx::distribute {

struct HostPort {
  std::string host;  // a name, an IPv4 address, or an IPv6 address without its brackets
  int port = 0;
};

// Splits "host:port" or "[v6]:port"; InvalidArgument naming `what` when the host is empty or the port
// is not a number in 1..65535.
inline HostPort split_host_port(const std::string& address, const std::string& what) {
  const auto bad = [&](const std::string& why) {
    fail(Status::InvalidArgument, what + " \"" + address + "\" is not host:port (" + why + ")");
  };
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) bad("no ':'");
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) bad("no host");
  if (host.find_first_of(" \t[]") != std::string::npos) bad("a host name has no spaces or brackets");
  const std::string digits = address.substr(colon + 1);
  if (digits.empty() || digits.size() > 5 || digits.find_first_not_of("0123456789") != std::string::npos)
    bad("the port is not a number");
  const int port = std::stoi(digits);
  if (port < 1 || port > 65535) bad("the port is not in 1..65535");
  return {host, port};
}

}  // namespace kx::distribute
