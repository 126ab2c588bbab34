// Loom's TCPStore against c10d's wire protocol, byte for byte (Note [c10d wire format]):
// the server answers requests written out by hand here as PyTorch 2.x's and 1.13's clients
// send them (Note [c10d dialects]; 1.13's recorded from Debian's python3-torch through a
// proxy), and the client sends exactly those bytes to a scripted server. The exchange with a real
// PyTorch is the CTest torch_store (tests/distributed/torch_store_test.py).
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <sstream>
#include <thread>
#include <string>
#include <vector>

#include "distributed/c10d_protocol.h"
#include "distributed/error.h"
#include "distributed/socket.h"
#include "distributed/tcp_store.h"
#include "test_util.h"

using namespace loom::distributed;
using loom::test::require_throws_with;
using std::chrono::milliseconds;
using Bytes = std::vector<unsigned char>;

namespace {

// "01 2f 6b" -> the bytes; "u64:2" and "i64:-2" are 8 little-endian bytes, "s:/k" the characters.
Bytes hex(const std::string& text) {
  Bytes out;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    if (word.rfind("u64:", 0) == 0 || word.rfind("i64:", 0) == 0) {
      uint64_t v = word[0] == 'u' ? std::stoull(word.substr(4)) : uint64_t(std::stoll(word.substr(4)));
      for (int i = 0; i < 8; ++i) out.push_back((v >> (8 * i)) & 0xff);
    } else if (word.rfind("s:", 0) == 0) {
      out.insert(out.end(), word.begin() + 2, word.end());
    } else {
      out.push_back(static_cast<unsigned char>(std::stoul(word, nullptr, 16)));
    }
  }
  return out;
}

std::string dump(const Bytes& b) {
  std::ostringstream s;
  for (unsigned char c : b) s << std::hex << (c < 16 ? "0" : "") << int(c) << ' ';
  return s.str();
}

// A raw client: sends bytes, reads a given number back (empty on EOF or after 5 s).
class RawClient {
 public:
  explicit RawClient(int port) {
    std::string why;
    fd_ = net::try_connect("127.0.0.1", port, net::Clock::now() + std::chrono::seconds(5), why);
    REQUIRE(fd_ >= 0);
  }
  ~RawClient() { ::close(fd_); }
  void send(const Bytes& b) { REQUIRE(net::send_all(fd_, b.data(), b.size())); }
  Bytes read(size_t n) {
    Bytes b(n);
    auto deadline = net::Clock::now() + std::chrono::seconds(5);
    if (!net::recv_all(fd_, b.data(), n, &deadline)) return {};
    return b;
  }
  // Whether the server closed the connection (reads EOF within 5 s).
  bool closed() {
    unsigned char c;
    auto deadline = net::Clock::now() + std::chrono::seconds(5);
    return !net::recv_all(fd_, &c, 1, &deadline) && net::Clock::now() < deadline;
  }

 private:
  int fd_ = -1;
};

const char* kHello = "00 ce f7 85 3c";  // VALIDATE, the magic number 0x3C85F7CE

}  // namespace

TEST_CASE("TCPStore server: answers c10d's requests byte for byte", "[c10d_store]") {
  TCPStore master("127.0.0.1", 0, true, milliseconds(5000));
  RawClient c(master.port());
  c.send(hex(kHello));
  c.send(hex("0d 04 03 02 01"));  // PING 0x01020304
  CHECK(c.read(4) == hex("04 03 02 01"));

  c.send(hex("01 u64:2 s:/k u64:2 s:hi"));  // SET "/k" = "hi"; no answer
  c.send(hex("03 u64:2 s:/k"));             // GET "/k"
  CHECK(c.read(10) == hex("u64:2 s:hi"));
  CHECK(master.get("k") == std::vector<char>{'h', 'i'});  // Loom's key "k" is "/k" on the wire

  c.send(hex("04 u64:2 s:/n i64:5"));  // ADD "/n" 5
  CHECK(c.read(8) == hex("i64:5"));
  c.send(hex("04 u64:2 s:/n i64:-7"));
  CHECK(c.read(8) == hex("i64:-2"));
  c.send(hex("03 u64:2 s:/n"));  // a counter is decimal text
  CHECK(c.read(10) == hex("u64:2 s:-2"));
  CHECK(master.add("n", 3) == 1);

  c.send(hex("05 u64:2 u64:2 s:/k u64:2 s:/x"));  // CHECK "/k", "/x"
  CHECK(c.read(1) == hex("01"));                  // NOT_READY
  c.send(hex("05 u64:1 u64:2 s:/k"));
  CHECK(c.read(1) == hex("00"));                  // READY

  c.send(hex("06 u64:1 u64:2 s:/k"));  // WAIT for a key that is set
  CHECK(c.read(1) == hex("00"));       // STOP_WAITING
  c.send(hex("06 u64:1 u64:2 s:/w"));  // WAIT for one that comes later
  auto later = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(milliseconds(100));
    master.set("w", {'1'});
  });
  CHECK(c.read(1) == hex("00"));
  later.get();
  c.send(hex("06 u64:1 u64:2 s:/x"));  // WAIT, then cancelled
  c.send(hex("0c"));                   // CANCEL_WAIT
  CHECK(c.read(1) == hex("01"));       // WAIT_CANCELED

  c.send(hex("02 u64:2 s:/k u64:2 s:hi u64:2 s:ho"));  // COMPARE_SET "/k": "hi" -> "ho"
  CHECK(c.read(10) == hex("u64:2 s:ho"));
  c.send(hex("02 u64:2 s:/k u64:2 s:hi u64:2 s:no"));  // expected value differs: unchanged
  CHECK(c.read(10) == hex("u64:2 s:ho"));
  c.send(hex("02 u64:2 s:/c u64:0 u64:1 s:y"));        // absent and expected empty: set
  CHECK(c.read(9) == hex("u64:1 s:y"));

  c.send(hex("0b u64:2 u64:2 s:/a u64:1 s:A u64:2 s:/b u64:1 s:B"));  // MULTI_SET
  c.send(hex("0a u64:2 u64:2 s:/b u64:2 s:/a"));                      // MULTI_GET
  CHECK(c.read(18) == hex("u64:1 s:B u64:1 s:A"));
  c.send(hex("09 u64:2 s:/a u64:1 s:+"));  // APPEND
  c.send(hex("07"));                       // GETNUMKEYS: /k /n /w /c /a /b
  CHECK(c.read(8) == hex("i64:6"));
  c.send(hex("08 u64:2 s:/a"));  // DELETE_KEY
  CHECK(c.read(8) == hex("i64:1"));
  c.send(hex("08 u64:2 s:/a"));
  CHECK(c.read(8) == hex("i64:0"));

  c.send(hex("03 u64:2 s:/x"));  // GET of a key that is absent: the server drops the client
  CHECK(c.closed());
}

TEST_CASE("TCPStore server: answers PyTorch 1.13's requests byte for byte", "[c10d_store]") {
  TCPStore master("127.0.0.1", 0, true, milliseconds(5000));
  RawClient c(master.port());
  // Recorded from torch 1.13's client: no VALIDATE; SET 0, COMPARE_SET 1, GET 2, ADD 3,
  // CHECK 4, WAIT 5, GETNUMKEYS 6, DELETE_KEY 8.
  c.send(hex("00 u64:2 s:/k u64:1 s:v"));  // set("k", "v"); no answer
  c.send(hex("05 u64:1 u64:2 s:/k"));      // get("k"): WAIT ...
  CHECK(c.read(1) == hex("00"));           // STOP_WAITING
  c.send(hex("02 u64:2 s:/k"));            // ... then GET
  CHECK(c.read(9) == hex("u64:1 s:v"));
  CHECK(master.get("k") == std::vector<char>{'v'});
  c.send(hex("03 u64:2 s:/n i64:3"));  // add("n", 3)
  CHECK(c.read(8) == hex("i64:3"));
  c.send(hex("04 u64:2 u64:2 s:/k u64:2 s:/x"));  // CHECK (C++ only in 1.13)
  CHECK(c.read(1) == hex("01"));                  // NOT_READY
  c.send(hex("01 u64:4 s:/cas u64:0 u64:5 s:first"));  // compare_set("cas", "", "first")
  CHECK(c.read(13) == hex("u64:5 s:first"));
  c.send(hex("01 u64:4 s:/cas u64:1 s:x u64:1 s:y"));  // compare_set("cas", "x", "y"): unchanged
  CHECK(c.read(13) == hex("u64:5 s:first"));
  c.send(hex("06"));  // num_keys: /k /n /cas
  CHECK(c.read(8) == hex("i64:3"));
  c.send(hex("08 u64:2 s:/k"));  // delete_key("k")
  CHECK(c.read(8) == hex("i64:1"));
  c.send(hex("07 u64:2 s:/k"));  // WATCH_KEY, which Loom does not serve: dropped
  CHECK(c.closed());

  RawClient first_set(master.port());  // a 1.13 client whose first request is a SET (0, as VALIDATE)
  first_set.send(hex("00 u64:2 s:/s u64:1 s:1 06"));
  CHECK(first_set.read(8) == hex("i64:3"));
  CHECK(master.get("s") == std::vector<char>{'1'});
}

TEST_CASE("TCPStore server: drops a client that sends garbage", "[c10d_store]") {
  TCPStore master("127.0.0.1", 0, true, milliseconds(5000));
  for (const char* first : {"00 de ad be ef 00 00 00 00",  // VALIDATE with a wrong magic number: a 1.13 SET
                                                          // whose key is too long
                            "47 45 54 20 2f"}) {         // "GET /": an HTTP client (no 1.13 query is 0x47)
    RawClient c(master.port());
    c.send(hex(first));
    INFO(first);
    CHECK(c.closed());
  }
  RawClient c(master.port());
  c.send(hex(kHello));
  c.send(hex("ff"));  // an unknown query
  CHECK(c.closed());
  RawClient big(master.port());
  big.send(hex(kHello));
  big.send(hex("01 u64:1000000000000"));  // a key length no client sends
  CHECK(big.closed());
  CHECK(master.check({}) == true);  // the server still serves
}

namespace {

// A scripted server: accepts one client, then for each step reads exactly `expect` and
// writes `reply`. As a 2.x server it echoes the PING's nonce; as a 1.13 server it closes the
// connection with VALIDATE and PING, and answers the next one's GETNUMKEYS. The step
// kReconnect: the client closes its connection and opens another (handshake again).
struct Step {
  std::string expect, reply;
};
const char* kReconnect = "reconnect";

class ScriptedServer {
 public:
  explicit ScriptedServer(std::vector<Step> steps, c10d::Dialect dialect = c10d::Dialect::TORCH2)
      : dialect_(dialect) {
    std::string why;
    listen_fd_ = net::listen_on(port_, why);
    REQUIRE(listen_fd_ >= 0);
    done_ = std::async(std::launch::async, [this, steps] { return run(steps); });
  }
  ~ScriptedServer() { ::close(listen_fd_); }
  int port() const { return port_; }
  // "" when every step matched, else what differed.
  std::string result() { return done_.get(); }

 private:
  // Accepts a client and answers its handshake; -1, and failure set, if it differs.
  int accept_client(net::Clock::time_point deadline, std::string& failure) {
    int fd = ::accept(listen_fd_, nullptr, nullptr);
    Bytes hello(10);
    if (fd < 0 || !net::recv_all(fd, hello.data(), hello.size(), &deadline)) {
      failure = "no VALIDATE + PING";
    } else if (Bytes(hello.begin(), hello.begin() + 6) != hex(std::string(kHello) + " 0d") || !(hello[8] & 0x80)) {
      failure = "hello: " + dump(hello);  // the nonce's third byte's top bit: see TCPStore::hello
    } else if (dialect_ == c10d::Dialect::TORCH2) {
      net::send_all(fd, hello.data() + 6, 4);  // the nonce back
      return fd;
    } else {  // 1.13: closes; the client's second connection asks GETNUMKEYS
      ::close(fd);
      fd = ::accept(listen_fd_, nullptr, nullptr);
      Bytes query(1);
      if (fd >= 0 && net::recv_all(fd, query.data(), 1, &deadline) && query == hex("06")) {
        Bytes keys = hex("i64:7");
        net::send_all(fd, keys.data(), keys.size());
        return fd;
      }
      failure = "no 1.13 GETNUMKEYS after the reset: " + dump(query);
    }
    if (fd >= 0) ::close(fd);
    return -1;
  }

  std::string run(const std::vector<Step>& steps) {
    auto deadline = net::Clock::now() + std::chrono::seconds(10);
    std::string failure;
    int fd = accept_client(deadline, failure);
    for (const Step& s : steps) {
      if (fd < 0) break;
      if (s.expect == kReconnect) {
        char c;  // the client closes its connection
        if (net::recv_all(fd, &c, 1, &deadline)) failure = "the client sent more before reconnecting";
        ::close(fd);
        fd = failure.empty() ? accept_client(deadline, failure) : -1;
        continue;
      }
      Bytes want = hex(s.expect), got(want.size());
      if (!net::recv_all(fd, got.data(), got.size(), &deadline) || got != want) {
        failure = "expected " + dump(want) + "got " + dump(got);
        break;
      }
      Bytes reply = hex(s.reply);
      net::send_all(fd, reply.data(), reply.size());
    }
    if (fd >= 0) ::close(fd);
    return failure;
  }
  c10d::Dialect dialect_;
  int listen_fd_ = -1, port_ = 0;
  std::future<std::string> done_;
};

// The calls both dialects' scripts below expect, in order.
void client_calls(TCPStore& store) {
  store.set("k", {'h', 'i'});
  CHECK(store.add("n", 5) == 12);
  CHECK(store.get("k") == std::vector<char>{'a', 'b', 'c'});
  CHECK_FALSE(store.check({"k", "z"}));
  CHECK(store.compare_set("k", {'h', 'i'}, {'h', 'o'}) == std::vector<char>{'h', 'o'});
  require_throws_with<DistributedError>([&] { store.wait({"k", "x"}, milliseconds(200)); },
                                        {"timed out after 200 ms waiting for key 'x'"});
}

}  // namespace

TEST_CASE("TCPStore client: sends c10d's requests byte for byte", "[c10d_store]") {
  ScriptedServer server({
      {"01 u64:2 s:/k u64:2 s:hi", ""},                          // set
      {"04 u64:2 s:/n i64:5", "i64:12"},                          // add
      {"06 u64:1 u64:2 s:/k", "00"},                              // get: WAIT ...
      {"03 u64:2 s:/k", "u64:3 s:abc"},                           // ... then GET
      {"05 u64:2 u64:2 s:/k u64:2 s:/z", "01"},                   // check
      {"02 u64:2 s:/k u64:2 s:hi u64:2 s:ho", "u64:2 s:ho"},      // compare_set
      {"06 u64:2 u64:2 s:/k u64:2 s:/x", ""},                     // wait: no answer, so ...
      {"0c", "01"},                                               // ... CANCEL_WAIT after the timeout
      {"05 u64:1 u64:2 s:/k", "00"},                              // which keys are missing
      {"05 u64:1 u64:2 s:/x", "01"},
  });
  {
    TCPStore store("127.0.0.1", server.port(), false, milliseconds(3000));
    client_calls(store);
  }
  CHECK(server.result() == "");
}

TEST_CASE("TCPStore client: speaks PyTorch 1.13's dialect to a 1.13 server, byte for byte", "[c10d_store]") {
  ScriptedServer server(
      {
          {"00 u64:2 s:/k u64:2 s:hi", ""},                      // set
          {"03 u64:2 s:/n i64:5", "i64:12"},                      // add
          {"05 u64:1 u64:2 s:/k", "00"},                          // get: WAIT ...
          {"02 u64:2 s:/k", "u64:3 s:abc"},                       // ... then GET
          {"04 u64:2 u64:2 s:/k u64:2 s:/z", "01"},               // check
          {"01 u64:2 s:/k u64:2 s:hi u64:2 s:ho", "u64:2 s:ho"},  // compare_set
          {"05 u64:2 u64:2 s:/k u64:2 s:/x", ""},                 // wait: no answer, and no
          {kReconnect, ""},                                       // CANCEL_WAIT in 1.13: a new connection
          {"04 u64:1 u64:2 s:/k", "00"},                          // which keys are missing
          {"04 u64:1 u64:2 s:/x", "01"},
      },
      c10d::Dialect::TORCH1_13);
  {
    auto start = net::Clock::now();
    TCPStore store("127.0.0.1", server.port(), false, milliseconds(3000));
    CHECK(net::Clock::now() - start < milliseconds(500));  // the dialect is learnt at once
    CHECK(store.dialect() == c10d::Dialect::TORCH1_13);
    client_calls(store);
  }
  CHECK(server.result() == "");
}

TEST_CASE("TCPStore client: learns PyTorch 2.x's dialect from Loom's server", "[c10d_store]") {
  TCPStore master("127.0.0.1", 0, true, milliseconds(5000));
  TCPStore client("127.0.0.1", master.port(), false, milliseconds(5000));
  CHECK(client.dialect() == c10d::Dialect::TORCH2);
  client.set("a", {'1'});
  CHECK(master.get("a") == std::vector<char>{'1'});
}

TEST_CASE("TCPStore client: a prefix goes between c10d's '/' and the key", "[c10d_store]") {
  // init_process_group's prefix under torchrun: PyTorch's workers' PrefixStore("/worker/attempt_0").
  ScriptedServer server(std::vector<Step>{{"01 u64:20 s://worker/attempt_0/k u64:0", ""}});
  {
    TCPStore store("127.0.0.1", server.port(), false, milliseconds(3000), "/worker/attempt_0/");
    store.set("k", {});
  }
  CHECK(server.result() == "");
}

TEST_CASE("TCPStore client: a server that never answers the PING is a DistributedError", "[c10d_store]") {
  // A listener that accepts and stays silent: not a c10d TCPStore.
  int port = 0;
  std::string why;
  int fd = net::listen_on(port, why);
  REQUIRE(fd >= 0);
  auto start = net::Clock::now();
  require_throws_with<DistributedError>([&] { TCPStore("127.0.0.1", port, false, milliseconds(500)); },
                                        {"does not answer c10d's VALIDATE and PING", "PyTorch (2.x or 1.13)"});
  CHECK(net::Clock::now() - start < std::chrono::seconds(3));
  ::close(fd);
}
