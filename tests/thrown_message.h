// The message of the exception a call throws: for tests that compare two messages (a GPU's
// deferred error against the CPU's eager one) rather than look for parts of one.
#pragma once

#include <catch2/catch.hpp>

#include <functional>
#include <string>

namespace loom::test {

// The what() of the E that f throws; the test fails if f throws none.
template <typename E>
std::string thrown_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  FAIL("did not throw the expected exception");
  return {};
}

}  // namespace loom::test
