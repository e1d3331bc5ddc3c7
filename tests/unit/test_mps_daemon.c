/* The environments the launcher builds for its children (tools/child_env.h), and the
 * cluster's own MPS daemon (tools/mps_daemon.h) against a stand-in control program
 * (tests/data/fake-mps): started, its server checked, stopped with `quit`, and each way
 * it can fail reported with the daemon's own words and no child left behind. The real
 * daemon is exercised on the GPU machine (bench/gpu-step.md, "Ranks sharing a GPU"). */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/child_env.h"
#include "tools/mps_daemon.h"

/* Each test runs in its own process (criterion's fork), so PATH and the environment
 * are its own. */
static char dir[64];

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/sc-mps-test-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
  setenv("PATH", SC_SOURCE_DIR "/tests/data/fake-mps:/usr/bin:/bin", 1);
  unsetenv("FAKE_MPS_DAEMON_FAIL");
  unsetenv("FAKE_MPS_SERVER_FAIL");
}

static void teardown(void) {
  char cmd[128];
  setenv("PATH", "/usr/bin:/bin", 1); /* a test may have emptied it */
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  (void)!system(cmd);
}

/* No child of this process is left, running or unreaped. */
static void assert_no_children(void) {
  errno = 0;
  cr_assert_eq(waitpid(-1, NULL, WNOHANG), -1, "a child is left");
  cr_assert_eq(errno, ECHILD);
}

static bool log_has(const char *needle) {
  char path[128], text[1024] = "";
  snprintf(path, sizeof path, "%s/mps-log/control.log", dir);
  FILE *f = fopen(path, "r");
  if (f == NULL) return false;
  const size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = '\0';
  fclose(f);
  return strstr(text, needle) != NULL;
}

/* The pipe folder sc_mps_start makes in dir. */
static const char *want_pipe_dir(void) {
  static char path[128];
  snprintf(path, sizeof path, "%s/mps", dir);
  return path;
}

TestSuite(mps_daemon, .init = setup, .fini = teardown);

Test(mps_daemon, starts_serves_and_quits) {
  sc_mps *m = NULL;
  sc_diag d = {0};
  cr_assert_eq(sc_mps_start(dir, &m, &d), 0, "%s", d.msg);
  cr_assert_str_eq(sc_mps_pipe_dir(m), want_pipe_dir());
  char want[128];
  snprintf(want, sizeof want, "%s/mps-log", dir);
  cr_assert_str_eq(sc_mps_log_dir(m), want);
  struct stat st;
  snprintf(want, sizeof want, "%s/mps/control", dir);
  cr_assert_eq(stat(want, &st), 0, "the daemon is up");
  cr_assert_eq(stat(sc_mps_pipe_dir(m), &st), 0);
  cr_assert_eq(st.st_mode & 077, 0, "the pipe folder is private");
  cr_assert(!log_has("quit"));
  sc_mps_stop(m);
  cr_assert(log_has("fake mps: quit"), "stop asks the daemon to quit");
  assert_no_children();
}

Test(mps_daemon, probe_and_alive_tell_a_daemon_from_one_that_ended) {
  sc_mps *m = NULL;
  sc_diag d = {0};
  cr_assert_eq(sc_mps_start(dir, &m, &d), 0, "%s", d.msg);
  cr_assert_eq(sc_mps_probe(sc_mps_pipe_dir(m)), 0, "a daemon that answers");
  char empty[128];
  snprintf(empty, sizeof empty, "%s/none", dir);
  cr_assert_eq(mkdir(empty, 0700), 0);
  cr_assert_eq(sc_mps_probe(empty), SC_EIO, "no daemon there");
  /* a socket left behind: the daemon killed, its control node still there */
  char pid_file[160];
  snprintf(pid_file, sizeof pid_file, "%s/daemon.pid", want_pipe_dir());
  FILE *f = fopen(pid_file, "r");
  cr_assert_not_null(f);
  int pid = 0;
  cr_assert_eq(fscanf(f, "%d", &pid), 1);
  fclose(f);
  cr_assert(sc_mps_alive(m, &d), "%s", d.msg);
  cr_assert_eq(kill(pid, SIGKILL), 0);
  for (int i = 0; i < 200 && sc_mps_alive(m, &d); i++) usleep(10000);
  cr_assert_not_null(strstr(d.msg, "was killed by signal 9"), "%s", d.msg);
  cr_assert(!sc_mps_alive(m, &d), "an ended daemon stays ended");
  char sock[160];
  snprintf(sock, sizeof sock, "%s/control", want_pipe_dir());
  cr_assert_eq(access(sock, F_OK), 0, "the control node is left behind");
  cr_assert_eq(sc_mps_probe(want_pipe_dir()), SC_EIO, "a socket left behind");
  sc_mps_stop(m); /* (its daemon was reaped by sc_mps_alive: nothing left to stop) */
  setenv("PATH", "/nonexistent", 1);
  cr_assert_eq(sc_mps_probe(empty), SC_ENOENT, "no control program to ask");
  assert_no_children();
}

/* A start that fails with SC_EIO, its message saying what did not start and why (the
 * daemon's own words), and no child left. */
static void assert_start_fails(const char *what, const char *why) {
  sc_mps *m = NULL;
  sc_diag d = {0};
  cr_assert_eq(sc_mps_start(dir, &m, &d), SC_EIO);
  cr_assert_null(m);
  cr_assert_not_null(strstr(d.msg, what), "%s", d.msg);
  cr_assert_not_null(strstr(d.msg, why), "the daemon's reason: %s", d.msg);
  assert_no_children();
}

Test(mps_daemon, a_server_that_does_not_start_is_reported) {
  setenv("FAKE_MPS_SERVER_FAIL", "1", 1);
  assert_start_fails("the MPS server did not start: ", "no rights");
}

Test(mps_daemon, a_daemon_that_does_not_start_is_reported) {
  setenv("FAKE_MPS_DAEMON_FAIL", "1", 1); /* (what it printed is its reason) */
  assert_start_fails("control daemon did not start", "cannot open the device");
}

Test(mps_daemon, no_control_program_and_long_folders_are_refused) {
  setenv("PATH", "/nonexistent", 1);
  sc_mps *m = NULL;
  sc_diag d = {0};
  cr_assert_eq(sc_mps_start(dir, &m, &d), SC_ENOENT);
  cr_assert_not_null(strstr(d.msg, "nvidia-cuda-mps-control"), "%s", d.msg);
  char longdir[200];
  memset(longdir, 'x', sizeof longdir - 1);
  longdir[0] = '/';
  longdir[sizeof longdir - 1] = '\0';
  cr_assert_eq(sc_mps_start(longdir, &m, &d), SC_EINVAL);
  cr_assert_not_null(strstr(d.msg, "too long"), "%s", d.msg);
  assert_no_children();
}

/* How many entries of env are exactly kv. */
static int count_entry(char **env, const char *kv) {
  int n = 0;
  for (char **e = env; *e; e++) n += strcmp(*e, kv) == 0;
  return n;
}

Test(child_env, sets_replaces_and_keeps) {
  setenv("SC_TEST_A", "1", 1);
  setenv("SC_TEST_AB", "2", 1);
  unsetenv("SC_TEST_NEW");
  const char *const names[] = {"SC_TEST_A", "SC_TEST_NEW", "SC_TEST_AB_UNSET", "PATH"};
  const char *const values[] = {"x", "y", NULL, NULL};
  char **env = sc_child_env_new(names, values, 4);
  cr_assert_not_null(env);
  cr_assert_eq(count_entry(env, "SC_TEST_A=x"), 1);
  cr_assert_eq(count_entry(env, "SC_TEST_A=1"), 0, "the old value is gone");
  cr_assert_eq(count_entry(env, "SC_TEST_AB=2"), 1, "a longer name is another variable");
  cr_assert_eq(count_entry(env, "SC_TEST_NEW=y"), 1);
  char path[4096];
  snprintf(path, sizeof path, "PATH=%s", getenv("PATH"));
  cr_assert_eq(count_entry(env, path), 1, "a NULL value leaves the variable as it is");
  int n = 0, m = 0;
  for (char **e = env; *e; e++) n++;
  extern char **environ;
  for (char **e = environ; *e; e++) m++;
  cr_assert_eq(n, m + 1, "one variable added, none lost");
  free(env);
}
