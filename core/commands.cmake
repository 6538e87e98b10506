# Sources of the `ganflow` command's subcommands (each part adds its own).
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
