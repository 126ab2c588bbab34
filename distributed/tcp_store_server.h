// TCPStoreServer: the store rank 0 serves (and torchrun's agent would), speaking c10d's
// protocol (Note [c10d wire format], distributed/c10d_protocol.h) to Loom's and PyTorch's
// clients alike, PyTorch 1.13's too: each connection in its own dialect (Note [c10d dialects]). One thread per connection; a connection answers its requests in order.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "distributed/c10d_protocol.h"

namespace loom::distributed {

class TCPStoreServer {
 public:
  // Listens on port (0: any free port, see port()); DistributedError when it cannot.
  explicit TCPStoreServer(int port);
  ~TCPStoreServer();
  TCPStoreServer(const TCPStoreServer&) = delete;
  TCPStoreServer& operator=(const TCPStoreServer&) = delete;

  int port() const { return port_; }

 private:
  void accept_loop();
  void serve(int fd);
  // One request, its query byte read; false to drop the connection (EOF, a malformed request).
  bool answer(int fd, c10d::Query query, c10d::Dialect dialect);
  // WAIT: blocks until every key is set, the client cancels, or the server stops.
  bool wait_keys(int fd, const std::vector<std::string>& keys, c10d::Dialect dialect);
  bool all_set(const std::vector<std::string>& keys) const;  // mutex_ held
  void store(const std::string& key, std::vector<char> value);  // mutex_ held; wakes waiters

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

}  // namespace loom::distributed
