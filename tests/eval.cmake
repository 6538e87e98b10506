# Evaluation statistics: FID, IS, KID, precision/recall, the real-data cache
# (core/eval/). References come from tests/fixtures/eval/ (make_refs.py).
gf_add_test(test_evalstats
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_evalstats.c
  LABELS eval
  TIMEOUT 60)
