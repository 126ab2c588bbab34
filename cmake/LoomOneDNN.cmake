# Finds oneDNN (Debian's libdnnl-dev), whose sgemm runs Loom's float32 CPU GEMMs (Note
# [GEMM dispatch] in kernels/cpu/gemm.h), as the target `loom_onednn`. Debian's oneDNN
# threads with OpenMP; Loom calls it one thread at a time (omp_set_num_threads on the
# calling thread), hence libgomp. By header and library, not through Debian's dnnl-config,
# which also demands OpenCL's CMake package. Included by CMakeLists.txt and by the
# installed LoomConfig.cmake (libloom.a needs libdnnl at link time).
if(NOT TARGET loom_onednn)
  find_path(LOOM_ONEDNN_INCLUDE_DIR oneapi/dnnl/dnnl.h)
  find_library(LOOM_ONEDNN_LIBRARY dnnl)
  if(NOT LOOM_ONEDNN_INCLUDE_DIR OR NOT LOOM_ONEDNN_LIBRARY)
    message(FATAL_ERROR "Loom: oneDNN not found (apt-get install libdnnl-dev, or run scripts/install-deps.sh)")
  endif()
  add_library(loom_onednn INTERFACE IMPORTED)
  set_target_properties(loom_onednn PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${LOOM_ONEDNN_INCLUDE_DIR}"
                                               INTERFACE_LINK_LIBRARIES "${LOOM_ONEDNN_LIBRARY};gomp")
endif()
