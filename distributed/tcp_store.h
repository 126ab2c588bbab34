// TCPStore: the small key-value store the ranks of a process group meet in.
//
// Note [rendezvous]
// Rank 0 serves the store on MASTER_ADDR:MASTER_PORT (one thread per connected rank), or,
// under torchrun (TORCHELASTIC_USE_AGENT_STORE=True), torchrun's agent does; every rank,
// rank 0 included, is a client of it. The process group then uses it once, to
// set up its connections:
//   1. each rank adds 1 to "rank/<r>": a count above 1 means two processes claimed rank r
//      (DistributedError, "duplicate rank");
//   2. rank 0 sets "world_size"; every rank reads it and compares it with its own
//      (DistributedError, "world size mismatch");
//   3. Gloo's connectFullMesh publishes each rank's address under its own key and reads
//      the others' (process_group_gloo.cpp adapts this store to gloo::rendezvous::Store).
// Every blocking call (connect, get, wait) gives up after the store's timeout with a
// DistributedError naming the key or the address: a wrong MASTER_PORT or a rank that
// never comes fails, it never hangs.
//
// The store speaks PyTorch's c10d TCPStore protocol (Note [c10d wire format],
// distributed/c10d_protocol.h), in PyTorch 2.x's dialect or 1.13's, whichever the server
// speaks (Note [c10d dialects]): a Loom rank can be a client of torchrun's agent store
// (TORCHELASTIC_USE_AGENT_STORE=True) and a PyTorch process a client of Loom's.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/tcp_store_server.h"

namespace loom::distributed {

class TCPStore {
 public:
  // is_master: serve the store on port (0: any free port, see port()) before connecting.
  // Clients retry connecting until timeout, so ranks may start in any order. prefix goes
  // before every key (PyTorch's PrefixStore), e.g. "/worker/attempt_0/" in torchrun's store.
  TCPStore(std::string host, int port, bool is_master,
           std::chrono::milliseconds timeout = std::chrono::seconds(300), std::string prefix = "");
  ~TCPStore();
  TCPStore(const TCPStore&) = delete;
  TCPStore& operator=(const TCPStore&) = delete;

  void set(const std::string& key, const std::vector<char>& value);
  // Blocks until key is set, at most timeout() (DistributedError then).
  std::vector<char> get(const std::string& key);
  // Adds delta to the counter under key (0 when absent) and returns the new value.
  int64_t add(const std::string& key, int64_t delta);
  // Blocks until every key is set, at most timeout (all keys together).
  void wait(const std::vector<std::string>& keys);
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  // Whether every key is set, at once.
  bool check(const std::vector<std::string>& keys);
  // Sets key to desired if it holds expected (or is absent and expected is empty); returns
  // the value it holds then.
  std::vector<char> compare_set(const std::string& key, const std::vector<char>& expected,
                                const std::vector<char>& desired);
  // The key on the wire: "/" + prefix + key ("/" as PyTorch's client puts before every key).
  std::string wire_key(const std::string& key) const { return "/" + prefix_ + key; }

  const std::string& host() const { return host_; }
  int port() const { return port_; }
  bool is_master() const { return server_ != nullptr; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  // The dialect the server speaks, learnt as this client connected.
  c10d::Dialect dialect() const { return dialect_; }

 private:
  void connect(std::chrono::steady_clock::time_point deadline);
  bool hello(c10d::Dialect d);
  void send(const std::vector<char>& bytes, const std::string& what);
  void wait_locked(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  [[noreturn]] void lost(const std::string& what) const;

  std::string host_;
  int port_;
  std::chrono::milliseconds timeout_;
  std::string prefix_;
  std::unique_ptr<TCPStoreServer> server_;  // rank 0 only
  int fd_ = -1;                             // this client's connection to the server
  c10d::Dialect dialect_ = c10d::Dialect::TORCH2;
  std::mutex mutex_;                        // one request at a time on fd_
};

}  // namespace loom::distributed
