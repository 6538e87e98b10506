/* Running a module of the ganflow Python package (python/ganflow) for a
 * subcommand: `ganflow export` (the PyTorch bridge) and `ganflow weights
 * import` (unpickling a .pth). The interpreter is /usr/bin/python3
 * (Debian's, with python3-torch), or $GANFLOW_PYTHON. The package is looked
 * for, in order, beside the command in an installed tree
 * (<prefix>/bin/ganflow -> <prefix>/share/ganflow/python), in the source
 * tree of a build-tree command, then under the configured install prefix. */
#include <errno.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmd.h"

extern char **environ;

/* dir holds the package when dir/ganflow/export.py exists. */
static int has_package(const char *dir)
{
	char p[PATH_MAX];
	struct stat st;
	int n = snprintf(p, sizeof(p), "%s/ganflow/export.py", dir);
	return n > 0 && (size_t)n < sizeof(p) && stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The directory holding the ganflow Python package into out; 0 or -1. */
static int find_package(char *out, size_t size)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		char *slash = strrchr(exe, '/');
		if (slash) {
			*slash = '\0';   /* <prefix>/bin */
			int m = snprintf(out, size, "%s/../%s", exe, GF_PYTHON_INSTALL_RELDIR);
			if (m > 0 && (size_t)m < size && has_package(out))
				return 0;
		}
	}
	const char *fixed[] = { GF_PYTHON_BUILD_DIR, GF_PYTHON_INSTALL_DIR };
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		if (has_package(fixed[i]) && strlen(fixed[i]) < size) {
			snprintf(out, size, "%s", fixed[i]);
			return 0;
		}
	}
	return -1;
}

int gf_cmd_python(const char *cmd, const char *module, const char *needs, int nargs, char *const *argv)
{
	const char *py = getenv("GANFLOW_PYTHON");
	if (!py || !*py)
		py = "/usr/bin/python3";
	if (access(py, X_OK)) {
		fprintf(stderr, "ganflow %s: no Python interpreter at %s (%s): install it and %s (apt-get install "
		                "python3 %s), or set GANFLOW_PYTHON\n", cmd, py, strerror(errno), needs, needs);
		return 1;
	}
	char pkg[PATH_MAX];
	if (find_package(pkg, sizeof(pkg))) {
		fprintf(stderr, "ganflow %s: the ganflow Python package is missing: looked beside the command "
		                "(../%s), in %s and in %s\n", cmd, GF_PYTHON_INSTALL_RELDIR, GF_PYTHON_BUILD_DIR,
		        GF_PYTHON_INSTALL_DIR);
		return 1;
	}
	const char *old = getenv("PYTHONPATH");
	size_t len = strlen(pkg) + (old ? strlen(old) + 1 : 0) + 1;
	char *pp = malloc(len);
	char **args = calloc((size_t)nargs + 4, sizeof(char *));
	if (!pp || !args) {
		fprintf(stderr, "ganflow %s: out of memory\n", cmd);
		free(pp);
		free(args);
		return 1;
	}
	snprintf(pp, len, "%s%s%s", pkg, old && *old ? ":" : "", old && *old ? old : "");
	setenv("PYTHONPATH", pp, 1);
	args[0] = (char *)py;
	args[1] = "-m";
	args[2] = (char *)module;
	for (int i = 0; i < nargs; i++)
		args[i + 3] = argv[i];
	pid_t pid;
	int status = 1, rc = posix_spawn(&pid, py, NULL, NULL, args, environ);
	if (rc) {
		fprintf(stderr, "ganflow %s: cannot run %s: %s\n", cmd, py, strerror(rc));
	} else {
		int ws;
		while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
			;
		if (WIFEXITED(ws))
			status = WEXITSTATUS(ws);
		else
			fprintf(stderr, "ganflow %s: %s -m %s died (signal %d)\n", cmd, py, module,
			        WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
	}
	free(pp);
	free(args);
	return status;
}
