#include "distributed/tcp_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <thread>

#include "distributed/error.h"

namespace loom::distributed {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

// The opcodes. A request is [op u8][key length u32][key][operand length u64][operand];
// a reply is [found u8][length u64][bytes]. Integers travel in host byte order (the ranks
// of one job run the same build on the same kind of machine).
constexpr char kSet = 'S', kGet = 'G', kAdd = 'A';
// How long past a request's own timeout a client waits for the server's answer.
constexpr milliseconds kReplyGrace = std::chrono::seconds(5);

std::string errno_text() { return std::strerror(errno); }

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? int(std::min<int64_t>(left, 1 << 30)) : 0;
}

// Waits until fd is ready for events; false when the deadline passed first.
bool wait_ready(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, remaining_ms(deadline));
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return false;
  }
}

// Blocking full send/receive; the timed receive is for clients (the server's reads block
// until the peer sends or the connection is shut down). false on EOF, error or timeout.
bool send_all(int fd, const void* data, size_t n) {
  auto* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= size_t(k);
  }
  return true;
}

bool recv_all(int fd, void* data, size_t n, const Clock::time_point* deadline = nullptr) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    if (deadline && !wait_ready(fd, POLLIN, *deadline)) return false;
    ssize_t k = ::recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= size_t(k);
  }
  return true;
}

std::vector<char> encode_int(int64_t v) {
  std::vector<char> out(sizeof v);
  std::memcpy(out.data(), &v, sizeof v);
  return out;
}

int64_t decode_int(const std::vector<char>& bytes) {
  int64_t v = 0;
  std::memcpy(&v, bytes.data(), std::min(bytes.size(), sizeof v));
  return v;
}

// One connection attempt to host:port, the connect bounded by the deadline (a host that
// drops SYNs would otherwise block for minutes). Returns the socket or -1 with errno set.
int try_connect(const std::string& host, int port, Clock::time_point deadline, std::string& why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) {
    why = std::string("cannot resolve the host: ") + ::gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int flags = ::fcntl(fd, F_GETFL);
    ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    bool ok = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0;
    if (!ok && errno == EINPROGRESS && wait_ready(fd, POLLOUT, deadline)) {
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      ok = err == 0;
      errno = err ? err : ETIMEDOUT;
    } else if (!ok && errno == EINPROGRESS) {
      errno = ETIMEDOUT;
    }
    if (ok) {
      ::fcntl(fd, F_SETFL, flags);
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    } else {
      why = errno_text();
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  return fd;
}

}  // namespace

// ---- the server (rank 0) ----------------------------------------------------------------------

class TCPStore::Server {
 public:
  explicit Server(int port) {
    listen_fd_ = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool v6 = listen_fd_ >= 0;
    if (!v6) listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) throw DistributedError("TCPStore: socket() failed: " + errno_text());
    int one = 1, zero = 0;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_storage addr{};
    socklen_t len;
    if (v6) {  // dual-stack: accepts IPv4 clients as well
      ::setsockopt(listen_fd_, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
      auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
      a->sin6_family = AF_INET6;
      a->sin6_addr = in6addr_any;
      a->sin6_port = htons(uint16_t(port));
      len = sizeof(sockaddr_in6);
    } else {
      auto* a = reinterpret_cast<sockaddr_in*>(&addr);
      a->sin_family = AF_INET;
      a->sin_addr.s_addr = htonl(INADDR_ANY);
      a->sin_port = htons(uint16_t(port));
      len = sizeof(sockaddr_in);
    }
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(listen_fd_, 128) != 0) {
      std::string why = errno_text();
      ::close(listen_fd_);
      throw DistributedError("TCPStore: cannot serve on port " + std::to_string(port) + ": " + why +
                             " (is another job using MASTER_PORT?)");
    }
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(v6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                     : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    accept_thread_ = std::thread([this] { accept_loop(); });
  }

  ~Server() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      for (int fd : conn_fds_) ::shutdown(fd, SHUT_RDWR);  // wakes their blocked recv
    }
    changed_.notify_all();  // wakes the gets that wait for a key
    ::shutdown(listen_fd_, SHUT_RDWR);  // wakes accept (Linux)
    accept_thread_.join();
    for (auto& t : conn_threads_) t.join();
    for (int fd : conn_fds_) ::close(fd);
    ::close(listen_fd_);
  }

  int port() const { return port_; }

 private:
  void accept_loop() {
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

  // Answers one client's requests in order until it disconnects or the server stops.
  void serve(int fd) {
    for (;;) {
      char op;
      uint32_t key_len;
      uint64_t operand_len;
      std::string key;
      std::vector<char> operand;
      if (!recv_all(fd, &op, 1) || !recv_all(fd, &key_len, sizeof key_len)) return;
      key.resize(key_len);
      if (!recv_all(fd, key.data(), key_len) || !recv_all(fd, &operand_len, sizeof operand_len)) return;
      operand.resize(operand_len);
      if (!recv_all(fd, operand.data(), operand_len)) return;

      char found = 1;
      std::vector<char> reply;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        if (op == kSet) {
          data_[key] = std::move(operand);
          changed_.notify_all();
        } else if (op == kAdd) {
          auto it = data_.find(key);
          int64_t value = (it == data_.end() ? 0 : decode_int(it->second)) + decode_int(operand);
          data_[key] = reply = encode_int(value);
          changed_.notify_all();
        } else if (op == kGet) {
          auto deadline = Clock::now() + milliseconds(decode_int(operand));
          bool present = changed_.wait_until(lock, deadline, [&] { return stopping_ || data_.count(key); });
          if (present && !stopping_) {
            reply = data_[key];
          } else {
            found = 0;
          }
        } else {
          return;  // not a Loom client: drop the connection
        }
      }
      uint64_t reply_len = reply.size();
      if (!send_all(fd, &found, 1) || !send_all(fd, &reply_len, sizeof reply_len) ||
          !send_all(fd, reply.data(), reply.size())) {
        return;
      }
    }
  }

  int listen_fd_ = -1;
  int port_ = 0;
  std::thread accept_thread_;
  std::mutex mutex_;  // guards everything below
  std::condition_variable changed_;
  bool stopping_ = false;
  std::map<std::string, std::vector<char>> data_;
  std::vector<int> conn_fds_;
  std::vector<std::thread> conn_threads_;
};

// ---- the client (every rank) -------------------------------------------------------------------

TCPStore::TCPStore(std::string host, int port, bool is_master, milliseconds timeout)
    : host_(std::move(host)), port_(port), timeout_(timeout) {
  if (port < 0 || port > 65535) {
    throw DistributedError("TCPStore: port " + std::to_string(port) + " is not in [0, 65535]");
  }
  if (is_master) {
    server_ = std::make_unique<Server>(port);
    port_ = server_->port();
  } else if (port == 0) {
    throw DistributedError("TCPStore: a client needs the master's port (got 0)");
  }
  // The master reaches its own server on the loopback address.
  const std::string& connect_host = is_master ? std::string("127.0.0.1") : host_;
  auto deadline = Clock::now() + timeout_;
  std::string why;
  for (;;) {
    fd_ = try_connect(connect_host, port_, deadline, why);
    if (fd_ >= 0) break;
    if (Clock::now() >= deadline) {
      throw DistributedError("TCPStore: could not connect to the master at " + host_ + ":" +
                             std::to_string(port_) + " within " + std::to_string(timeout_.count()) +
                             " ms: " + why + " (check MASTER_ADDR and MASTER_PORT, and that rank 0 runs)");
    }
    std::this_thread::sleep_for(std::min<milliseconds>(milliseconds(50), milliseconds(remaining_ms(deadline))));
  }
}

TCPStore::~TCPStore() {
  if (fd_ >= 0) ::close(fd_);
  server_.reset();
}

std::vector<char> TCPStore::request(char op, const std::string& key, const std::vector<char>& operand,
                                    milliseconds waited) {
  std::lock_guard<std::mutex> lock(mutex_);
  uint32_t key_len = uint32_t(key.size());
  uint64_t operand_len = operand.size();
  bool sent = send_all(fd_, &op, 1) && send_all(fd_, &key_len, sizeof key_len) &&
              send_all(fd_, key.data(), key.size()) && send_all(fd_, &operand_len, sizeof operand_len) &&
              send_all(fd_, operand.data(), operand.size());
  auto deadline = Clock::now() + waited + kReplyGrace;
  char found = 0;
  uint64_t len = 0;
  std::vector<char> reply;
  bool received = sent && recv_all(fd_, &found, 1, &deadline) && recv_all(fd_, &len, sizeof len, &deadline);
  if (received) {
    reply.resize(len);
    received = recv_all(fd_, reply.data(), len, &deadline);
  }
  if (!received) {
    // The stream is out of step now; later requests fail the same way.
    throw DistributedError("TCPStore: lost the connection to the master at " + host_ + ":" +
                           std::to_string(port_) + " (key '" + key + "')");
  }
  if (!found) {
    throw DistributedError("TCPStore: timed out after " + std::to_string(waited.count()) +
                           " ms waiting for key '" + key + "' (a rank did not arrive?)");
  }
  return reply;
}

void TCPStore::set(const std::string& key, const std::vector<char>& value) {
  request(kSet, key, value, timeout_);
}

std::vector<char> TCPStore::get(const std::string& key) {
  return request(kGet, key, encode_int(timeout_.count()), timeout_);
}

int64_t TCPStore::add(const std::string& key, int64_t delta) {
  return decode_int(request(kAdd, key, encode_int(delta), timeout_));
}

void TCPStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void TCPStore::wait(const std::vector<std::string>& keys, milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  for (const std::string& key : keys) {
    milliseconds left(remaining_ms(deadline));
    request(kGet, key, encode_int(left.count()), left);
  }
}

}  // namespace loom::distributed
