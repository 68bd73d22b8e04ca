/* The floor under snapcell's figures (floor.c): the kernel's own cost of a copy-on-write fork
 * and of a round trip between two processes, and CPython forking itself. */
#ifndef SNAPCELL_BENCH_FLOOR_H
#define SNAPCELL_BENCH_FLOOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* This process holding `bytes` of written private memory, as a template holds its own. */
struct bench_forker {
	void *mem;
	size_t bytes;
};

/* A child process echoing one byte at a time over a socket pair. */
struct bench_echo {
	int fd;
	pid_t pid;
	bool spin; /* both ends poll without sleeping */
};

struct bench_python_fork {
	double p50_us, p99_us;
	double cpu_us; /* the parent's and its children's CPU per fork */
};

/* This process's and its reaped children's CPU time so far. */
double bench_cpu_us(void);

int bench_forker_init(struct bench_forker *f, size_t bytes);
void bench_forker_free(struct bench_forker *f);
/* A series sampler (ctx: a struct bench_forker). */
int bench_fork_exit_one(void *forker, uint64_t *ns);

int bench_echo_start(struct bench_echo *e, bool spin);
/* A series sampler (ctx: a started struct bench_echo). */
int bench_echo_one(void *echo, uint64_t *ns);
void bench_echo_stop(struct bench_echo *e);

/* n forks of `python -I` by itself; -1 (reported on stderr) when it failed. */
int bench_python_fork(const char *python, unsigned n, struct bench_python_fork *out);

#endif
