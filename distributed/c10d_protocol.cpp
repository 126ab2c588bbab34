#include "distributed/c10d_protocol.h"

#include "distributed/error.h"

namespace loom::distributed::c10d {

namespace {
constexpr uint8_t kLegacyDeleteKey = 8;  // 1.13's WATCH_KEY (7), which Loom does not serve, is before it
}

const char* name(Dialect d) { return d == Dialect::TORCH2 ? "PyTorch 2.x" : "PyTorch 1.13"; }

uint8_t wire(Query q, Dialect d) {
  if (d == Dialect::TORCH2) return uint8_t(q);
  if (q >= Query::SET && q <= Query::GETNUMKEYS) return uint8_t(q) - 1;
  if (q == Query::DELETE_KEY) return kLegacyDeleteKey;
  throw DistributedError("c10d: PyTorch 1.13's TCPStore protocol has no query " + std::to_string(int(q)) +
                         " (2.x numbering)");
}

bool from_wire(uint8_t byte, Dialect d, Query& q) {
  if (d == Dialect::TORCH2) {
    q = Query(byte);
    return byte <= uint8_t(Query::PING);
  }
  if (byte <= wire(Query::GETNUMKEYS, d)) {
    q = Query(byte + 1);
    return true;
  }
  q = Query::DELETE_KEY;
  return byte == kLegacyDeleteKey;
}

Writer& Writer::raw(const void* p, size_t n) {
  auto* c = static_cast<const char*>(p);
  data_.insert(data_.end(), c, c + n);
  return *this;
}

Writer& Writer::keys(const std::vector<std::string>& ks) {
  u64(ks.size());
  for (const std::string& k : ks) bytes(k);
  return *this;
}

bool Reader::key(std::string& s) {
  uint64_t n = 0;
  if (!u64(n) || n > kMaxKeyBytes) return false;
  s.resize(n);
  return raw(s.data(), n);
}

bool Reader::value(std::vector<char>& v) {
  uint64_t n = 0;
  if (!u64(n) || n > kMaxValueBytes) return false;
  v.resize(n);
  return raw(v.data(), n);
}

bool Reader::keys(std::vector<std::string>& ks) {
  uint64_t n = 0;
  if (!u64(n) || n > kMaxKeys) return false;
  ks.resize(n);
  for (std::string& k : ks) {
    if (!key(k)) return false;
  }
  return true;
}

}  // namespace loom::distributed::c10d
