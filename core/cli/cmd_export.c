/* `ganflow export CHECKPOINT OUT.onnx [part=g] [ema=true] [opset=13]
 *  [batch=1]`: a network of a training checkpoint as an ONNX model.
 *
 * The export goes through the PyTorch bridge (python/ganflow: the layer
 * table as a torch.nn.Module, then torch.onnx.export): this command runs
 * `python3 -m ganflow.export ARGS...` with PYTHONPATH pointing at the
 * package and returns its exit status. The interpreter is /usr/bin/python3
 * (Debian's, with python3-torch and python3-onnx), or $GANFLOW_PYTHON. The
 * package is looked for, in order, beside the command in an installed tree
 * (<prefix>/bin/ganflow -> <prefix>/share/ganflow/python), in the source
 * tree of a build-tree command, then under the configured install prefix. */
#include <stdio.h>

#include "cmd.h"

static int usage(void)
{
	fprintf(stderr, "usage: ganflow export CHECKPOINT OUT.onnx [part=g] [ema=true] [opset=13] [batch=1]\n"
	                "  writes a network of a training checkpoint (part: instance name or role) as an ONNX model\n"
	                "  (through the PyTorch bridge: needs python3-torch and python3-onnx)\n");
	return 2;
}

int gf_cmd_export(int argc, char **argv)
{
	if (argc < 3 || argv[1][0] == '-')
		return usage();
	return gf_cmd_python("export", "ganflow.export", "python3-torch python3-onnx", argc - 1, argv + 1);
}
