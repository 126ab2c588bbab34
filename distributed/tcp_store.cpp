#include "distributed/tcp_store.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "distributed/c10d_protocol.h"
#include "distributed/error.h"

namespace loom::distributed {

using c10d::Query;
using c10d::Reader;
using c10d::Writer;
using net::Clock;
using std::chrono::milliseconds;

namespace {

// How long past a request's own timeout a client waits for the server's answer.
constexpr milliseconds kReplyGrace = std::chrono::seconds(5);
// How long the server may take to answer a connection's first request (a server of another
// protocol never does).
constexpr milliseconds kPingLimit = std::chrono::seconds(10);
constexpr uint32_t kNonceBit = 0x00800000;  // see TCPStore::hello

std::string quoted(const std::vector<std::string>& keys) {
  std::string out;
  for (const std::string& k : keys) out += (out.empty() ? "'" : ", '") + k + "'";
  return out;
}

}  // namespace

TCPStore::TCPStore(std::string host, int port, bool is_master, milliseconds timeout, std::string prefix)
    : host_(std::move(host)), port_(port), timeout_(timeout), prefix_(std::move(prefix)) {
  if (port < 0 || port > 65535) {
    throw DistributedError("TCPStore: port " + std::to_string(port) + " is not in [0, 65535]");
  }
  if (is_master) {
    server_ = std::make_unique<TCPStoreServer>(port);
    port_ = server_->port();
  } else if (port == 0) {
    throw DistributedError("TCPStore: a client needs the master's port (got 0)");
  }
  connect(Clock::now() + timeout_);
}

TCPStore::~TCPStore() {
  if (fd_ >= 0) ::close(fd_);
  server_.reset();
}

// Connects and learns the server's dialect (Note [c10d dialects]): VALIDATE and PING as
// PyTorch 2.x's client does; a connection closed at once is a PyTorch 1.13 server (or one
// still starting): a second connection asks GETNUMKEYS in 1.13's dialect. Retries until
// the deadline (the master may not listen yet, or close connections while it starts).
void TCPStore::connect(Clock::time_point deadline) {
  // The master reaches its own server on the loopback address.
  const std::string connect_host = server_ ? std::string("127.0.0.1") : host_;
  std::string why;
  for (;;) {
    for (c10d::Dialect d : {c10d::Dialect::TORCH2, c10d::Dialect::TORCH1_13}) {
      fd_ = net::try_connect(connect_host, port_, deadline, why);
      if (fd_ < 0) break;
      if (hello(d)) {
        dialect_ = d;
        return;
      }
      why = "the connection closed during the handshake";
    }
    if (Clock::now() >= deadline) {
      throw DistributedError("TCPStore: could not connect to the master at " + host_ + ":" +
                             std::to_string(port_) + " within " + std::to_string(timeout_.count()) +
                             " ms: " + why + " (check MASTER_ADDR and MASTER_PORT, and that rank 0 runs)");
    }
    std::this_thread::sleep_for(std::min<milliseconds>(milliseconds(50), milliseconds(net::remaining_ms(deadline))));
  }
}

// Dialect d's first exchange on fd_: true when the server answers as d does; false, fd_
// closed, when it closes the connection; DistributedError when it stays silent or answers
// otherwise.
bool TCPStore::hello(c10d::Dialect d) {
  // A 1.13 server reads VALIDATE's bytes as a SET whose key length ends with the nonce's low
  // three bytes: the top bit of the third makes it past max_size, so that server resets at
  // once rather than allocate.
  const uint32_t nonce = kNonceBit | (uint32_t(::getpid()) & 0xff00ffff);
  const bool torch2 = d == c10d::Dialect::TORCH2;
  Writer out(torch2 ? Query::VALIDATE : Query::GETNUMKEYS, d);
  if (torch2) out.u32(c10d::kValidationMagic).u8(uint8_t(Query::PING)).u32(nonce);
  auto limit = Clock::now() + std::min(timeout_, kPingLimit);
  Reader in(fd_, &limit);
  uint32_t echoed = 0;
  int64_t keys = 0;
  bool sent = out.send(fd_);
  bool read = sent && (torch2 ? in.u32(echoed) : in.i64(keys));
  if (read && (!torch2 || echoed == nonce)) return true;
  bool silent = sent && !read && Clock::now() >= limit;
  ::close(fd_);
  fd_ = -1;
  if (silent || read) {
    throw DistributedError("TCPStore: the server at " + host_ + ":" + std::to_string(port_) + " does not answer " +
                           (torch2 ? "c10d's VALIDATE and PING" : "PyTorch 1.13's GETNUMKEYS") +
                           (read ? " as c10d's TCPStore does" : " within " + std::to_string(std::min(timeout_, kPingLimit).count()) + " ms") +
                           ": is it a PyTorch (2.x or 1.13) or Loom TCPStore?");
  }
  return false;
}

void TCPStore::lost(const std::string& what) const {
  // The stream is out of step now; later requests fail the same way.
  throw DistributedError("TCPStore: lost the connection to the master at " + host_ + ":" + std::to_string(port_) +
                         " (" + what + ")");
}

void TCPStore::send(const std::vector<char>& bytes, const std::string& what) {
  if (!net::send_all(fd_, bytes.data(), bytes.size())) lost(what);
}

void TCPStore::set(const std::string& key, const std::vector<char>& value) {
  std::lock_guard<std::mutex> lock(mutex_);
  send(Writer(Query::SET, dialect_).bytes(wire_key(key)).bytes(value).data(), "SET '" + key + "'");
}

std::vector<char> TCPStore::get(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  wait_locked({key}, timeout_);
  send(Writer(Query::GET, dialect_).bytes(wire_key(key)).data(), "GET '" + key + "'");
  auto deadline = Clock::now() + kReplyGrace;
  std::vector<char> value;
  if (!Reader(fd_, &deadline).value(value)) lost("GET '" + key + "'");
  return value;
}

int64_t TCPStore::add(const std::string& key, int64_t delta) {
  std::lock_guard<std::mutex> lock(mutex_);
  send(Writer(Query::ADD, dialect_).bytes(wire_key(key)).i64(delta).data(), "ADD '" + key + "'");
  auto deadline = Clock::now() + timeout_ + kReplyGrace;
  int64_t sum = 0;
  if (!Reader(fd_, &deadline).i64(sum)) lost("ADD '" + key + "'");
  return sum;
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> wire;
  for (const std::string& k : keys) wire.push_back(wire_key(k));
  send(Writer(Query::CHECK, dialect_).keys(wire).data(), "CHECK " + quoted(keys));
  auto deadline = Clock::now() + timeout_ + kReplyGrace;
  uint8_t answer = 0;
  if (!Reader(fd_, &deadline).u8(answer) || answer > 1) lost("CHECK " + quoted(keys));
  return answer == uint8_t(c10d::CheckResponse::READY);
}

std::vector<char> TCPStore::compare_set(const std::string& key, const std::vector<char>& expected,
                                        const std::vector<char>& desired) {
  std::lock_guard<std::mutex> lock(mutex_);
  send(Writer(Query::COMPARE_SET, dialect_).bytes(wire_key(key)).bytes(expected).bytes(desired).data(),
       "COMPARE_SET '" + key + "'");
  auto deadline = Clock::now() + timeout_ + kReplyGrace;
  std::vector<char> now;
  if (!Reader(fd_, &deadline).value(now)) lost("COMPARE_SET '" + key + "'");
  return now;
}

void TCPStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void TCPStore::wait(const std::vector<std::string>& keys, milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mutex_);
  wait_locked(keys, timeout);
}

// WAIT; past the timeout, CANCEL_WAIT (the server may have answered STOP_WAITING in the
// meantime: then WAIT_CANCELED follows it) or, in 1.13's dialect, a new connection; then an
// error naming the keys still missing.
void TCPStore::wait_locked(const std::vector<std::string>& keys, milliseconds timeout) {
  std::vector<std::string> wire;
  for (const std::string& k : keys) wire.push_back(wire_key(k));
  const std::string what = "WAIT " + quoted(keys);
  send(Writer(Query::WAIT, dialect_).keys(wire).data(), what);
  uint8_t answer = 0;
  auto grace = Clock::now() + timeout + kReplyGrace;
  Reader in(fd_, &grace);
  if (net::wait_ready(fd_, POLLIN, Clock::now() + timeout)) {  // an answer, or the connection closed
    if (!in.u8(answer) || answer != uint8_t(c10d::WaitResponse::STOP_WAITING)) lost(what);
    return;
  }
  if (dialect_ == c10d::Dialect::TORCH2) {
    send(Writer(Query::CANCEL_WAIT).data(), "CANCEL_WAIT");
    grace = Clock::now() + kReplyGrace;
    if (!in.u8(answer)) lost("CANCEL_WAIT");
    if (answer == uint8_t(c10d::WaitResponse::STOP_WAITING) && !in.u8(answer)) lost("CANCEL_WAIT");
    if (answer != uint8_t(c10d::WaitResponse::WAIT_CANCELED)) lost("CANCEL_WAIT");
  } else {  // 1.13 has no CANCEL_WAIT: the WAIT's answer stays pending there, so a new connection
    ::close(fd_);
    fd_ = -1;
    connect(Clock::now() + kReplyGrace);
  }
  grace = Clock::now() + kReplyGrace;
  Reader fresh(fd_, &grace);
  std::vector<std::string> missing;
  for (size_t i = 0; i < keys.size(); ++i) {
    uint8_t ready = 0;
    send(Writer(Query::CHECK, dialect_).keys({wire[i]}).data(), "CHECK");
    if (!fresh.u8(ready)) lost("CHECK");
    if (ready != uint8_t(c10d::CheckResponse::READY)) missing.push_back(keys[i]);
  }
  if (missing.empty()) return;  // they came while it cancelled
  throw DistributedError("TCPStore: timed out after " + std::to_string(timeout.count()) + " ms waiting for key" +
                         (missing.size() > 1 ? "s " : " ") + quoted(missing) + " (a rank did not arrive?)");
}

}  // namespace loom::distributed
