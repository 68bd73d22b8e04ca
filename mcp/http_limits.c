/* What an HTTP client may hold before its request is served. libmicrohttpd's idle timeout
 * restarts with every byte, so clients trickling a header byte every few seconds held every
 * connection slot, locking out clients with the token (authentication needs the whole head).
 * Here a head must be complete within a deadline of the connection's accept (or of its
 * previous answer, on a kept-alive connection): a thread shuts a late connection's socket
 * down, which ends its libmicrohttpd thread. Bodies in flight are charged to a server-wide
 * budget. It does not parse anything; http.c does. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "../frontend/frontend.h"
#include "http_limits.h"

#define SWEEP_NS 100000000L
/* With every slot taken, connections wait in the listen queue behind an attacker's, who
 * reconnects as soon as one is cut: then a head gets this long, not the configured
 * deadline, so the queue moves ten times faster (a real client sends its head at once). It
 * holds for every head that was waiting at a moment all slots were taken, not only while
 * they still are: the first head cut frees a slot, and the heads accepted just after it
 * would otherwise keep theirs for the whole deadline while newcomers come and go. */
#define PRESSED_HEAD_US 1000000u

/* One open connection, from accept to close; on the list while open. */
struct tracked {
	int fd;
	uint64_t head_since_us; /* when the head it waits for could start */
	bool waiting_head;	/* between accept (or an answer) and a complete head */
	bool cut;		/* its socket was shut down */
	struct tracked *prev, *next;
};

struct mcp_http_limits {
	pthread_mutex_t lock;
	pthread_cond_t stop_cond;
	bool stopping;
	pthread_t sweeper;
	uint64_t head_timeout_us;
	/* The last moment every slot was taken (0: never): set when a connection takes the last
	 * slot and when a head starts waiting with none left, so a head waiting since t saw the
	 * server full exactly when full_at_us >= t. */
	uint64_t full_at_us;
	unsigned max_connections, n_open;
	struct tracked *open;
	size_t budget, charged;
};

/* How long t's head may take from head_since_us: the pressed deadline once every slot was
 * taken while it waited. */
static uint64_t head_timeout_us(const struct mcp_http_limits *l, const struct tracked *t)
{
	bool pressed = l->full_at_us >= t->head_since_us;
	return pressed && l->head_timeout_us > PRESSED_HEAD_US ? PRESSED_HEAD_US
							       : l->head_timeout_us;
}

static void *sweep(void *arg)
{
	struct mcp_http_limits *l = arg;
	pthread_mutex_lock(&l->lock);
	while (!l->stopping) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += SWEEP_NS;
		if (until.tv_nsec >= 1000000000L)
			until.tv_sec++, until.tv_nsec -= 1000000000L;
		pthread_cond_timedwait(&l->stop_cond, &l->lock, &until);
		uint64_t now = fe_now_us();
		/* The fd is still the connection's: libmicrohttpd reports the close (and the
		 * entry leaves the list, under this lock) before it closes the socket. */
		for (struct tracked *t = l->open; t; t = t->next)
			if (t->waiting_head && !t->cut &&
			    now - t->head_since_us > head_timeout_us(l, t)) {
				shutdown(t->fd, SHUT_RDWR);
				t->cut = true;
			}
	}
	pthread_mutex_unlock(&l->lock);
	return NULL;
}

struct mcp_http_limits *mcp_http_limits_new(unsigned head_timeout_s, unsigned max_connections,
					    size_t request_memory)
{
	struct mcp_http_limits *l = calloc(1, sizeof(*l));
	if (!l) {
		fprintf(stderr, "snapcell mcp: out of memory\n");
		return NULL;
	}
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->stop_cond, NULL);
	l->head_timeout_us = (uint64_t)head_timeout_s * 1000000u;
	l->max_connections = max_connections;
	l->budget = request_memory;
	if (pthread_create(&l->sweeper, NULL, sweep, l) != 0) {
		fprintf(stderr, "snapcell mcp: cannot start the connection deadline thread\n");
		pthread_mutex_destroy(&l->lock);
		pthread_cond_destroy(&l->stop_cond);
		free(l);
		return NULL;
	}
	return l;
}

void mcp_http_limits_free(struct mcp_http_limits *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&l->lock);
	l->stopping = true;
	pthread_cond_signal(&l->stop_cond);
	pthread_mutex_unlock(&l->lock);
	pthread_join(l->sweeper, NULL);
	while (l->open) {
		struct tracked *t = l->open;
		l->open = t->next;
		free(t);
	}
	pthread_mutex_destroy(&l->lock);
	pthread_cond_destroy(&l->stop_cond);
	free(l);
}

void mcp_http_limits_track(void *cls, struct MHD_Connection *con, void **socket_context,
			   enum MHD_ConnectionNotificationCode code)
{
	struct mcp_http_limits *l = cls;
	struct tracked *t = *socket_context;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(con, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (!ci || !(t = calloc(1, sizeof(*t))))
			return; /* untracked: its head has libmicrohttpd's idle timeout only */
		t->fd = ci->connect_fd;
		t->waiting_head = true;
		pthread_mutex_lock(&l->lock);
		t->head_since_us = fe_now_us();
		t->next = l->open;
		if (l->open)
			l->open->prev = t;
		l->open = t;
		if (++l->n_open >= l->max_connections)
			l->full_at_us = t->head_since_us;
		pthread_mutex_unlock(&l->lock);
		*socket_context = t;
		return;
	}
	if (!t)
		return;
	pthread_mutex_lock(&l->lock);
	if (t->prev)
		t->prev->next = t->next;
	else
		l->open = t->next;
	if (t->next)
		t->next->prev = t->prev;
	l->n_open--;
	pthread_mutex_unlock(&l->lock);
	free(t);
	*socket_context = NULL;
}

static struct tracked *tracked_of(struct MHD_Connection *con)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(con, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

void mcp_http_limits_head_done(struct mcp_http_limits *l, struct MHD_Connection *con)
{
	struct tracked *t = tracked_of(con);
	if (!t)
		return;
	pthread_mutex_lock(&l->lock);
	t->waiting_head = false;
	pthread_mutex_unlock(&l->lock);
}

void mcp_http_limits_request_done(struct mcp_http_limits *l, struct MHD_Connection *con)
{
	struct tracked *t = tracked_of(con);
	if (!t)
		return;
	pthread_mutex_lock(&l->lock);
	t->waiting_head = true;
	t->head_since_us = fe_now_us();
	if (l->n_open >= l->max_connections)
		l->full_at_us = t->head_since_us;
	pthread_mutex_unlock(&l->lock);
}

bool mcp_http_limits_slot_free(struct mcp_http_limits *l)
{
	pthread_mutex_lock(&l->lock);
	bool free_slot = l->n_open < l->max_connections;
	pthread_mutex_unlock(&l->lock);
	return free_slot;
}

bool mcp_http_limits_charge(struct mcp_http_limits *l, size_t n)
{
	pthread_mutex_lock(&l->lock);
	bool fits = n <= l->budget - l->charged;
	if (fits)
		l->charged += n;
	pthread_mutex_unlock(&l->lock);
	return fits;
}

void mcp_http_limits_uncharge(struct mcp_http_limits *l, size_t n)
{
	pthread_mutex_lock(&l->lock);
	l->charged -= n;
	pthread_mutex_unlock(&l->lock);
}

size_t mcp_http_limits_budget(const struct mcp_http_limits *l)
{
	return l->budget;
}
