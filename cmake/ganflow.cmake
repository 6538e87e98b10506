# Helpers shared by every part of the build.

# gf_add_stage(NAME SOURCES src... [LIBS lib...] [NOINSTALL] [OUTPUT_DIR dir])
# Builds stages/<NAME>.so: one module, hidden visibility, exporting only the
# `ganflow_stage` descriptor; installed beside the other stages.
# NOINSTALL: a stage for tests only (the runtime's test stages), built into
# the build tree's stages/ but never installed. OUTPUT_DIR: build it
# somewhere else than the stage directory (stages the loader must not find
# by itself, such as the broken ones of the bad-ABI tests); implies NOINSTALL.
function(gf_add_stage name)
  cmake_parse_arguments(S "NOINSTALL" "OUTPUT_DIR" "SOURCES;LIBS" ${ARGN})
  if(NOT S_OUTPUT_DIR)
    set(S_OUTPUT_DIR ${GF_STAGE_BUILD_DIR})
  else()
    set(S_NOINSTALL ON)
  endif()
  add_library(stage_${name} MODULE ${S_SOURCES})
  set_target_properties(stage_${name} PROPERTIES
    PREFIX "" OUTPUT_NAME ${name}
    LIBRARY_OUTPUT_DIRECTORY ${S_OUTPUT_DIR}
    C_VISIBILITY_PRESET hidden)
  target_link_libraries(stage_${name} PRIVATE ganflow ${S_LIBS})
  if(NOT S_NOINSTALL)
    install(TARGETS stage_${name} LIBRARY DESTINATION ${GF_STAGE_INSTALL_RELDIR})
  endif()
endfunction()

# gf_add_test(NAME SOURCES src... [LIBS lib...] [LABELS l...] [TIMEOUT s] [ARGS a...])
# One CMocka executable registered in CTest. Exit code 77 means "skipped"
# (no GPU, no namespaces, ...); the test prints why.
function(gf_add_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS;ARGS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ganflow PkgConfig::CMOCKA ${T_LIBS})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/tests)
  add_test(NAME ${name} COMMAND ${name} ${T_ARGS})
  set_tests_properties(${name} PROPERTIES
    TIMEOUT ${T_TIMEOUT} SKIP_RETURN_CODE 77
    LABELS "${T_LABELS}"
    ENVIRONMENT "GF_SOURCE_DIR=${CMAKE_SOURCE_DIR};GF_BINARY_DIR=${CMAKE_BINARY_DIR}")
endfunction()
