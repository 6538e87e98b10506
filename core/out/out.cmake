# Outputs of libganflow: PNG files, sample grids, plots, TensorBoard event files.
target_sources(ganflow PRIVATE ${CMAKE_CURRENT_LIST_DIR}/png.c ${CMAKE_CURRENT_LIST_DIR}/plot.c
  ${CMAKE_CURRENT_LIST_DIR}/tfevents.c)
target_link_libraries(ganflow PRIVATE PkgConfig::PNG)
