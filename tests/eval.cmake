# Evaluation statistics: FID, IS, KID, precision/recall, the real-data cache
# (core/eval/). References come from tests/fixtures/eval/ (make_refs.py).
gf_add_test(test_evalstats
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_evalstats.c
  LABELS eval
  TIMEOUT 60)
# clean-fid's resize against PIL (tests/ref/make_clean_resize_refs.py).
gf_add_test(test_fid_clean
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_fid_clean.c
  LABELS eval
  TIMEOUT 60)
# The FID Inception (issue 16) against PyTorch: weights import, pool3 and
# logits, input pipeline (needs /usr/bin/python3 with torch, else skips).
gf_add_test(test_inception
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_inception.c
  LABELS eval
  TIMEOUT 300
  ARGS $<TARGET_FILE:ganflow_cmd>)
add_dependencies(test_inception ganflow_cmd)
