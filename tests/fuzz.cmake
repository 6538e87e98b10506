# Fuzz targets over input users hand to ganflow (besides tests/data.cmake's
# fuzz_record): the safetensors reader (checkpoints, references) and the
# Lua pipeline loader (scripts). Like fuzz_record they are built with
# clang -fsanitize=fuzzer,address,undefined when clang's libFuzzer runtime
# exists (gf_fuzz_ok, set in data.cmake) and ctest runs each for
# GF_FUZZ_QUICK_SECONDS over a committed seed corpus (the new inputs go to
# a scratch corpus in the build tree); otherwise they report a skip (77).
set(GF_FUZZ_QUICK_SECONDS 5 CACHE STRING "seconds the fuzz_safetensors and fuzz_lua tests run")
set(gf_fuzz_flags -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
  -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -I${CMAKE_SOURCE_DIR}/core/include)

# fuzz_lua links the built libganflow: in a sanitizer build that library
# carries gcc's sanitizer runtime, which clang's libFuzzer cannot share a
# process with, so there it is the normal build's test only
set(gf_fuzz_lua_ok ${gf_fuzz_ok})
if(GF_SANITIZE)
  set(gf_fuzz_lua_ok FALSE)
endif()

# gf_fuzz_run(NAME OK SEEDS OPTIONS...): the ctest entry of fuzz target
# NAME (OK: it was built), SEEDS a ;-list of seed directories (read only)
function(gf_fuzz_run name ok seeds)
  set(bin ${CMAKE_CURRENT_BINARY_DIR}/${name})
  if(ok)
    add_test(NAME ${name}
      COMMAND sh -c "rm -rf ${name}-corpus && mkdir -p ${name}-corpus && exec \"$@\"" sh
        ${bin} -max_total_time=${GF_FUZZ_QUICK_SECONDS} -rss_limit_mb=2048 -timeout=10 -print_final_stats=1
        ${ARGN} ${name}-corpus ${seeds}
      WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  else()
    set(why "clang with the libFuzzer runtime (clang-14, libclang-rt-14-dev) not found")
    if(gf_fuzz_ok)
      set(why "in a sanitizer build libganflow carries gcc's sanitizer runtime, which clang's libFuzzer cannot share; the normal build runs it")
    endif()
    add_test(NAME ${name} COMMAND sh -c "echo '${name} skipped: ${why}'; exit 77")
  endif()
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 LABELS "fuzz" TIMEOUT 60
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=1;GANFLOW_LOG=error")
endfunction()

if(gf_fuzz_ok)
  # the safetensors reader, straight from its sources
  set(st_src ${CMAKE_CURRENT_LIST_DIR}/fuzz/fuzz_safetensors.c ${CMAKE_SOURCE_DIR}/core/nn/safetensors.c
    ${CMAKE_SOURCE_DIR}/core/base/tensor.c ${CMAKE_SOURCE_DIR}/core/base/err.c)
  add_custom_command(OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/fuzz_safetensors
    COMMAND ${GF_CLANG} ${gf_fuzz_flags} ${st_src} -lm -o ${CMAKE_CURRENT_BINARY_DIR}/fuzz_safetensors
    DEPENDS ${st_src} ${CMAKE_SOURCE_DIR}/core/include/ganflow/safetensors.h
    COMMENT "Building the fuzz target fuzz_safetensors (clang, libFuzzer)"
    VERBATIM)
  add_custom_target(fuzz_safetensors_target ALL DEPENDS ${CMAKE_CURRENT_BINARY_DIR}/fuzz_safetensors)
endif()
if(gf_fuzz_lua_ok)
  # the Lua loader: lua.c (with GF_LUA_FUZZ: gf.run validates and returns)
  # and the checks behind it are instrumented; the rest of libganflow and
  # the stages are the built ones (the target's definitions take precedence
  # over the library's, which exports them)
  set(lua_src ${CMAKE_CURRENT_LIST_DIR}/fuzz/fuzz_lua.c ${CMAKE_SOURCE_DIR}/core/lua/lua.c
    ${CMAKE_SOURCE_DIR}/core/lua/args.c ${CMAKE_SOURCE_DIR}/core/lua/pipeline.c
    ${CMAKE_SOURCE_DIR}/core/base/lua_value.c ${CMAKE_SOURCE_DIR}/core/dist/placement.c ${CMAKE_SOURCE_DIR}/core/runtime/params.c)
  add_custom_command(OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/fuzz_lua
    COMMAND ${GF_CLANG} ${gf_fuzz_flags} -DGF_LUA_FUZZ -I${CMAKE_SOURCE_DIR}/core ${LUA_CFLAGS}
      "-D$<JOIN:$<TARGET_PROPERTY:ganflow,COMPILE_DEFINITIONS>,;-D>"
      ${lua_src} -o ${CMAKE_CURRENT_BINARY_DIR}/fuzz_lua
      -L$<TARGET_FILE_DIR:ganflow> -Wl,-rpath,$<TARGET_FILE_DIR:ganflow> -lganflow ${LUA_LDFLAGS} -lm
    DEPENDS ${lua_src} ganflow
    COMMENT "Building the fuzz target fuzz_lua (clang, libFuzzer)"
    COMMAND_EXPAND_LISTS
    VERBATIM)
  add_custom_target(fuzz_lua_target ALL DEPENDS ${CMAKE_CURRENT_BINARY_DIR}/fuzz_lua)
endif()
gf_fuzz_run(fuzz_safetensors "${gf_fuzz_ok}" ${CMAKE_CURRENT_LIST_DIR}/fuzz/corpus_safetensors)
# seeds: small scripts with the loader's corner cases, and the shipped pipelines
gf_fuzz_run(fuzz_lua "${gf_fuzz_lua_ok}" "${CMAKE_CURRENT_LIST_DIR}/fuzz/corpus_lua;${CMAKE_SOURCE_DIR}/pipelines;${CMAKE_CURRENT_LIST_DIR}/dist"
  -dict=${CMAKE_CURRENT_LIST_DIR}/fuzz/lua.dict -max_len=8192)
