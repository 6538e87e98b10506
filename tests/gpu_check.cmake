# scripts/gpu-check (the one-command GPU check, docs/cuda.md) without a GPU:
# builds a bundle from a plain copy of the checkout with nothing beside it
# (its own Release + CUDA build: PROCESSORS 2 keeps ctest -j2 from running
# another test beside it), checks its size, contents and libraries, that
# `run` skips (77) here, the dry run of the whole plan on the CPU (the
# StyleGAN2 and BigGAN-128 rows too), and `report` on GPU-format logs.
# Needs the CUDA toolkit, as the backend does.
if(TARGET backend_cuda)
  add_test(NAME test_gpu_check COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_gpu_check.sh)
  set_tests_properties(test_gpu_check PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77 LABELS "tools" PROCESSORS 2
    ENVIRONMENT "GF_SOURCE_DIR=${CMAKE_SOURCE_DIR};GF_BINARY_DIR=${CMAKE_BINARY_DIR}")
endif()
