// PyTorch's c10d TCPStore wire protocol (PyTorch 2.x: TCPStore.cpp, TCPStoreBackend.hpp and
// TCPStoreLibUvBackend.cpp), which Loom's TCPStore speaks as client and server, so that a
// Loom rank can join torchrun's agent store and a PyTorch process can join Loom's.
//
// Note [c10d wire format]
// Integers travel in the sender's byte order (little-endian on every machine PyTorch and
// Loom run on); a string or a value is [length u64][bytes]. A request is [query u8][fields]:
//
//   VALIDATE     magic u32 (0x3C85F7CE)        -> nothing   a connection's first request;
//                                                           the server ignores (closes, here)
//                                                           a client that does not send it
//   PING         nonce u32                     -> nonce u32 (2.x clients send it after VALIDATE)
//   SET          key, value                    -> nothing
//   COMPARE_SET  key, expected, desired        -> value     (the value now stored)
//   GET          key                           -> value     (the key must exist: clients WAIT first)
//   ADD          key, delta i64                -> sum i64   (stored as decimal text)
//   CHECK        count u64, keys               -> u8 READY 0 / NOT_READY 1
//   WAIT         count u64, keys               -> u8 STOP_WAITING 0, once all are set
//   GETNUMKEYS                                 -> i64
//   DELETE_KEY   key                           -> i64 (keys deleted)
//   APPEND       key, value                    -> nothing
//   MULTI_GET    count u64, keys               -> count values
//   MULTI_SET    count u64, (key, value)s      -> nothing
//   CANCEL_WAIT                                -> u8 WAIT_CANCELED 1 (after a pending WAIT's
//                                                 STOP_WAITING, if that was already sent)
//
// A WAIT that times out on the client is cancelled with CANCEL_WAIT. PyTorch's client puts
// "/" before every key (its keyPrefix_), and so does Loom's (TCPStore::wire_key): a key set
// by one is the same key to the other.
//
// Note [c10d dialects]
// PyTorch 1.13 (Debian's python3-torch) speaks an older dialect of the same format: no
// VALIDATE, PING, APPEND, MULTI_GET, MULTI_SET or CANCEL_WAIT, and the queries numbered
// SET 0, COMPARE_SET 1, GET 2, ADD 3, CHECK 4, WAIT 5, GETNUMKEYS 6, (WATCH_KEY 7,) DELETE_KEY 8
// (2.x: VALIDATE 0, SET 1 ... GETNUMKEYS 7, DELETE_KEY 8); the fields and answers are the
// same. A 1.13 client's WAIT that times out leaves its answer pending: the stream is out of
// step, so Loom's client reconnects instead (there is no CANCEL_WAIT).
//   - Loom's client learns the server's dialect as it connects (TCPStore::connect): it sends
//     VALIDATE and PING; a 2.x server echoes the nonce, a 1.13 server reads a SET whose key
//     length (the magic and the nonce's low bytes: the nonce's third byte has its top bit
//     set) is past any vector's max_size and resets the connection at once. The client then
//     reconnects and speaks 1.13, confirmed by a GETNUMKEYS answer.
//   - Loom's server tells them apart by the first bytes: a 2.x client's are VALIDATE and the
//     magic; a 1.13 client's are any other query, or a SET whose key length (at most
//     kMaxKeyBytes) cannot begin with the magic.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "distributed/socket.h"

namespace loom::distributed::c10d {

enum class Query : uint8_t {
  VALIDATE, SET, COMPARE_SET, GET, ADD, CHECK, WAIT, GETNUMKEYS, DELETE_KEY, APPEND, MULTI_GET,
  MULTI_SET, CANCEL_WAIT, PING,
};
// Which dialect a connection speaks (Note [c10d dialects]).
enum class Dialect : uint8_t { TORCH2, TORCH1_13 };
const char* name(Dialect d);  // "PyTorch 2.x", "PyTorch 1.13"
// A query's byte in dialect d; DistributedError when d has no such query.
uint8_t wire(Query q, Dialect d);
// The query a byte stands for in dialect d; false when it stands for none Loom serves.
bool from_wire(uint8_t byte, Dialect d, Query& q);

enum class CheckResponse : uint8_t { READY, NOT_READY };
enum class WaitResponse : uint8_t { STOP_WAITING, WAIT_CANCELED };

constexpr uint32_t kValidationMagic = 0x3C85F7CE;
// Bounds a server applies before allocating (a stray client's bytes are not a length).
constexpr uint64_t kMaxKeyBytes = 64 * 1024;
constexpr uint64_t kMaxValueBytes = uint64_t(1) << 31;
constexpr uint64_t kMaxKeys = 1 << 20;

// One message's bytes, built field by field, sent whole.
class Writer {
 public:
  explicit Writer(Query q, Dialect d = Dialect::TORCH2) { u8(wire(q, d)); }
  Writer() = default;
  Writer& u8(uint8_t v) { return raw(&v, 1); }
  Writer& u32(uint32_t v) { return raw(&v, sizeof v); }
  Writer& u64(uint64_t v) { return raw(&v, sizeof v); }
  Writer& i64(int64_t v) { return raw(&v, sizeof v); }
  Writer& bytes(const std::string& s) { return u64(s.size()).raw(s.data(), s.size()); }
  Writer& bytes(const std::vector<char>& v) { return u64(v.size()).raw(v.data(), v.size()); }
  Writer& keys(const std::vector<std::string>& ks);  // count u64, then each key

  const std::vector<char>& data() const { return data_; }
  bool send(int fd) const { return net::send_all(fd, data_.data(), data_.size()); }

 private:
  Writer& raw(const void* p, size_t n);
  std::vector<char> data_;
};

// Reads fields from a socket; each call false on EOF, error, past the deadline (when given),
// or a length over its bound.
class Reader {
 public:
  explicit Reader(int fd, const net::Clock::time_point* deadline = nullptr) : fd_(fd), deadline_(deadline) {}
  bool u8(uint8_t& v) { return raw(&v, 1); }
  bool u32(uint32_t& v) { return raw(&v, sizeof v); }
  bool u64(uint64_t& v) { return raw(&v, sizeof v); }
  bool i64(int64_t& v) { return raw(&v, sizeof v); }
  bool key(std::string& s);
  bool value(std::vector<char>& v);
  bool keys(std::vector<std::string>& ks);

 private:
  bool raw(void* p, size_t n) { return net::recv_all(fd_, p, n, deadline_); }
  int fd_;
  const net::Clock::time_point* deadline_;
};

}  // namespace loom::distributed::c10d
