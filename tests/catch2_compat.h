// Catch2 for the tests, version 2 (Debian 12's catch2, one header) or 3 (Ubuntu 24.04's,
// Debian 13's: a library with Catch2::Catch2WithMain). CMakeLists.txt says which through
// LOOM_CATCH2_MAJOR; the tests use version 2's names, which version 3 renamed:
//   Approx               -> Catch::Approx
//   Catch::Contains(str) -> Catch::Matchers::ContainsSubstring(str)
#pragma once

#if LOOM_CATCH2_MAJOR >= 3
#include <catch2/catch_all.hpp>

#include <string>

using Catch::Approx;
namespace Catch {
inline Matchers::StringContainsMatcher Contains(const std::string& text,
                                                CaseSensitive case_sensitivity = CaseSensitive::Yes) {
  return Matchers::ContainsSubstring(text, case_sensitivity);
}
}  // namespace Catch
#else
#include <catch2/catch.hpp>
#endif
