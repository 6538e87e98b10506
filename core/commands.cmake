# Sources of the `ganflow` command's subcommands (each part adds its own).
target_sources(ganflow_cmd PRIVATE ${CMAKE_CURRENT_LIST_DIR}/cmd_run.c
  ${CMAKE_CURRENT_LIST_DIR}/cmd_plot.c ${CMAKE_CURRENT_LIST_DIR}/cmd_sample.c
  ${CMAKE_CURRENT_LIST_DIR}/cmd_eval.c)
target_compile_definitions(ganflow_cmd PRIVATE GF_VERSION="${PROJECT_VERSION}")
