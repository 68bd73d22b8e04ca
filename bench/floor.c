/* The floor under snapcell's figures: what this machine's kernel alone charges for the steps
 * every fresh run and every tool call must take, with no sandboxing at all, measured in the
 * same `snapcell bench` run so the output can say how far above the floor snapcell is. It is
 * not a benchmark of snapcell. */
#define _GNU_SOURCE
#include "floor.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t clock_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double bench_cpu_us(void)
{
	struct rusage self, children;
	getrusage(RUSAGE_SELF, &self);
	getrusage(RUSAGE_CHILDREN, &children);
	const struct timeval *tv[] = {&self.ru_utime, &self.ru_stime, &children.ru_utime,
				      &children.ru_stime};
	double us = 0;
	for (size_t i = 0; i < sizeof(tv) / sizeof(tv[0]); i++)
		us += (double)tv[i]->tv_sec * 1e6 + (double)tv[i]->tv_usec;
	return us;
}

int bench_forker_init(struct bench_forker *f, size_t bytes)
{
	f->bytes = bytes;
	f->mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (f->mem == MAP_FAILED) {
		f->mem = NULL;
		return -errno;
	}
	/* Written, so each page is private and present: what fork copies the entries of. */
	long page = sysconf(_SC_PAGESIZE);
	for (size_t off = 0; off < bytes; off += (size_t)page)
		((volatile char *)f->mem)[off] = 1;
	return 0;
}

void bench_forker_free(struct bench_forker *f)
{
	if (f->mem)
		munmap(f->mem, f->bytes);
	f->mem = NULL;
}

/* One fork whose child exits at once, waited for: the copy of the page tables, the child's
 * teardown of them, and the wake-up of the parent. */
int bench_fork_exit_one(void *forker, uint64_t *ns)
{
	(void)forker; /* its memory is this process's: fork copies it */
	uint64_t t0 = clock_ns();
	pid_t pid = fork();
	if (pid == 0)
		_exit(0);
	int status = 0;
	while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	*ns = clock_ns() - t0;
	if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "snapcell bench: the floor's fork failed\n");
		return -1;
	}
	return 0;
}

/* Sends the byte back until the parent closes its end; spinning on non-blocking reads, or
 * sleeping in blocking ones. */
static void echo_child(int fd, bool spin)
{
	for (;;) {
		char c;
		ssize_t n = recv(fd, &c, 1, spin ? MSG_DONTWAIT : 0);
		if (n == 0)
			_exit(0);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n < 0 || send(fd, &c, 1, MSG_NOSIGNAL) != 1)
			_exit(1);
	}
}

int bench_echo_start(struct bench_echo *e, bool spin)
{
	int sv[2];
	e->spin = spin;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	e->pid = fork();
	if (e->pid == 0) {
		close(sv[0]);
		echo_child(sv[1], spin);
	}
	close(sv[1]);
	if (e->pid < 0) {
		close(sv[0]);
		return -errno;
	}
	e->fd = sv[0];
	return 0;
}

/* One byte there and back. */
int bench_echo_one(void *echo, uint64_t *ns)
{
	struct bench_echo *e = echo;
	char c = 'x';
	uint64_t t0 = clock_ns();
	if (send(e->fd, &c, 1, MSG_NOSIGNAL) != 1)
		return -1;
	for (;;) {
		ssize_t n = recv(e->fd, &c, 1, e->spin ? MSG_DONTWAIT : 0);
		if (n == 1)
			break;
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			fprintf(stderr, "snapcell bench: the floor's echo process failed\n");
			return -1;
		}
	}
	*ns = clock_ns() - t0;
	return 0;
}

void bench_echo_stop(struct bench_echo *e)
{
	close(e->fd);
	while (waitpid(e->pid, NULL, 0) < 0 && errno == EINTR)
		;
}

/* An interpreter forking itself, the child running `print(1)` (to /dev/null) and exiting:
 * CPython's own fork hooks, first touches and exit, with nothing of snapcell's. Prints the
 * nearest-rank p50 and p99 in ns and the parent's and children's CPU per fork in ns. */
static const char python_fork_code[] =
	"import os, sys, time\n"
	"n = int(sys.argv[1])\n"
	"sys.stdout = open(os.devnull, 'w')\n"
	"code = compile('print(1)', '<run>', 'exec')\n"
	"ns, c0 = [], os.times()\n"
	"for _ in range(n):\n"
	"    t0 = time.perf_counter_ns()\n"
	"    pid = os.fork()\n"
	"    if pid == 0:\n"
	"        exec(code, {})\n"
	"        sys.stdout.flush()\n"
	"        os._exit(0)\n"
	"    os.waitpid(pid, 0)\n"
	"    ns.append(time.perf_counter_ns() - t0)\n"
	"c1 = os.times()\n"
	"cpu = sum(c1[:4]) - sum(c0[:4])\n"
	"ns.sort()\n"
	"pct = lambda p: ns[max(0, (n * p + 99) // 100 - 1)]\n"
	"sys.__stdout__.write(f'{pct(50)} {pct(99)} {int(cpu * 1e9 / n)}\\n')\n";

int bench_python_fork(const char *python, unsigned n, struct bench_python_fork *out)
{
	char count[16];
	snprintf(count, sizeof(count), "%u", n);
	char *const args[] = {(char *)python,		(char *)"-I", (char *)"-c",
			      (char *)python_fork_code, count,	      NULL};
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		if (dup2(p[1], STDOUT_FILENO) >= 0)
			execv(python, args);
		_exit(127);
	}
	close(p[1]);
	char buf[128];
	size_t len = 0;
	for (ssize_t r;
	     pid > 0 && len < sizeof(buf) - 1 &&
	     ((r = read(p[0], buf + len, sizeof(buf) - 1 - len)) > 0 || (r < 0 && errno == EINTR));)
		len += r > 0 ? (size_t)r : 0;
	buf[len] = 0;
	close(p[0]);
	int status = 0;
	while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	unsigned long long p50, p99, cpu;
	if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
	    sscanf(buf, "%llu %llu %llu", &p50, &p99, &cpu) != 3) {
		fprintf(stderr, "snapcell bench: %s forking itself failed\n", python);
		return -1;
	}
	*out = (struct bench_python_fork){p50 / 1e3, p99 / 1e3, cpu / 1e3};
	return 0;
}
