# The CUDA backend's tests (built only with backend_cuda.so). Label "gpu":
# each exits 77 ("no CUDA device: ...") where no GPU is usable, so CI
# without a GPU reports them skipped while still compiling them.
# test_cuda_load needs no GPU: it checks that libganflow carries no CUDA
# and that loading the .so fails cleanly (or works, with a GPU).
if(TARGET backend_cuda)
  gf_add_test(test_cuda_load SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cuda_load.c LIBS ${CMAKE_DL_LIBS}
              LABELS nn gpu TIMEOUT 120)
  foreach(t ops net graph dbwd sg2 ada recipe)
    gf_add_test(test_cuda_${t} SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cuda_${t}.c LIBS CUDA::cudart m
                LABELS gpu TIMEOUT 900)
    target_include_directories(test_cuda_${t} SYSTEM PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
    add_dependencies(test_cuda_${t} backend_cuda)
  endforeach()
  add_dependencies(test_cuda_load backend_cuda)
  # `ganflow run pipelines/dcgan_fashion.lua backend=cuda` end to end
  add_test(NAME test_cuda_e2e COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_cuda_e2e.sh)
  set_tests_properties(test_cuda_e2e PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77 LABELS "gpu"
    ENVIRONMENT "GF_SOURCE_DIR=${CMAKE_SOURCE_DIR};GF_BINARY_DIR=${CMAKE_BINARY_DIR}")
endif()
# The CUDA tests' comparisons checked on the CPU (no GPU, built with or
# without the CUDA backend): the bf16/fp16 bounds against software
# rounding, the gradient-block floor, soft checks, and every network the
# CUDA tests build (test_cuda_cases.h) built and run on the CPU backend,
# plus the CUDA tests' network passes on an emulated bf16/fp16 backend.
gf_add_test(test_cuda_cmp SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cuda_cmp.c LIBS m LABELS nn TIMEOUT 300)
