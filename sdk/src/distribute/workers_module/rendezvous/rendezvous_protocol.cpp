#include "distribute/workers_module/rendezvous/rendezvous_protocol.hpp"

namespace kx::workers {
namespace {

void put_u32(std::vector<char>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t get_u32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

Reach read_field(int fd, uint32_t length, std::vector<char>& out, Clock::time_point deadline, std::string& error) {
  if (length > kMaxFrameField) {
    error = "oversized frame";
    return Reach::Failed;
  }
  out.resize(length);
  return length == 0 ? Reach::Ok : recv_all(fd, out.data(), length, deadline, error);
}

}  // namespace

// Request: op (1 byte), key length and value length (4 bytes each, little-endian), key, value.
Reach write_request(int fd, const Request& r, Clock::time_point deadline, std::string& error) {
  std::vector<char> frame{static_cast<char>(r.op)};
  put_u32(frame, static_cast<uint32_t>(r.key.size()));
  put_u32(frame, static_cast<uint32_t>(r.value.size()));
  frame.insert(frame.end(), r.key.begin(), r.key.end());
  frame.insert(frame.end(), r.value.begin(), r.value.end());
  return send_all(fd, frame.data(), frame.size(), deadline, error);
}

Reach read_request(int fd, Request& r, Clock::time_point deadline, std::string& error) {
  unsigned char head[9];
  if (const Reach got = recv_all(fd, head, sizeof head, deadline, error); got != Reach::Ok) return got;
  if (head[0] < static_cast<uint8_t>(Op::Set) || head[0] > static_cast<uint8_t>(Op::Ping)) {
    error = "unknown request";
    return Reach::Failed;
  }
  r.op = static_cast<Op>(head[0]);
  std::vector<char> key;
  if (const Reach got = read_field(fd, get_u32(head + 1), key, deadline, error); got != Reach::Ok) return got;
  r.key.assign(key.begin(), key.end());
  return read_field(fd, get_u32(head + 5), r.value, deadline, error);
}

// Response: reply (1 byte), value length (4 bytes), value.
Reach write_response(int fd, const Response& r, Clock::time_point deadline, std::string& error) {
  std::vector<char> frame{static_cast<char>(r.reply)};
  put_u32(frame, static_cast<uint32_t>(r.value.size()));
  frame.insert(frame.end(), r.value.begin(), r.value.end());
  return send_all(fd, frame.data(), frame.size(), deadline, error);
}

Reach read_response(int fd, Response& r, Clock::time_point deadline, std::string& error) {
  unsigned char head[5];
  if (const Reach got = recv_all(fd, head, sizeof head, deadline, error); got != Reach::Ok) return got;
  if (head[0] > static_cast<uint8_t>(Reply::Refused)) {
    error = "unknown response";
    return Reach::Failed;
  }
  r.reply = static_cast<Reply>(head[0]);
  return read_field(fd, get_u32(head + 1), r.value, deadline, error);
}

CallResult call(const std::string& host, int port, const Request& request, Clock::time_point deadline) {
  CallResult result;
  Connection c = connect_to(host, port, deadline);
  result.reach = c.result;
  result.error = c.error;
  if (c.result != Reach::Ok) return result;
  result.reach = write_request(c.socket.fd(), request, deadline, result.error);
  if (result.reach == Reach::Ok) result.reach = read_response(c.socket.fd(), result.response, deadline, result.error);
  return result;
}

}  // namespace kx::workers
