# Training helpers of libganflow (weights and state messages, resume).
target_sources(ganflow PRIVATE ${CMAKE_CURRENT_LIST_DIR}/train.c)
