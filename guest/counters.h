/* The template's side of a reset cell's counters (guest/counters.c): the reset (reset.c) takes
 * a cell's listener at its parked stop and sets the base at each reset's stop; the template's
 * loop (template.c) serves the notifications. */
#ifndef SC_GUEST_COUNTERS_H
#define SC_GUEST_COUNTERS_H

#include <stdbool.h>
#include <sys/types.h>

struct sc_counters;

/* At the parked stop of cell pid (pidfd its pidfd, sandbox_proc_fd the sandbox's procfs): its
 * listener (SC_CELL_NOTIF_FD) taken and watched, the base its first run counts from set.
 * NULL on failure (the cell is then not to run: its calls would have no one to answer). */
struct sc_counters *sc_counters_take(pid_t pid, int pidfd, int sandbox_proc_fd);
/* At a reset's stop: the next run counts from here. */
int sc_counters_rebase(struct sc_counters *k);
/* At a reset's stop, before the rebase: whether the run called clone, clone3, fork or vfork
 * (succeeded or not), or a call of the cell still waits for the template's answer. */
bool sc_counters_made_task(const struct sc_counters *k);
void sc_counters_drop(struct sc_counters *k); /* NULL: nothing */
/* What the template's loop polls (-1 before any cell was armed), and what it calls when that is
 * readable: a bounded number of notifications answered. */
int sc_counters_poll_fd(void);
void sc_counters_serve(void);

#endif
