/* child_env.h - the environment of a child process, built before the fork.
 *
 * A process with threads (launch runs its proxy and ZeroMQ's) may fork only to call
 * async-signal-safe functions in the child until it execs: setenv there allocates and
 * takes glibc's environment lock, which another thread may have held at the fork. So a
 * child's environment is built in the parent, this process's own with some variables
 * set, and handed to execve.
 *
 * Ownership: sc_child_env_new returns one allocation (the array and the strings set),
 * freed with free(); the other strings are environ's, borrowed (valid until this process
 * changes its environment). */
#ifndef SC_CHILD_ENV_H
#define SC_CHILD_ENV_H

#include <stddef.h>

/* environ with each of the n variables names[i] set to values[i] (a NULL value: left
 * as environ has it), for execve. NULL when out of memory. */
char **sc_child_env_new(const char *const *names, const char *const *values, size_t n);

#endif
