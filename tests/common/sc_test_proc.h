/* sc_test_proc.h - a child process whose stdout the test reads, shared by the integration
 * tests that run the sparsecp binary (test_runtime_procs, test_attack): the fork and exec,
 * and the taking of whole lines out of what it printed. For Criterion tests (it asserts);
 * include it as "tests/common/sc_test_proc.h". */
#ifndef SC_TEST_PROC_H
#define SC_TEST_PROC_H

#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <unistd.h>

/* Forks and execs bin with argv; its stdout goes to a pipe whose read end is put in *out,
 * and its stderr, when err_path is not NULL, to that file (created or truncated). The
 * child is killed when this process dies (and exits at once if it already has). Returns
 * the child's pid. */
static inline pid_t sc_test_spawn(const char *bin, char *const argv[], const char *err_path,
                                  int *out) {
  int fds[2];
  cr_assert_eq(pipe(fds), 0);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  cr_assert(pid >= 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    if (err_path) {
      const int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (err >= 0) dup2(err, 2);
    }
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    execv(bin, argv);
    _exit(127);
  }
  close(fds[1]);
  *out = fds[0];
  return pid;
}

/* Takes the first whole line out of buf (*len bytes; what follows it moves up) into line,
 * without its '\n' and cut to cap - 1 characters. False when buf holds no whole line. */
static inline bool sc_test_take_line(char *buf, size_t *len, char *line, size_t cap) {
  char *nl = memchr(buf, '\n', *len);
  if (nl == NULL) return false;
  const size_t n = (size_t)(nl - buf);
  snprintf(line, cap, "%.*s", (int)(n < cap - 1 ? n : cap - 1), buf);
  memmove(buf, nl + 1, *len - n - 1);
  *len -= n + 1;
  return true;
}

#endif /* SC_TEST_PROC_H */
