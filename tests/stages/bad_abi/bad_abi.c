/* bad_abi: a stage built for an older stage ABI (1: parameters without
 * allowed ranges or choices), for the loader's tests.
 * The loader must refuse it by its `abi` field before reading anything
 * else, naming the file. Built outside the stage directory, never installed. */
#include <ganflow/stage.h>

static int create(gf_ctx *ctx, const gf_value *params, void **self)
{
	(void)ctx;
	(void)params;
	*self = 0;
	return 0;
}

static int run(void *self, gf_ctx *ctx)
{
	(void)self;
	(void)ctx;
	return 0;
}

GF_STAGE_EXPORT const gf_stage_desc ganflow_stage = {
	.abi = 1,
	.size = sizeof(gf_stage_desc),
	.name = "bad_abi",
	.doc = "a stage of an older ABI version",
	.create = create,
	.run = run,
};
