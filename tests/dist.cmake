# Distributed tests (docs/dist.md): MPI world, transport edges, gradient
# exchange (all-reduce, ZeRO-1, gossip), per-class placement, dead ranks,
# mismatched pipelines, batch rules, the netns jitter test, and the NCCL
# plugin. They run `mpirun --oversubscribe` with 2 and 4 ranks on small
# problems; each has a CTest TIMEOUT and timeouts inside. Under ASan
# (GF_SANITIZE=address) Open MPI's own allocations show up as leaks at
# exit, so these tests run with ASAN_OPTIONS=detect_leaks=0 (every other
# ASan check stays on).
find_program(GF_MPIRUN NAMES mpirun mpiexec)
# st_close: checkpoints that must agree within a float tolerance
add_executable(st_close ${CMAKE_CURRENT_LIST_DIR}/dist/st_close.c)
target_link_libraries(st_close PRIVATE ganflow m)
set_target_properties(st_close PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)

set(gf_dist_env "GF_SOURCE_DIR=${CMAKE_SOURCE_DIR};GF_BINARY_DIR=${CMAKE_BINARY_DIR};GF_MPIRUN=${GF_MPIRUN};GF_SANITIZE=${GF_SANITIZE};ASAN_OPTIONS=detect_leaks=0;OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")

# gf_dist_test(NAME SCRIPT ARGS... [TIMEOUT s]): a shell test in tests/dist/.
function(gf_dist_test name script)
  cmake_parse_arguments(T "" "TIMEOUT" "ARGS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_test(NAME ${name}
    COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/dist/${script} $<TARGET_FILE:ganflow_cmd> ${T_ARGS})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} SKIP_RETURN_CODE 77 LABELS "dist"
    ENVIRONMENT "${gf_dist_env}")
endfunction()

gf_dist_test(dist_transport_np2 test_transport.sh ARGS 2 TIMEOUT 60)
gf_dist_test(dist_transport_np4 test_transport.sh ARGS 4 TIMEOUT 90)
gf_dist_test(dist_allreduce_np2 test_equal.sh ARGS 2 allreduce TIMEOUT 120)
gf_dist_test(dist_allreduce_np4 test_equal.sh ARGS 4 allreduce TIMEOUT 180)
gf_dist_test(dist_zero1_np2 test_equal.sh ARGS 2 zero1 TIMEOUT 120)
gf_dist_test(dist_gossip_np2 test_gossip.sh ARGS 2 TIMEOUT 120)
gf_dist_test(dist_gossip_np4 test_gossip.sh ARGS 4 TIMEOUT 180)
gf_dist_test(dist_perclass_np2 test_perclass.sh ARGS 2 TIMEOUT 180)
gf_dist_test(dist_resume_np2 test_resume.sh ARGS 2 TIMEOUT 180)
gf_dist_test(dist_dead_rank test_dead_rank.sh ARGS 3 TIMEOUT 120)
gf_dist_test(dist_interrupt test_interrupt.sh ARGS 2 TIMEOUT 180)
gf_dist_test(dist_interrupt_dcgan test_interrupt_dcgan.sh TIMEOUT 240)
gf_dist_test(dist_mismatch test_mismatch.sh TIMEOUT 90)
gf_dist_test(dist_batch_rule test_batch_rule.sh TIMEOUT 60)
gf_dist_test(dist_jitter_tcp test_jitter.sh TIMEOUT 180)
gf_dist_test(dist_graphs test_graphs.sh TIMEOUT 300)

# The NCCL plugin: compiled wherever the CUDA toolkit with NCCL is (CI);
# the test runs one rank on a GPU and exits 77 without one.
if(GF_HAVE_NCCL)
  gf_add_test(test_dist_nccl SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_dist_nccl.c LIBS ${CMAKE_DL_LIBS} CUDA::cudart m
    LABELS "dist;gpu" TIMEOUT 60)
  target_include_directories(test_dist_nccl PRIVATE ${CMAKE_SOURCE_DIR}/stages/exchange)
  target_include_directories(test_dist_nccl SYSTEM PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
  target_compile_definitions(test_dist_nccl PRIVATE GF_COMM_SO="${CMAKE_BINARY_DIR}/comm_nccl.so")
  add_dependencies(test_dist_nccl comm_nccl)
  if(TARGET backend_cuda)
    add_dependencies(test_dist_nccl backend_cuda)
  endif()
else()
  add_test(NAME test_dist_nccl
    COMMAND sh -c "echo 'test_dist_nccl skipped: comm_nccl.so was not built (no CUDA toolkit with NCCL, or GF_CUDA=OFF)'; exit 77")
  set_tests_properties(test_dist_nccl PROPERTIES SKIP_RETURN_CODE 77 LABELS "dist;gpu")
endif()
