# Finds Gloo (Debian's libgloo-dev), the collectives of distributed/, as the target `gloo`:
# through the package config Debian ships (/usr/share/cmake/Gloo), else by its header and
# library. Included by CMakeLists.txt and by the installed LoomConfig.cmake (libloom.a
# needs libgloo at link time).
if(NOT TARGET gloo)
  find_package(Gloo CONFIG QUIET)
endif()
if(NOT TARGET gloo)
  find_path(LOOM_GLOO_INCLUDE_DIR gloo/context.h)
  find_library(LOOM_GLOO_LIBRARY gloo)
  if(NOT LOOM_GLOO_INCLUDE_DIR OR NOT LOOM_GLOO_LIBRARY)
    message(FATAL_ERROR "Loom: Gloo not found (apt-get install libgloo-dev, or run scripts/install-deps.sh)")
  endif()
  add_library(gloo UNKNOWN IMPORTED)
  set_target_properties(gloo PROPERTIES IMPORTED_LOCATION "${LOOM_GLOO_LIBRARY}"
                                        INTERFACE_INCLUDE_DIRECTORIES "${LOOM_GLOO_INCLUDE_DIR}")
endif()
