# Evaluation statistics (FID, IS, KID, precision/recall) of libganflow.
# BLAS and LAPACK come from OpenBLAS: Debian's libopenblas exports the
# LAPACK symbols (dsyevd_) itself. Where an OpenBLAS build lacks them, the
# `lapack` pkg-config module (liblapack-dev) supplies them.
target_sources(ganflow PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/stats.c
  ${CMAKE_CURRENT_LIST_DIR}/fid.c
  ${CMAKE_CURRENT_LIST_DIR}/is.c
  ${CMAKE_CURRENT_LIST_DIR}/kid.c
  ${CMAKE_CURRENT_LIST_DIR}/prd.c
  ${CMAKE_CURRENT_LIST_DIR}/scores.c
  ${CMAKE_CURRENT_LIST_DIR}/generate.c
  ${CMAKE_CURRENT_LIST_DIR}/features.c
  ${CMAKE_CURRENT_LIST_DIR}/fid_input.c
  ${CMAKE_CURRENT_LIST_DIR}/folder.c)

include(CheckFunctionExists)
set(CMAKE_REQUIRED_LIBRARIES ${OPENBLAS_LINK_LIBRARIES})
check_function_exists(dsyevd_ GF_OPENBLAS_HAS_LAPACK)
unset(CMAKE_REQUIRED_LIBRARIES)
if(NOT GF_OPENBLAS_HAS_LAPACK)
  pkg_check_modules(GF_LAPACK REQUIRED IMPORTED_TARGET lapack)
  target_link_libraries(ganflow PRIVATE PkgConfig::GF_LAPACK)
endif()
