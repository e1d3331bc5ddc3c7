/* mps_daemon.c - a private CUDA MPS control daemon (mps_daemon.h). */
#define _GNU_SOURCE /* pipe2, close_range */
#include "tools/mps_daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "tools/child_env.h"

#define MPS_CONTROL "nvidia-cuda-mps-control"

/* The daemon's control socket is dir/mps/control: a unix socket path, at most
 * sizeof(sun_path) - 1 = 107 bytes; kept well inside for the names it adds. */
#define MPS_DIR_MAX 80

struct sc_mps {
  pid_t pid;                   /* the daemon, our child */
  char exe[PATH_MAX];
  char pipe_dir[MPS_DIR_MAX + 16], log_dir[MPS_DIR_MAX + 16];
  char **envp;                 /* environ with the two folders, for every exec */
};

const char *sc_mps_pipe_dir(const sc_mps *m) { return m->pipe_dir; }
const char *sc_mps_log_dir(const sc_mps *m) { return m->log_dir; }

/* The control program on PATH, into out. */
static bool find_control(char *out, size_t cap) {
  const char *path = getenv("PATH");
  if (path == NULL || *path == '\0') path = "/usr/local/bin:/usr/bin:/bin";
  for (const char *p = path; *p;) {
    const char *end = strchr(p, ':');
    const size_t len = end ? (size_t)(end - p) : strlen(p);
    const int n = snprintf(out, cap, "%.*s/%s", (int)(len ? len : 1), len ? p : ".", MPS_CONTROL);
    if (n > 0 && (size_t)n < cap && access(out, X_OK) == 0) return true;
    p += len + (end != NULL);
  }
  return false;
}

/* environ with our two folders, for every exec (child_env.h: built before forking). */
static char **make_envp(const sc_mps *m) {
  static const char *const names[] = {"CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY"};
  const char *const values[] = {m->pipe_dir, m->log_dir[0] ? m->log_dir : NULL};
  return sc_child_env_new(names, values, 2);
}

/* Waits up to timeout_ms for child pid to end (reaped); false if it still runs. */
static bool wait_child(pid_t pid, int64_t timeout_ms, int *status) {
  const uint64_t until = sc_now_ns() + (uint64_t)timeout_ms * 1000000ull;
  for (;;) {
    const pid_t w = waitpid(pid, status, WNOHANG);
    if (w == pid || (w < 0 && errno == ECHILD)) return true;
    if (sc_now_ns() >= until) return false;
    usleep(5000);
  }
}

/* Runs `nvidia-cuda-mps-control` with one command on its stdin (the control program's
 * client mode) and its answer in out (NUL-terminated, possibly cut). Returns its exit
 * status, or -1 when it could not be run or took more than 5 s (then killed). */
static int control(const sc_mps *m, const char *cmd, char *out, size_t cap) {
  int in[2], res[2];
  if (pipe2(in, O_CLOEXEC) != 0) return -1;
  if (pipe2(res, O_CLOEXEC) != 0) {
    close(in[0]), close(in[1]);
    return -1;
  }
  const pid_t pid = fork();
  if (pid == 0) {
    /* copies above 2 first: a caller started with fd 0 or 1 closed may have been given
     * those numbers, and dup2 onto itself would keep their close-on-exec */
    const int a = fcntl(in[0], F_DUPFD_CLOEXEC, 3), b = fcntl(res[1], F_DUPFD_CLOEXEC, 3);
    if (a < 0 || b < 0 || dup2(a, 0) < 0 || dup2(b, 1) < 0) _exit(127);
    char *args[] = {MPS_CONTROL, NULL};
    execve(m->exe, args, m->envp);
    _exit(127);
  }
  close(in[0]), close(res[1]);
  size_t got = 0;
  if (pid > 0) {
    /* a command is a few bytes: the pipe takes it whole. A client that ended before
     * reading it would raise SIGPIPE, which must not reach our caller: blocked here,
     * and taken back if it came. */
    sigset_t pipe_sig, old;
    sigemptyset(&pipe_sig);
    sigaddset(&pipe_sig, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_sig, &old);
    const bool sent = write(in[1], cmd, strlen(cmd)) >= 0 && write(in[1], "\n", 1) >= 0;
    if (!sent && errno == EPIPE) {
      const struct timespec zero = {0, 0};
      (void)sigtimedwait(&pipe_sig, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
  }
  close(in[1]);
  const uint64_t until = sc_now_ns() + 5000000000ull;
  while (pid > 0 && sc_now_ns() < until) {
    struct pollfd p = {.fd = res[0], .events = POLLIN};
    if (poll(&p, 1, 100) <= 0) continue;
    char sink[256];
    const size_t room = got + 1 < cap ? cap - 1 - got : 0;
    const ssize_t r = read(res[0], room ? out + got : sink, room ? room : sizeof sink);
    if (r <= 0) break;
    if (room) got += (size_t)r;
  }
  close(res[0]);
  if (cap) out[got] = '\0';
  if (pid < 0) return -1;
  int status = 0;
  if (!wait_child(pid, sc_now_ns() < until ? 1000 : 0, &status)) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The last line of the daemon's log (why it failed), or "": control.log, where the
 * daemon writes, else what it printed (daemon.out: in the foreground it may print its
 * log instead). */
static void last_log_line(const sc_mps *m, char *out, size_t cap) {
  static const char *const names[] = {"control.log", "daemon.out"};
  out[0] = '\0';
  for (size_t i = 0; i < sizeof names / sizeof *names && out[0] == '\0'; i++) {
    char path[sizeof m->log_dir + 16], line[512];
    snprintf(path, sizeof path, "%s/%s", m->log_dir, names[i]);
    FILE *f = fopen(path, "r");
    if (f == NULL) continue;
    while (fgets(line, sizeof line, f)) {
      line[strcspn(line, "\n")] = '\0';
      if (line[0]) snprintf(out, cap, "%s", line);
    }
    fclose(f);
  }
}

static void free_mps(sc_mps *m) {
  free(m->envp);
  free(m);
}

/* Ends the daemon that did not quit: SIGTERM, and SIGKILL 2 s later. SIGTERM first: on
 * the H200 a daemon ended by SIGTERM (its parent killed) left no server behind; what a
 * SIGKILLed one leaves was not tried. Reaps it. */
static void end_daemon(sc_mps *m) {
  int status;
  kill(m->pid, SIGTERM);
  if (!wait_child(m->pid, 2000, &status)) kill(m->pid, SIGKILL), waitpid(m->pid, &status, 0);
}

int sc_mps_start(const char *dir, sc_mps **out, sc_diag *d) {
  *out = NULL;
  if (strlen(dir) > MPS_DIR_MAX)
    return sc_fail(d, SC_EINVAL, "%s: too long a folder for MPS's sockets (at most %d bytes)",
                   dir, MPS_DIR_MAX);
  sc_mps *m = calloc(1, sizeof *m);
  if (m == NULL) return sc_fail(d, SC_ENOMEM, "out of memory");
  if (!find_control(m->exe, sizeof m->exe)) {
    free_mps(m);
    return sc_fail(d, SC_ENOENT, "no %s on PATH", MPS_CONTROL);
  }
  snprintf(m->pipe_dir, sizeof m->pipe_dir, "%s/mps", dir);
  snprintf(m->log_dir, sizeof m->log_dir, "%s/mps-log", dir);
  if ((mkdir(m->pipe_dir, 0700) != 0 && errno != EEXIST) ||
      (mkdir(m->log_dir, 0700) != 0 && errno != EEXIST)) {
    const int e = errno;
    free_mps(m);
    return sc_fail(d, SC_ESYS, "cannot create the MPS folders in %s: %s", dir, strerror(e));
  }
  if ((m->envp = make_envp(m)) == NULL) {
    free_mps(m);
    return sc_fail(d, SC_ENOMEM, "out of memory");
  }
  char out_path[sizeof m->log_dir + 16];
  snprintf(out_path, sizeof out_path, "%s/daemon.out", m->log_dir);
  const pid_t parent = getpid();
  m->pid = fork();
  if (m->pid < 0) {
    const int e = errno;
    free_mps(m);
    return sc_fail(d, SC_ESYS, "fork: %s", strerror(e));
  }
  if (m->pid == 0) {
    /* SIGTERM, not SIGKILL (end_daemon says why) */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);
    const int devnull = open("/dev/null", O_RDONLY);
    const int log = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (devnull >= 0) dup2(devnull, 0);
    if (log >= 0) dup2(log, 1), dup2(log, 2);
    /* nothing else of ours (sockets, the nodes' pipes) goes on to the daemon and its
     * server, which may outlive a stop that kills us */
    (void)close_range(3, ~0U, 0);
    char *args[] = {MPS_CONTROL, "-f", NULL};
    execve(m->exe, args, m->envp);
    _exit(127);
  }
  /* The daemon is up when its control socket exists; the server starts on request. */
  char sock[sizeof m->pipe_dir + 16], answer[256] = "", why[512];
  snprintf(sock, sizeof sock, "%s/control", m->pipe_dir);
  const uint64_t until = sc_now_ns() + 5000000000ull;
  int status, rc = SC_EIO;
  bool ended = false;
  while (!(ended = waitpid(m->pid, &status, WNOHANG) == m->pid) && access(sock, F_OK) != 0 &&
         sc_now_ns() < until)
    usleep(5000);
  const bool up = !ended && access(sock, F_OK) == 0;
  if (up) {
    char cmd[64];
    snprintf(cmd, sizeof cmd, "start_server -uid %u", (unsigned)getuid());
    if (control(m, cmd, answer, sizeof answer) == 0 &&
        control(m, "get_server_list", answer, sizeof answer) == 0 &&
        strtol(answer, NULL, 10) > 0)
      rc = 0;
  }
  if (rc == 0) {
    *out = m;
    return 0;
  }
  last_log_line(m, why, sizeof why);
  if (!ended) end_daemon(m);
  free_mps(m);
  return sc_fail(d, SC_EIO, "the MPS %s did not start%s%s", up ? "server" : "control daemon",
                 why[0] ? ": " : up ? "" : " (no control socket within 5 s)", why);
}

bool sc_mps_alive(sc_mps *m, sc_diag *d) {
  if (m->pid <= 0) return false;
  int status;
  if (waitpid(m->pid, &status, WNOHANG) != m->pid) return true;
  m->pid = 0; /* reaped: stop has no process left to stop */
  if (WIFSIGNALED(status))
    sc_fail(d, SC_EIO, "was killed by signal %d", WTERMSIG(status));
  else
    sc_fail(d, SC_EIO, "exited with status %d", WEXITSTATUS(status));
  return false;
}

int sc_mps_probe(const char *pipe_dir) {
  sc_mps *m = calloc(1, sizeof *m);
  if (m == NULL) return SC_ENOMEM;
  char answer[64];
  int rc;
  if (!find_control(m->exe, sizeof m->exe)) {
    rc = SC_ENOENT;
  } else if (strlen(pipe_dir) >= sizeof m->pipe_dir) {
    rc = SC_EINVAL;
  } else {
    snprintf(m->pipe_dir, sizeof m->pipe_dir, "%s", pipe_dir);
    m->envp = make_envp(m);
    rc = m->envp == NULL                                           ? SC_ENOMEM
         : control(m, "get_server_list", answer, sizeof answer) != 0 ? SC_EIO
                                                                     : 0;
  }
  free_mps(m);
  return rc;
}

void sc_mps_stop(sc_mps *m) {
  if (m == NULL) return;
  if (m->pid <= 0) { /* it ended already (sc_mps_alive) */
    free_mps(m);
    return;
  }
  char answer[64];
  int status;
  (void)control(m, "quit", answer, sizeof answer);
  if (!wait_child(m->pid, 3000, &status)) end_daemon(m);
  free_mps(m);
}
