/* The cluster's own MPS daemon (tools/mps_daemon.h) against a stand-in control program
 * (tests/data/fake-mps): started, its server checked, stopped with `quit`, and each way
 * it can fail reported with the daemon's own words and no child left behind. The real
 * daemon is exercised on the GPU machine (bench/gpu-step.md, "Ranks sharing a GPU"). */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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

TestSuite(mps_daemon, .init = setup, .fini = teardown);

Test(mps_daemon, starts_serves_and_quits) {
  sc_mps *m = NULL;
  sc_diag d = {0};
  cr_assert_eq(sc_mps_start(dir, &m, &d), 0, "%s", d.msg);
  char want[128];
  snprintf(want, sizeof want, "%s/mps", dir);
  cr_assert_str_eq(sc_mps_pipe_dir(m), want);
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

Test(mps_daemon, a_server_that_does_not_start_is_reported) {
  setenv("FAKE_MPS_SERVER_FAIL", "1", 1);
  sc_mps *m = NULL;
  sc_diag d = {0};
  cr_assert_eq(sc_mps_start(dir, &m, &d), SC_EIO);
  cr_assert_null(m);
  cr_assert_not_null(strstr(d.msg, "the MPS server did not start: "), "%s", d.msg);
  cr_assert_not_null(strstr(d.msg, "no rights"), "the daemon's reason: %s", d.msg);
  assert_no_children();
}

Test(mps_daemon, a_daemon_that_does_not_start_is_reported) {
  setenv("FAKE_MPS_DAEMON_FAIL", "1", 1);
  sc_mps *m = NULL;
  sc_diag d = {0};
  cr_assert_eq(sc_mps_start(dir, &m, &d), SC_EIO);
  cr_assert_not_null(strstr(d.msg, "control daemon did not start"), "%s", d.msg);
  cr_assert_not_null(strstr(d.msg, "cannot open the device"), "what it printed: %s", d.msg);
  assert_no_children();
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
