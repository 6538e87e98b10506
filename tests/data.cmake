# Data path: shard format, converters, reader, decoder, batching, label
# sharding (core/data/, datasets/, stages/{lmdb_reader,jpeg_decode,batch,label_shard}),
# and the record/decode fuzz target (tests/fuzz/). Each test builds its
# small datasets in a temporary directory; test_convert uses the Debian
# Fashion-MNIST files when present and skips those parts otherwise.
gf_add_test(test_shard
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_shard.c
  LIBS PkgConfig::LMDB
  LABELS data
  TIMEOUT 120)
gf_add_test(test_convert
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_convert.c
  LIBS ganflow_convert ZLIB::ZLIB PkgConfig::LMDB
  LABELS data
  TIMEOUT 300)
gf_add_test(test_paired
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_paired.c
  LIBS ganflow_convert
  LABELS data
  TIMEOUT 60)
gf_add_test(test_decode
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_decode.c
  LABELS data
  TIMEOUT 120)
gf_add_test(test_reader
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_reader.c
  LABELS data
  TIMEOUT 120)
gf_add_test(test_batch
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_batch.c
  LABELS data
  TIMEOUT 120)
gf_add_test(test_label_shard
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_label_shard.c
  LABELS data
  TIMEOUT 120)
# Caffe LMDBs: tests/make_caffe_lmdb.py writes one (python3-lmdb,
# python3-protobuf; skips without them); read, verified and trained on.
gf_add_test(test_caffe
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_caffe.c
  LABELS data
  TIMEOUT 300)
# dataset_tool.py zips and folders (StyleGAN2-ADA, R3GAN):
# tests/make_dstool_zip.py writes them (python3-pil, numpy; skips without).
gf_add_test(test_dstool
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_dstool.c
  LIBS ganflow_convert
  LABELS data
  TIMEOUT 60)
# The tests load the stages and run the command: build them first.
foreach(t test_convert test_dstool test_decode test_reader test_batch test_label_shard test_caffe)
  add_dependencies(${t} ganflow_cmd stage_lmdb_reader stage_jpeg_decode stage_batch stage_label_shard)
endforeach()

# ---- fuzz target ----
# libFuzzer needs clang; the target is compiled straight from the library
# sources with -fsanitize=fuzzer,address,undefined (whatever the build's own
# compiler and sanitizer), and ctest runs it for a few seconds over the seed
# corpus. Without clang or its fuzzer runtime the test reports a skip (77).
set(GF_FUZZ_SECONDS 15 CACHE STRING "seconds the fuzz_record test runs")
find_program(GF_CLANG NAMES clang-14 clang)
set(gf_fuzz_ok FALSE)
if(GF_CLANG)
  set(probe ${CMAKE_CURRENT_BINARY_DIR}/fuzz_probe)
  file(WRITE ${probe}.c "#include <stddef.h>\n#include <stdint.h>\n"
    "int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n")
  execute_process(COMMAND ${GF_CLANG} -fsanitize=fuzzer,address ${probe}.c -o ${probe}
    RESULT_VARIABLE probe_rc OUTPUT_QUIET ERROR_QUIET)
  if(probe_rc EQUAL 0)
    set(gf_fuzz_ok TRUE)
  endif()
endif()
set(fuzz_bin ${CMAKE_CURRENT_BINARY_DIR}/fuzz_record)
if(gf_fuzz_ok)
  set(fuzz_src
    ${CMAKE_CURRENT_LIST_DIR}/fuzz/fuzz_record.c
    ${CMAKE_SOURCE_DIR}/core/data/record.c
    ${CMAKE_SOURCE_DIR}/core/data/decode.c
    ${CMAKE_SOURCE_DIR}/core/data/caffe.c
    ${CMAKE_SOURCE_DIR}/core/base/log.c
    ${CMAKE_SOURCE_DIR}/core/base/crc32c.c
    ${CMAKE_SOURCE_DIR}/core/base/err.c)
  add_custom_command(OUTPUT ${fuzz_bin}
    COMMAND ${GF_CLANG} -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
      -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -I${CMAKE_SOURCE_DIR}/core/include
      ${fuzz_src} ${TURBOJPEG_LINK_LIBRARIES} ${LMDB_LINK_LIBRARIES} ${ZLIB_LIBRARIES} -lm -lpthread -o ${fuzz_bin}
    DEPENDS ${fuzz_src} ${CMAKE_SOURCE_DIR}/core/data/dataset_int.h
      ${CMAKE_SOURCE_DIR}/core/include/ganflow/dataset.h ${CMAKE_SOURCE_DIR}/core/include/ganflow/decode.h
    COMMENT "Building the fuzz target fuzz_record (clang, libFuzzer)"
    VERBATIM)
  add_custom_target(fuzz_record_target ALL DEPENDS ${fuzz_bin})
  add_test(NAME fuzz_record
    COMMAND sh -c "mkdir -p fuzz-corpus && exec \"$0\" -max_total_time=${GF_FUZZ_SECONDS} -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 fuzz-corpus \"$1\""
      ${fuzz_bin} ${CMAKE_CURRENT_LIST_DIR}/fuzz/corpus
    WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
else()
  add_test(NAME fuzz_record
    COMMAND sh -c "echo 'fuzz_record skipped: clang with the libFuzzer runtime (clang-14, libclang-rt-14-dev) not found'; exit 77")
endif()
set_tests_properties(fuzz_record PROPERTIES SKIP_RETURN_CODE 77 LABELS "data;fuzz"
  TIMEOUT 120)

# test_batch also runs a Lua pipeline ending in the runtime's `collect` test
# stage (tests/runtime.cmake, included after this file): depend on it once
# every fragment is read.
function(gf_data_test_deps)
  if(TARGET stage_collect)
    add_dependencies(test_batch stage_collect)
  endif()
endfunction()
cmake_language(DEFER CALL gf_data_test_deps)
# CRC-32C (core/base/crc32c.c): every implementation the CPU allows, forced in
# turn, against a bitwise one; the second and third runs check the choice
# made at start from the environment (GF_CRC32C_NO_FOLD, GF_CRC32C).
gf_add_test(test_crc32c
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_crc32c.c
  LABELS data
  TIMEOUT 60)
add_test(NAME test_crc32c_nofold COMMAND test_crc32c)
set_tests_properties(test_crc32c_nofold PROPERTIES TIMEOUT 60 LABELS data
  ENVIRONMENT "GF_CRC32C_NO_FOLD=1")
add_test(NAME test_crc32c_pclmul COMMAND test_crc32c)
set_tests_properties(test_crc32c_pclmul PROPERTIES TIMEOUT 60 LABELS data
  ENVIRONMENT "GF_CRC32C=pclmulqdq")
