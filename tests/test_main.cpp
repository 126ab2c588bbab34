// The test runner's main: Catch2 2 makes it here; with Catch2 3 it comes from the library
// Catch2::Catch2WithMain (tests/catch2_compat.h).
#if !defined(LOOM_CATCH2_MAJOR) || LOOM_CATCH2_MAJOR < 3
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
#endif
