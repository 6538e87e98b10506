# Evaluation statistics (FID, IS, KID, precision/recall) of libganflow.
target_sources(ganflow PRIVATE)
