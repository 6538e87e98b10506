/* core/cli, the `ganflow` command (this file and cmd_*.c; datasets/ adds
 * `ganflow dataset`): the top of the house, it may use every layer of
 * core/ and nothing uses it.
 *
 * The `ganflow` command: dispatches to its subcommands.
 *
 * Each subcommand lives in its own file (cmd_*.c) and has the signature of
 * main(); it returns the process exit status. Only this file and the
 * subcommands may exit(). */
#include <stdio.h>
#include <string.h>

#include "cmd.h"

static const struct gf_cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *usage;
} cmds[] = {
	{ "run", gf_cmd_run, "run PIPELINE.lua [key=value ...]   run a pipeline" },
	{ "stages", gf_cmd_stages, "stages [NAME]                      list stages, ports and parameters" },
	{ "dataset", gf_cmd_dataset, "dataset SUBCOMMAND ...             convert, inspect and verify datasets" },
	{ "sample", gf_cmd_sample, "sample CHECKPOINT [n=64] [out=grid.png] [class=k]  images from a trained generator" },
	{ "eval", gf_cmd_eval, "eval CHECKPOINT|DATASET [n=10000]   FID, IS, KID, precision/recall" },
	{ "export", gf_cmd_export, "export CHECKPOINT OUT.onnx [part=g]  a network as ONNX (PyTorch bridge)" },
	{ "weights", gf_cmd_weights, "weights import FILE.pth OUT.safetensors  FID Inception weights (pytorch-fid's .pth)" },
	{ "plot", gf_cmd_plot, "plot RUN_DIR [out=PATH]            draw a run's curves from its metrics.jsonl" },
	{ "version", gf_cmd_version, "version                            print the version" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: ganflow COMMAND [ARGS]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  ganflow %s\n", cmds[i].usage);
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "ganflow: unknown command '%s'\n\n", argv[1]);
	usage(stderr);
	return 2;
}
