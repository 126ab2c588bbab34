// TCPStore: the small key-value store the ranks of a process group meet in.
//
// Note [rendezvous]
// Rank 0 serves the store on MASTER_ADDR:MASTER_PORT (one thread per connected rank);
// every rank, rank 0 included, is a client of it. The process group then uses it once, to
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
// The wire format is private to this file's implementation: a request is an opcode, a
// length-prefixed key and an operand; the server answers each request in order.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace loom::distributed {

class TCPStore {
 public:
  // is_master: serve the store on port (0: any free port, see port()) before connecting.
  // Clients retry connecting until timeout, so ranks may start in any order.
  TCPStore(std::string host, int port, bool is_master,
           std::chrono::milliseconds timeout = std::chrono::seconds(300));
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

  const std::string& host() const { return host_; }
  int port() const { return port_; }
  bool is_master() const { return server_ != nullptr; }
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  class Server;
  // Sends one request and returns the reply's bytes; waited: how long the server may take
  // (a get's own timeout), for the error message and the client's own deadline.
  std::vector<char> request(char op, const std::string& key, const std::vector<char>& operand,
                            std::chrono::milliseconds waited);

  std::string host_;
  int port_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<Server> server_;  // rank 0 only
  int fd_ = -1;                     // this client's connection to the server
  std::mutex mutex_;                // one request at a time on fd_
};

}  // namespace loom::distributed
