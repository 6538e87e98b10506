# The `ganflow` command: main.c dispatches to the subcommands (cmd_*.c here;
# other parts add their own, e.g. datasets/cmd_dataset.c).
add_executable(ganflow_cmd ${CMAKE_CURRENT_LIST_DIR}/main.c)
set_target_properties(ganflow_cmd PROPERTIES OUTPUT_NAME ganflow
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
target_link_libraries(ganflow_cmd PRIVATE ganflow)
target_sources(ganflow_cmd PRIVATE ${CMAKE_CURRENT_LIST_DIR}/cmd_run.c
  ${CMAKE_CURRENT_LIST_DIR}/cmd_plot.c ${CMAKE_CURRENT_LIST_DIR}/cmd_sample.c
  ${CMAKE_CURRENT_LIST_DIR}/cmd_eval.c ${CMAKE_CURRENT_LIST_DIR}/cmd_export.c
  ${CMAKE_CURRENT_LIST_DIR}/cmd_python.c ${CMAKE_CURRENT_LIST_DIR}/cmd_weights.c)
target_compile_definitions(ganflow_cmd PRIVATE GF_VERSION="${PROJECT_VERSION}")
# `ganflow export` runs the Python package (python/ganflow): the source
# tree's for a build-tree command, share/ganflow/python once installed.
target_compile_definitions(ganflow_cmd PRIVATE GF_PYTHON_BUILD_DIR="${CMAKE_SOURCE_DIR}/python"
  GF_PYTHON_INSTALL_DIR="${CMAKE_INSTALL_FULL_DATADIR}/ganflow/python"
  GF_PYTHON_INSTALL_RELDIR="${CMAKE_INSTALL_DATADIR}/ganflow/python")
