/* STAND-IN for branch interp's resolver (replaced when interp merges): python3 on PATH, else
 * /usr/bin/python3, asked once per process for its executable, version and directories. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core.h"
#include "util/util.h"

static const char probe[] =
	"import os, sys, sysconfig as s\n"
	"d = [s.get_paths()['stdlib'], s.get_paths()['platstdlib'], "
	"s.get_config_var('DESTSHARED')]\n"
	"if s.get_config_var('Py_ENABLE_SHARED'): d.append(s.get_config_var('LIBDIR'))\n"
	"m = s.get_config_var('MULTIARCH')\n"
	"if m: d.append('/usr/lib/' + m)\n"
	"d = [os.path.realpath(x) for x in d if x and os.path.isdir(x)]\n"
	"d = [x for x in d if not any(x != y and x.startswith(y + '/') for y in d)]\n"
	"print(os.path.realpath(sys.executable)); print(sys.version.split()[0])\n"
	"print(*sorted(set(d)), sep='\\n')\n";

static char *run_probe(const char *python)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return NULL;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		execlp(python, python, "-I", "-S", "-c", probe, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	char *buf = calloc(1, 8192);
	size_t len = 0;
	ssize_t n;
	while (buf && (n = read(p[0], buf + len, 8191 - len)) > 0)
		len += (size_t)n;
	close(p[0]);
	int status = 0;
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static int parse(char *text, struct sc_python *out)
{
	char *save = NULL, *line;
	size_t i = 0;
	out->dirs = calloc(32, sizeof(char *));
	for (line = strtok_r(text, "\n", &save); line && out->dirs;
	     line = strtok_r(NULL, "\n", &save), i++) {
		if (i == 0)
			out->executable = strdup(line);
		else if (i == 1)
			out->version = strdup(line);
		else if (out->n_dirs < 31)
			out->dirs[out->n_dirs++] = strdup(line);
	}
	if (!out->executable || !out->version)
		return -1;
	sscanf(out->version, "%u.%u", &out->major, &out->minor);
	return 0;
}

static int resolve(struct sc_python *out, struct snapcell_error *err)
{
	memset(out, 0, sizeof(*out));
	const char *env = getenv("SNAPCELL_STANDIN_PYTHON");
	const char *choice = env ? env : "python3";
	char *text = run_probe(choice);
	if (!text && !env)
		text = run_probe(choice = "/usr/bin/python3");
	if (!text)
		return sc__err(err, SNAPCELL_E_INVAL, "python %s: cannot ask it", choice);
	int rc = parse(text, out);
	free(text);
	out->chosen_by = strdup(env ? "SNAPCELL_STANDIN_PYTHON" : "python3 on PATH");
	if (rc < 0) {
		sc__python_clear(out);
		return sc__err(err, SNAPCELL_E_INVAL, "python %s: bad answer", choice);
	}
	return 0;
}

static int copy(const struct sc_python *src, struct sc_python *out)
{
	memset(out, 0, sizeof(*out));
	out->executable = strdup(src->executable);
	out->chosen_by = strdup(src->chosen_by);
	out->version = strdup(src->version);
	out->major = src->major, out->minor = src->minor;
	out->dirs = calloc(src->n_dirs + 1, sizeof(char *));
	for (size_t i = 0; out->dirs && i < src->n_dirs; i++)
		out->dirs[out->n_dirs++] = strdup(src->dirs[i]);
	return out->executable && out->chosen_by && out->version && out->dirs ? 0 : -ENOMEM;
}

int sc__python_resolve(const struct snapcell_config *cfg, struct sc_python *out,
		       struct snapcell_error *err)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static struct sc_python cached;
	(void)cfg;
	pthread_mutex_lock(&lock);
	int rc = cached.executable ? 0 : resolve(&cached, err);
	if (rc == 0 && (rc = copy(&cached, out)) < 0)
		sc__err(err, rc, "python");
	pthread_mutex_unlock(&lock);
	return rc;
}

void sc__python_clear(struct sc_python *py)
{
	for (size_t i = 0; py->dirs && i < py->n_dirs; i++)
		free(py->dirs[i]);
	free(py->dirs);
	free(py->executable);
	free(py->chosen_by);
	free(py->version);
	memset(py, 0, sizeof(*py));
}
