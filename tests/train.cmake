# Training pipelines end to end (issue: training stages) and the evaluator.
# Tools the scripts use: st_compare (bit-exact checkpoint comparison), the
# ENOSPC fault-injection shim (LD_PRELOAD) and the nan_batch test stage.
add_executable(st_compare ${CMAKE_CURRENT_LIST_DIR}/train/st_compare.c)
target_link_libraries(st_compare PRIVATE ganflow)
set_target_properties(st_compare PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
add_library(gf_enospc SHARED ${CMAKE_CURRENT_LIST_DIR}/train/enospc.c)
target_link_libraries(gf_enospc PRIVATE ${CMAKE_DL_LIBS})
set_target_properties(gf_enospc PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
gf_add_stage(nan_batch NOINSTALL SOURCES ${CMAKE_CURRENT_LIST_DIR}/stages/nan_batch/nan_batch.c)

foreach(c dcgan tensorboard cgan perclass async resume resume_fail shape resume_other ckpt_format rundir nan stall_resume diverge nonfinite enospc sigint plot regularise penalties ada ema pix2pix resnets sample_folder graphs data_classes resume_keep stylegan2 sg2_noise r3gan)
  add_test(NAME train_${c} COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/train/test_train.sh ${c})
  set_tests_properties(train_${c} PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77 LABELS "train"
    ENVIRONMENT "GF_SOURCE_DIR=${CMAKE_SOURCE_DIR};GF_BINARY_DIR=${CMAKE_BINARY_DIR};GF_SANITIZE=${GF_SANITIZE}")
endforeach()

# The evaluator end to end (FID/IS/KID on Fashion-MNIST, bad input).
add_executable(st_splice ${CMAKE_CURRENT_LIST_DIR}/train/st_splice.c)
target_link_libraries(st_splice PRIVATE ganflow)
set_target_properties(st_splice PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
foreach(c setup classifier real_vs_noise training small_n wrong_size not_classifier mismatch nonfinite bad_records small_real messages folders ema classes)
  add_test(NAME eval_${c} COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/train/test_eval.sh ${c})
  set_tests_properties(eval_${c} PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77 LABELS "eval;train"
    ENVIRONMENT "GF_SOURCE_DIR=${CMAKE_SOURCE_DIR};GF_BINARY_DIR=${CMAKE_BINARY_DIR};GF_SANITIZE=${GF_SANITIZE}")
  if(c STREQUAL "setup")
    set_tests_properties(eval_setup PROPERTIES FIXTURES_SETUP evalfix)
  else()
    set_tests_properties(eval_${c} PROPERTIES FIXTURES_REQUIRED evalfix)
  endif()
endforeach()

# The checkpoint module (<ganflow/ckpt.h>) and the JSON form of layer tables.
gf_add_test(test_ckpt SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ckpt.c LABELS train TIMEOUT 60)

# The step driver every step stage runs (captured steps, results read later).
gf_add_test(test_stepdrv SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_stepdrv.c LABELS train TIMEOUT 60)

# Every recipe inside its captured step: each pipeline with its documented
# options eagerly and under the CPU device check (docs/cuda.md "Nothing eager").
foreach(g dcgan sngan models dp)
  add_test(NAME recipes_${g} COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/train/test_recipes.sh ${g})
  set_tests_properties(recipes_${g} PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77 LABELS "train"
    ENVIRONMENT "GF_SOURCE_DIR=${CMAKE_SOURCE_DIR};GF_BINARY_DIR=${CMAKE_BINARY_DIR};GF_SANITIZE=${GF_SANITIZE}")
endforeach()

# Schedules (gf.cosine) against R3GAN's own cosine_decay_with_warmup.
gf_add_test(test_schedule SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_schedule.c LABELS train TIMEOUT 60)

# Real batches staged for a step's device buffers (gf_staging), with and
# without a copy stream (the CPU device check).
gf_add_test(test_staging SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_staging.c LABELS train TIMEOUT 60)
