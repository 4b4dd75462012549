// The wire format of the rendezvous service every worker runs (see rendezvous_service.hpp): one
// request and one response per connection, each a small length-prefixed frame.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "distribute/workers_module/rendezvous/socket_io.hpp"

namespace kx::workers {

enum class Op : uint8_t {
  Set = 1,     // key := value
  Get = 2,     // the value, or NotFound
  Create = 3,  // key := value unless the key exists (then Exists and the value there)
  Ping = 4,    // the worker answers with its rank (liveness, after a failed operation)
};

enum class Reply : uint8_t { Ok = 0, NotFound = 1, Exists = 2, Refused = 3 };

struct Request {
  Op op = Op::Ping;
  std::string key;
  std::vector<char> value;
};

struct Response {
  Reply reply = Reply::Ok;
  std::vector<char> value;
};

// Keys and values above this are refused: the rendezvous carries addresses, not tensors.
inline constexpr uint32_t kMaxFrameField = 1u << 20;

Reach write_request(int fd, const Request& r, Clock::time_point deadline, std::string& error);
Reach read_request(int fd, Request& r, Clock::time_point deadline, std::string& error);
Reach write_response(int fd, const Response& r, Clock::time_point deadline, std::string& error);
Reach read_response(int fd, Response& r, Clock::time_point deadline, std::string& error);

// Connects to host:port, sends the request and reads the response, all before the deadline.
struct CallResult {
  Reach reach = Reach::Failed;  // Ok when a response came back
  Response response;
  std::string error;
};
CallResult call(const std::string& host, int port, const Request& request, Clock::time_point deadline);

}  // namespace kx::workers
