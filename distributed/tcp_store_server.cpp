#include "distributed/tcp_store_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "distributed/c10d_protocol.h"
#include "distributed/error.h"

namespace loom::distributed {

using c10d::Query;
using c10d::Reader;
using c10d::Writer;

namespace {

// ADD's operand and result are decimal text in the store (as PyTorch keeps them); false
// when the stored value is not a number.
bool parse_counter(const std::vector<char>& text, int64_t& value) {
  if (text.empty() || text.size() > 20) return false;
  try {
    size_t used = 0;
    value = std::stoll(std::string(text.begin(), text.end()), &used);
    return used == text.size();
  } catch (const std::exception&) {
    return false;
  }
}

// The first n bytes the client sent, left unread (MSG_PEEK); false on EOF or an error.
bool peek(int fd, char* buf, size_t n) {
  for (;;) {
    ssize_t got = ::recv(fd, buf, n, MSG_PEEK | MSG_WAITALL);
    if (got == ssize_t(n)) return true;
    if (got == 0 || (got < 0 && errno != EINTR)) return false;
    if (got > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the rest is on its way
  }
}

}  // namespace

TCPStoreServer::TCPStoreServer(int port) : port_(port) {
  std::string why;
  listen_fd_ = net::listen_on(port_, why);
  if (listen_fd_ < 0) {
    throw DistributedError("TCPStore: cannot serve on port " + std::to_string(port) + ": " + why +
                           " (is another job using MASTER_PORT?)");
  }
  accept_thread_ = std::thread([this] { accept_loop(); });
}

TCPStoreServer::~TCPStoreServer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    for (int fd : conn_fds_) ::shutdown(fd, SHUT_RDWR);  // wakes their blocked recv
  }
  changed_.notify_all();               // wakes the WAITs
  ::shutdown(listen_fd_, SHUT_RDWR);  // wakes accept (Linux)
  accept_thread_.join();
  for (auto& t : conn_threads_) t.join();
  for (int fd : conn_fds_) ::close(fd);
  ::close(listen_fd_);
}

void TCPStoreServer::accept_loop() {
  for (;;) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) {
      if (fd >= 0) ::close(fd);
      return;
    }
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    conn_fds_.push_back(fd);
    conn_threads_.emplace_back([this, fd] { serve(fd); });
  }
}

// A 2.x client's first request is VALIDATE with the magic number; anything else is a
// PyTorch 1.13 client (Note [c10d dialects]), served in its dialect. A byte that stands for
// no query of the connection's dialect drops it.
void TCPStoreServer::serve(int fd) {
  c10d::Dialect dialect = c10d::Dialect::TORCH2;
  char first[5];
  if (peek(fd, first, 1) && (first[0] != 0 || peek(fd, first, 5))) {
    uint32_t magic;
    std::memcpy(&magic, first + 1, sizeof magic);
    if (first[0] != 0 || magic != c10d::kValidationMagic) dialect = c10d::Dialect::TORCH1_13;
    uint8_t byte = 0;
    c10d::Query query;
    Reader in(fd);
    while (in.u8(byte) && c10d::from_wire(byte, dialect, query) && answer(fd, query, dialect)) {
    }
  }
  ::shutdown(fd, SHUT_RDWR);
}

bool TCPStoreServer::answer(int fd, c10d::Query query, c10d::Dialect dialect) {
  Reader in(fd);
  std::string key;
  std::vector<std::string> keys;
  std::vector<char> value, expected;
  switch (query) {
    case Query::VALIDATE: {
      uint32_t magic = 0;
      return in.u32(magic) && magic == c10d::kValidationMagic;
    }
    case Query::PING: {
      uint32_t nonce = 0;
      return in.u32(nonce) && Writer().u32(nonce).send(fd);
    }
    case Query::SET:
    case Query::APPEND: {
      if (!in.key(key) || !in.value(value)) return false;
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = data_.find(key);
      if (query == Query::APPEND && it != data_.end()) value.insert(value.begin(), it->second.begin(), it->second.end());
      store(key, std::move(value));
      return true;
    }
    case Query::COMPARE_SET: {
      if (!in.key(key) || !in.value(expected) || !in.value(value)) return false;
      std::vector<char> now;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = data_.find(key);
        // Absent: set when expected is empty, else answer expected (as PyTorch's server does).
        if (it == data_.end() ? expected.empty() : it->second == expected) store(key, std::move(value));
        it = data_.find(key);
        now = it == data_.end() ? expected : it->second;
      }
      return Writer().bytes(now).send(fd);
    }
    case Query::GET: {
      if (!in.key(key)) return false;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = data_.find(key);
        if (it == data_.end()) return false;  // clients WAIT before a GET; PyTorch's server drops them too
        value = it->second;
      }
      return Writer().bytes(value).send(fd);
    }
    case Query::ADD: {
      int64_t delta = 0, sum = 0;
      if (!in.key(key) || !in.i64(delta)) return false;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = data_.find(key);
        if (it != data_.end() && !parse_counter(it->second, sum)) return false;
        sum += delta;
        std::string text = std::to_string(sum);
        store(key, std::vector<char>(text.begin(), text.end()));
      }
      return Writer().i64(sum).send(fd);
    }
    case Query::CHECK: {
      if (!in.keys(keys)) return false;
      bool ready;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ready = all_set(keys);
      }
      return Writer().u8(uint8_t(ready ? c10d::CheckResponse::READY : c10d::CheckResponse::NOT_READY)).send(fd);
    }
    case Query::WAIT:
      return in.keys(keys) && wait_keys(fd, keys, dialect);
    case Query::GETNUMKEYS: {
      int64_t n;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        n = int64_t(data_.size());
      }
      return Writer().i64(n).send(fd);
    }
    case Query::DELETE_KEY: {
      if (!in.key(key)) return false;
      int64_t erased;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        erased = int64_t(data_.erase(key));
      }
      return Writer().i64(erased).send(fd);
    }
    case Query::MULTI_GET: {
      if (!in.keys(keys)) return false;
      Writer out;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        for (const std::string& k : keys) {
          auto it = data_.find(k);
          if (it == data_.end()) return false;
          out.bytes(it->second);
        }
      }
      return out.send(fd);
    }
    case Query::MULTI_SET: {
      uint64_t count = 0;
      if (!in.u64(count) || count > c10d::kMaxKeys) return false;
      for (uint64_t i = 0; i < count; ++i) {
        if (!in.key(key) || !in.value(value)) return false;
        std::lock_guard<std::mutex> lock(mutex_);
        store(key, std::move(value));
      }
      return true;
    }
    case Query::CANCEL_WAIT:  // nothing pending: the WAIT was answered before the cancel came
      return Writer().u8(uint8_t(c10d::WaitResponse::WAIT_CANCELED)).send(fd);
  }
  return false;  // an unknown query: not a client of this protocol
}

bool TCPStoreServer::wait_keys(int fd, const std::vector<std::string>& keys, c10d::Dialect dialect) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (stopping_) return false;
    if (all_set(keys)) {
      lock.unlock();
      return Writer().u8(uint8_t(c10d::WaitResponse::STOP_WAITING)).send(fd);
    }
    changed_.wait_for(lock, std::chrono::milliseconds(50));
    if (stopping_ || all_set(keys)) continue;
    // While it waits, a 2.x client may only cancel (CANCEL_WAIT) or go away; a 1.13 client
    // (no CANCEL_WAIT) only go away.
    lock.unlock();
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) {
      uint8_t query = 0;
      if (dialect != c10d::Dialect::TORCH2 || !net::recv_all(fd, &query, 1) ||
          query != uint8_t(Query::CANCEL_WAIT)) {
        return false;
      }
      return Writer().u8(uint8_t(c10d::WaitResponse::WAIT_CANCELED)).send(fd);
    }
    lock.lock();
  }
}

bool TCPStoreServer::all_set(const std::vector<std::string>& keys) const {
  for (const std::string& k : keys) {
    if (!data_.count(k)) return false;
  }
  return true;
}

void TCPStoreServer::store(const std::string& key, std::vector<char> value) {
  data_[key] = std::move(value);
  changed_.notify_all();
}

}  // namespace loom::distributed
