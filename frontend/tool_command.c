/* Host tools implemented by a command (`snapcell run --tool NAME=COMMAND`): the command runs
 * under /bin/sh with the tool's arguments (a JSON object) on stdin and prints its JSON result
 * on stdout; a non-zero exit is a tool error whose message is the command's stderr. The
 * command is the user's own and runs on the host, unsandboxed, with an explicit environment
 * (child_env.c), not ours. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "frontend.h"

#define OUTPUT_CAP (16u << 20)

struct capture {
	struct sc_buf out; /* the head the cap keeps; the rest is read and dropped */
	bool open;
};

static void drain(int fd, struct capture *c)
{
	char chunk[65536];
	ssize_t n = read(fd, chunk, sizeof(chunk));
	if (n <= 0) {
		if (n == 0 || errno != EINTR)
			c->open = false;
		return;
	}
	sc__buf_add_some(&c->out, chunk, (size_t)n, NULL); /* a cut or no memory: a shorter text */
}

/* Milliseconds until deadline_us (0: none) for poll, at least 1 while it is ahead. */
static int poll_timeout(uint64_t deadline_us)
{
	if (!deadline_us)
		return -1;
	uint64_t now = fe_now_us();
	if (now >= deadline_us)
		return 0;
	uint64_t ms = (deadline_us - now + 999) / 1000;
	return ms > 60000 ? 60000 : (int)ms;
}

/* Why a command was cut short. */
enum cut { NOT_CUT, CUT_DEADLINE, CUT_CANCEL };

/* Feeds stdin and collects stdout and stderr together, so no pipe can fill up and stall,
 * until the command closes them, the run's deadline passes or its cancel_fd (-1: none)
 * fires. */
static enum cut exchange(int in, int out, int err, const char *input, uint64_t deadline_us,
			 int cancel_fd, struct capture *o, struct capture *e)
{
	size_t off = 0, len = strlen(input);
	fcntl(in, F_SETFL, O_NONBLOCK);
	while (o->open || e->open) {
		enum cut cut = deadline_us && fe_now_us() >= deadline_us ? CUT_DEADLINE : NOT_CUT;
		struct pollfd pf[4] = {{o->open ? out : -1, POLLIN, 0},
				       {e->open ? err : -1, POLLIN, 0},
				       {cancel_fd, POLLIN, 0},
				       {in, POLLOUT, 0}};
		if (!cut && poll(pf, in >= 0 ? 4 : 3, poll_timeout(deadline_us)) < 0 &&
		    errno != EINTR)
			break;
		if (!cut && pf[2].revents)
			cut = CUT_CANCEL;
		if (cut) {
			if (in >= 0)
				close(in);
			return cut;
		}
		if (pf[0].revents)
			drain(out, o);
		if (pf[1].revents)
			drain(err, e);
		if (in >= 0 && pf[3].revents) {
			ssize_t n = write(in, input + off, len - off);
			if (n > 0)
				off += (size_t)n;
			if (n < 0 && errno != EAGAIN && errno != EINTR)
				off = len;
			if (off == len) {
				close(in);
				in = -1;
			}
		}
	}
	if (in >= 0)
		close(in);
	return NOT_CUT;
}

static char *trimmed(const struct capture *c)
{
	const char *text = c->out.data;
	size_t n = c->out.len;
	while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' ' || text[n - 1] == '\r'))
		n--;
	return n ? strndup(text, n) : NULL;
}

/* An awaited call of a command tool, run on a thread of its own (command_start) so that the
 * calls code gathers run at once; cancelling it kills the command's process group. pid is the
 * group's leader while it may be signalled (set after the spawn, cleared before the reap, so a
 * cancel never reaches a recycled id). */
struct command_job {
	struct snapcell_call *call;
	char *shell[4]; /* /bin/sh -c COMMAND for --tool; NULL for an argv tool */
	char *const *argv, *const *inherit;
	char *args;
	uint64_t deadline_us;
	pthread_mutex_t lock;
	pid_t pid;
	bool cancelled;
};

/* Under job->lock: the command's group may be signalled (pid), or may no longer be (0). */
static bool job_set_pid(struct command_job *job, pid_t pid)
{
	if (!job)
		return true;
	pthread_mutex_lock(&job->lock);
	job->pid = pid;
	bool go_on = !job->cancelled;
	pthread_mutex_unlock(&job->lock);
	return go_on;
}

/* The command runs in a process group of its own, so at the run's deadline, or when the run
 * is cancelled (cancel_fd: snapcell_tool_cancel_fd, -1 for none), it is killed with whatever
 * it started: a run ends then, however the command behaves. */
static int spawn_tool(char *const argv[], char *const inherit[], const char *args_json,
		      uint64_t deadline_us, int cancel_fd, struct command_job *job, char **result)
{
	int in[2], out[2], err[2];
	char **envp = fe_child_env(inherit, NULL);
	if (!envp) {
		*result = strdup("out of memory for the tool command's environment");
		return 1;
	}
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
		fe_child_env_free(envp);
		*result = strdup("cannot create pipes for the tool command");
		return 1;
	}
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	posix_spawn_file_actions_adddup2(&fa, err[1], 2);
	posix_spawnattr_t attr;
	posix_spawnattr_init(&attr);
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
	pid_t pid;
	int rc = posix_spawnp(&pid, argv[0], &fa, &attr, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	fe_child_env_free(envp);
	close(in[0]), close(out[1]), close(err[1]);
	struct capture o = {SC_BUF_INIT(OUTPUT_CAP), true}, e = {SC_BUF_INIT(OUTPUT_CAP), true};
	enum cut cut = NOT_CUT;
	if (rc == 0 && !job_set_pid(job, pid))
		kill(-pid, SIGKILL); /* cancelled before it started */
	if (rc == 0)
		cut = exchange(in[1], out[0], err[0], args_json, deadline_us, cancel_fd, &o, &e);
	else
		close(in[1]);
	if (rc == 0)
		job_set_pid(job, 0);
	if (cut)
		kill(-pid, SIGKILL);
	close(out[0]), close(err[0]);
	int status = 0;
	while (rc == 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (cut) {
		*result = strdup(cut == CUT_CANCEL ? "tool command killed: the run was cancelled"
						   : "tool command killed at the run's deadline");
		sc__buf_free(&o.out);
		sc__buf_free(&e.out);
		return 1;
	}
	if (rc == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		*result = o.out.data ? sc__buf_take(&o.out, NULL) : strdup("null");
		sc__buf_free(&e.out);
		return 0;
	}
	char *why = trimmed(&e);
	if (!why &&
	    asprintf(&why, "tool command %s %d", rc ? "could not start:" : "failed with status",
		     rc			 ? rc
		     : WIFEXITED(status) ? WEXITSTATUS(status)
					 : 128 + WTERMSIG(status)) < 0)
		why = NULL;
	*result = why;
	sc__buf_free(&o.out);
	sc__buf_free(&e.out);
	return 1;
}

/* The --tool-env names given so far (pointers into argv), NULL-terminated. */
static char **tool_env;
static size_t n_tool_env;

static int command_tool(void *user, const char *args_json, char **result)
{
	char *argv[] = {"/bin/sh", "-c", user, NULL};
	return spawn_tool(argv, tool_env, args_json, snapcell_tool_deadline_us(),
			  snapcell_tool_cancel_fd(), NULL, result);
}

int fe_argv_tool(void *tool, const char *args_json, char **result)
{
	const struct fe_tool_command *t = tool;
	return spawn_tool(t->argv, t->inherit, args_json, snapcell_tool_deadline_us(),
			  snapcell_tool_cancel_fd(), NULL, result);
}

/* The job's thread: runs the command and answers; the answer is its last use of the call. */
static void *command_job_run(void *arg)
{
	struct command_job *job = arg;
	char *result = NULL;
	int rc = spawn_tool(job->shell[0] ? job->shell : job->argv, job->inherit, job->args,
			    job->deadline_us, -1, job, &result);
	snapcell_call_answer(job->call, rc == 0, result);
	free(result);
	free(job->args);
	pthread_mutex_destroy(&job->lock);
	free(job);
	return NULL;
}

static void command_start(struct command_job *job, struct snapcell_call *call,
			  const char *args_json)
{
	const char *why = "out of memory for the tool command";
	if (job) {
		job->call = call;
		job->args = strdup(args_json);
		job->deadline_us = snapcell_call_deadline_us(call);
		pthread_mutex_init(&job->lock, NULL);
		snapcell_call_set_data(call, job);
	}
	pthread_attr_t attr;
	pthread_t thread;
	if (job && job->args && pthread_attr_init(&attr) == 0) {
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		int rc = pthread_create(&thread, &attr, command_job_run, job);
		pthread_attr_destroy(&attr);
		if (rc == 0)
			return;
		why = "cannot start a thread for the tool command";
	}
	if (job) {
		snapcell_call_set_data(call, NULL);
		free(job->args);
		pthread_mutex_destroy(&job->lock);
		free(job);
	}
	snapcell_call_answer(call, false, why);
}

/* snapcell_tool_start_fn of --tool commands (user: the command string). */
static void command_tool_start(void *user, struct snapcell_call *call, const char *args_json)
{
	struct command_job *job = calloc(1, sizeof(*job));
	if (job) {
		job->shell[0] = "/bin/sh";
		job->shell[1] = "-c";
		job->shell[2] = user;
		job->inherit = tool_env;
	}
	command_start(job, call, args_json);
}

void fe_argv_tool_start(void *tool, struct snapcell_call *call, const char *args_json)
{
	const struct fe_tool_command *t = tool;
	struct command_job *job = calloc(1, sizeof(*job));
	if (job) {
		job->argv = t->argv;
		job->inherit = t->inherit;
	}
	command_start(job, call, args_json);
}

void fe_command_tool_cancel(void *tool, struct snapcell_call *call)
{
	struct command_job *job = snapcell_call_data(call);
	if (!job)
		return;
	pthread_mutex_lock(&job->lock);
	job->cancelled = true;
	if (job->pid > 0)
		kill(-job->pid, SIGKILL);
	pthread_mutex_unlock(&job->lock);
}

int fe_add_tool_env(const char *name)
{
	const char *why = fe_env_withheld(name);
	if (!*name || strchr(name, '=') || why) {
		fprintf(stderr, "snapcell: --tool-env %s: %s\n", name,
			why ? why : "wants a variable's name");
		return -1;
	}
	/* Room for the name and the NULL after it (SC_ARRAY_ADD zeroes the new slot). */
	if (SC_ARRAY_ADD(tool_env, n_tool_env + 1, SC_ARRAY_NO_CAP) < 0) {
		fprintf(stderr, "snapcell: --tool-env: out of memory\n");
		return -1;
	}
	tool_env[n_tool_env++] = (char *)name;
	return 0;
}

/* Registers (or re-registers, with a schema) the tool that spec "NAME=COMMAND" describes.
 * The command string lives as long as the process: argv outlives every sandbox. The
 * description never carries the command: it reaches the cell and the model, and a command
 * line may hold a secret (a token, a password, a private path). */
static int register_tool(struct snapcell_config *cfg, const char *spec, const char *schema,
			 struct snapcell_error *err)
{
	const char *eq = strchr(spec, '=');
	char *name = strndup(spec, (size_t)(eq - spec));
	char *description = strdup("A command on the host.");
	int rc = -ENOMEM;
	if (name && description)
		rc = snapcell_config_add_tool(cfg, name, description, schema,
					      SNAPCELL_APPROVAL_NEVER, command_tool,
					      (void *)(eq + 1), err);
	else
		snprintf(err->message, sizeof(err->message), "out of memory");
	if (rc == 0)
		rc = snapcell_config_set_tool_async(cfg, name, command_tool_start,
						    fe_command_tool_cancel, err);
	free(name);
	free(description);
	return rc;
}

/* The --tool specs given so far (pointers into argv), so --tool-schema can find a tool's
 * command. */
static const char **tool_specs;
static size_t n_tool_specs;

void fe_command_tools_forget(void)
{
	free(tool_specs);
	tool_specs = NULL;
	n_tool_specs = 0;
	free(tool_env);
	tool_env = NULL;
	n_tool_env = 0;
}

int fe_add_command_tool(struct snapcell_config *cfg, const char *spec)
{
	const char *eq = strchr(spec, '=');
	if (!eq || eq == spec || !eq[1]) {
		fprintf(stderr, "snapcell: --tool wants NAME=COMMAND, got '%s'\n", spec);
		return -1;
	}
	struct snapcell_error err = {0};
	bool grown = SC_ARRAY_ADD(tool_specs, n_tool_specs, SC_ARRAY_NO_CAP) == 0;
	if (!grown || register_tool(cfg, spec, NULL, &err) < 0) {
		fprintf(stderr, "snapcell: --tool: %s\n", grown ? err.message : "out of memory");
		return -1;
	}
	tool_specs[n_tool_specs++] = spec;
	return 0;
}

int fe_set_tool_schema(struct snapcell_config *cfg, const char *spec)
{
	const char *eq = strchr(spec, '=');
	if (!eq || eq == spec || !eq[1]) {
		fprintf(stderr, "snapcell: --tool-schema wants NAME=JSON, got '%s'\n", spec);
		return -1;
	}
	size_t name_len = (size_t)(eq - spec);
	const char *tool = NULL;
	for (size_t i = n_tool_specs; i-- > 0 && !tool;)
		if (!strncmp(tool_specs[i], spec, name_len) && tool_specs[i][name_len] == '=')
			tool = tool_specs[i];
	if (!tool) {
		fprintf(stderr, "snapcell: --tool-schema %.*s: no --tool %.*s=COMMAND before it\n",
			(int)name_len, spec, (int)name_len, spec);
		return -1;
	}
	struct snapcell_error err = {0};
	if (register_tool(cfg, tool, eq + 1, &err) < 0) {
		fprintf(stderr, "snapcell: --tool-schema: %s\n", err.message);
		return -1;
	}
	return 0;
}
