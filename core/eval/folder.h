/* A folder of PNG / JPEG images read as a dataset's records (folder.c), so
 * the evaluator reads `ganflow eval DIR DIR` through its dataset path. */
#ifndef GANFLOW_EVAL_FOLDER_H
#define GANFLOW_EVAL_FOLDER_H

#include <stdint.h>

#include <ganflow/dataset.h>
#include <ganflow/decode.h>

typedef struct gf_folder gf_folder;

/* 1 when path is a directory that is not a ganflow dataset (no data.mdb,
 * no shard-00000). */
int gf_folder_is(const char *path);

/* Lists the *.png, *.jpg and *.jpeg files of path and its subfolders (8
 * levels deep: ImageFolder's DIR/<class>/ files), sorted by name. Returns 0, -errno, or GF_ENOTFOUND for a folder without images
 * (the message names it). */
int gf_folder_open(gf_folder **out, const char *path);
void gf_folder_close(gf_folder *f);
uint64_t gf_folder_count(const gf_folder *f);

/* Image i as a record (label -1, key i), by what the file holds
 * (gf_image_sniff, not its name): a PNG becomes a raw record of its
 * pixels (alpha dropped, as PIL's convert("RGB") does), a JPEG a JPEG
 * record; r->payload is owned by f and valid until the next call. Returns
 * 0, -errno or GF_ECORRUPT naming the file. */
int gf_folder_get(gf_folder *f, gf_decoder *d, uint64_t i, gf_record *r);

#endif
