# Training helpers of libganflow (weights and state messages, resume, the
# step side of the gradient exchange).
target_sources(ganflow PRIVATE ${CMAKE_CURRENT_LIST_DIR}/train.c ${CMAKE_CURRENT_LIST_DIR}/exchange_client.c ${CMAKE_CURRENT_LIST_DIR}/trainer.c
  ${CMAKE_CURRENT_LIST_DIR}/labels.c ${CMAKE_CURRENT_LIST_DIR}/fake_cache.c
  ${CMAKE_CURRENT_LIST_DIR}/ckpt.c ${CMAKE_CURRENT_LIST_DIR}/lecam.c
  ${CMAKE_CURRENT_LIST_DIR}/penalty.c ${CMAKE_CURRENT_LIST_DIR}/ada.c
  ${CMAKE_CURRENT_LIST_DIR}/step_graph.c ${CMAKE_CURRENT_LIST_DIR}/readback.c ${CMAKE_CURRENT_LIST_DIR}/step_driver.c ${CMAKE_CURRENT_LIST_DIR}/schedule.c ${CMAKE_CURRENT_LIST_DIR}/devmsg.c
  ${CMAKE_CURRENT_LIST_DIR}/staging.c)
