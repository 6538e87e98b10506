# The `ganflow` Lua module of libganflow (gf.stage, gf.connect, gf.run...):
# the binding, what its functions do in C, the run's arguments and the run
# directory gf.run writes into.
target_sources(ganflow PRIVATE ${CMAKE_CURRENT_LIST_DIR}/lua.c ${CMAKE_CURRENT_LIST_DIR}/pipeline.c
  ${CMAKE_CURRENT_LIST_DIR}/args.c ${CMAKE_CURRENT_LIST_DIR}/rundir.c)
