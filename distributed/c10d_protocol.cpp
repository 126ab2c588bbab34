#include "distributed/c10d_protocol.h"

namespace loom::distributed::c10d {

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
