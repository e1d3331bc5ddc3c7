/* cmd_launch.c - `sparsecp launch`: a whole local cluster as child processes.
 *
 * Writes a cluster file (ipc endpoints in a private temp folder, or tcp loopback ports),
 * starts one `sparsecp node` per rank, optionally forwards all node taps on one endpoint
 * (XSUB -> XPUB proxy), and supervises: a child that dies while the cluster runs is
 * reported (stderr, and a JSON event on stdout), the others get --grace-ms to notice
 * (they see DOWN) before they are stopped, and launch exits 1. SIGINT/SIGTERM stop all
 * children (SIGTERM, then SIGKILL after 3 s). Children carry PR_SET_PDEATHSIG, so even a
 * SIGKILLed launch leaves no process behind. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "actors/runtime/sc_cluster.h"
#include "actors/runtime/sc_time.h"
#include "tools/cli.h"

typedef struct child {
  pid_t pid;
  int32_t rank;
  bool alive;
} child;

typedef struct proxy {
  void *ctx, *xsub, *xpub, *ctl;
  pthread_t thread;
  bool running;
} proxy;

static void *proxy_main(void *arg) {
  proxy *p = arg;
  void *ctl_sub = zmq_socket(p->ctx, ZMQ_PAIR);
  zmq_connect(ctl_sub, "inproc://launch-proxy-ctl");
  zmq_proxy_steerable(p->xsub, p->xpub, NULL, ctl_sub);
  zmq_close(ctl_sub);
  return NULL;
}

static int proxy_start(proxy *p, const sc_cluster *c, const char *endpoint) {
  const int zero = 0;
  p->ctx = zmq_ctx_new();
  p->xsub = zmq_socket(p->ctx, ZMQ_XSUB);
  p->xpub = zmq_socket(p->ctx, ZMQ_XPUB);
  p->ctl = zmq_socket(p->ctx, ZMQ_PAIR);
  zmq_setsockopt(p->xsub, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt(p->xpub, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt(p->ctl, ZMQ_LINGER, &zero, sizeof zero);
  if (zmq_bind(p->ctl, "inproc://launch-proxy-ctl") != 0) return SC_EIO;
  if (zmq_bind(p->xpub, endpoint) != 0) {
    sc_cli_error("launch", "cannot bind the tap endpoint %s: %s", endpoint,
                 zmq_strerror(errno));
    return SC_EIO;
  }
  for (int32_t r = 0; r < c->num_nodes; r++)
    if (c->nodes[r].tap[0] && zmq_connect(p->xsub, c->nodes[r].tap) != 0) return SC_EIO;
  if (pthread_create(&p->thread, NULL, proxy_main, p) != 0) return SC_ESYS;
  p->running = true;
  return 0;
}

static void proxy_stop(proxy *p) {
  if (p->running) {
    zmq_send(p->ctl, "TERMINATE", 9, 0);
    pthread_join(p->thread, NULL);
  }
  if (p->ctx == NULL) return;
  zmq_close(p->xsub);
  zmq_close(p->xpub);
  zmq_close(p->ctl);
  zmq_ctx_term(p->ctx);
}

static void help(FILE *f) {
  fprintf(f,
          "usage: sparsecp launch --pcp P --dcp N [--tp T] [--device cpu|cuda]\n"
          "                       [--listen ENDPOINT] [--tap ENDPOINT] [--transport ipc|tcp]\n"
          "                       [--events] [--heartbeat-ms MS] [--heartbeat-timeout-ms MS]\n"
          "                       [--grace-ms MS]\n\n"
          "Starts P*N*T local nodes as child processes and keeps them running until\n"
          "Ctrl-C/SIGTERM (exit 0) or until a node dies (reported; exit 1).\n"
          "  --listen E     client endpoint of the head (written to the cluster file)\n"
          "  --tap E        one tap endpoint forwarding the taps of all nodes\n"
          "  --transport    ipc (default: sockets in a private temp folder) or tcp loopback\n"
          "  --events       nodes print JSON event lines; launch adds its own\n"
          "  --grace-ms     after a node died, time the others get before being stopped\n"
          "                 (default 2000)\n");
}

static void rm_tree(const char *dir) {
  char cmd[PATH_MAX + 16];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "sparsecp launch: could not remove %s\n", dir);
}

static void signal_all(child *ch, int n, int sig) {
  for (int i = 0; i < n; i++)
    if (ch[i].alive) kill(ch[i].pid, sig);
}

int sc_cmd_launch(int argc, char **argv) {
  static const struct option opts[] = {{"pcp", required_argument, NULL, 'p'},
                                       {"dcp", required_argument, NULL, 'd'},
                                       {"tp", required_argument, NULL, 't'},
                                       {"device", required_argument, NULL, 'D'},
                                       {"listen", required_argument, NULL, 'L'},
                                       {"tap", required_argument, NULL, 'T'},
                                       {"transport", required_argument, NULL, 'x'},
                                       {"events", no_argument, NULL, 'e'},
                                       {"heartbeat-ms", required_argument, NULL, 'b'},
                                       {"heartbeat-timeout-ms", required_argument, NULL, 'B'},
                                       {"grace-ms", required_argument, NULL, 'g'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  int64_t pcp = 1, dcp = 1, tp = 1, hb = 200, hbt = 1000, grace = 2000;
  const char *listen = NULL, *tap = NULL, *device = "cpu";
  bool tcp = false, events = false;
  int opt;
  optind = 1;
  while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (opt) {
    case 'p': if (!sc_cli_int("launch", "--pcp", optarg, 1, 64, &pcp)) return SC_EXIT_USAGE; break;
    case 'd': if (!sc_cli_int("launch", "--dcp", optarg, 1, 64, &dcp)) return SC_EXIT_USAGE; break;
    case 't': if (!sc_cli_int("launch", "--tp", optarg, 1, 64, &tp)) return SC_EXIT_USAGE; break;
    case 'b': if (!sc_cli_int("launch", "--heartbeat-ms", optarg, 10, 600000, &hb)) return SC_EXIT_USAGE; break;
    case 'B': if (!sc_cli_int("launch", "--heartbeat-timeout-ms", optarg, 20, 3600000, &hbt)) return SC_EXIT_USAGE; break;
    case 'g': if (!sc_cli_int("launch", "--grace-ms", optarg, 0, 600000, &grace)) return SC_EXIT_USAGE; break;
    case 'D': device = optarg; break;
    case 'L': listen = optarg; break;
    case 'T': tap = optarg; break;
    case 'x':
      if (strcmp(optarg, "tcp") == 0) tcp = true;
      else if (strcmp(optarg, "ipc") != 0) {
        sc_cli_error("launch", "--transport must be ipc or tcp");
        return SC_EXIT_USAGE;
      }
      break;
    case 'e': events = true; break;
    case 'h': help(stdout); return SC_EXIT_OK;
    default: help(stderr); return SC_EXIT_USAGE;
    }
  }
  if (optind != argc) {
    help(stderr);
    return SC_EXIT_USAGE;
  }
  if (strcmp(device, "cpu") != 0) {
    sc_cli_error("launch", "--device %s: only cpu nodes exist so far", device);
    return SC_EXIT_USAGE;
  }
  if (hbt <= hb) {
    sc_cli_error("launch", "--heartbeat-timeout-ms must exceed --heartbeat-ms");
    return SC_EXIT_USAGE;
  }
  if (pcp * dcp * tp > SC_CLUSTER_MAX_NODES) {
    sc_cli_error("launch", "at most %d nodes", SC_CLUSTER_MAX_NODES);
    return SC_EXIT_USAGE;
  }
  const int n = (int)(pcp * dcp * tp);
  char dir[] = "/tmp/sparsecp-launch-XXXXXX";
  if (mkdtemp(dir) == NULL) {
    sc_cli_error("launch", "mkdtemp: %s", strerror(errno));
    return SC_EXIT_FAILURE;
  }
  int exit_code = SC_EXIT_FAILURE;
  child *ch = calloc((size_t)n, sizeof *ch);
  proxy px = {0};
  sc_cluster c = {0};
  char path[PATH_MAX], exe[PATH_MAX];
  sc_diag d = {0};
  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigprocmask(SIG_BLOCK, &set, &old);
  if (ch == NULL || sc_cluster_local(n, tcp ? NULL : dir, &c, &d) != 0) {
    sc_cli_error("launch", "%s", d.msg[0] ? d.msg : "out of memory");
    goto out;
  }
  c.pcp = (int32_t)pcp;
  c.dcp = (int32_t)dcp;
  c.tp = (int32_t)tp;
  c.heartbeat_ms = (int32_t)hb;
  c.heartbeat_timeout_ms = (int32_t)hbt;
  if (listen) snprintf(c.listen, sizeof c.listen, "%s", listen);
  snprintf(path, sizeof path, "%s/cluster.json", dir);
  {
    char *json = NULL;
    FILE *f = fopen(path, "w");
    if (f == NULL || sc_cluster_to_json(&c, &json) != 0 || fputs(json, f) < 0) {
      sc_cli_error("launch", "cannot write %s", path);
      if (f) fclose(f);
      free(json);
      goto out;
    }
    fclose(f);
    free(json);
  }
  const ssize_t el = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (el <= 0) {
    sc_cli_error("launch", "cannot find my own executable");
    goto out;
  }
  exe[el] = '\0';
  const pid_t me = getpid();
  for (int r = 0; r < n; r++) {
    const pid_t pid = fork();
    if (pid < 0) {
      sc_cli_error("launch", "fork: %s", strerror(errno));
      signal_all(ch, r, SIGKILL);
      goto reap;
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != me) _exit(1);
      sigprocmask(SIG_SETMASK, &old, NULL);
      char rank[16];
      snprintf(rank, sizeof rank, "%d", r);
      char *args[] = {"sparsecp", "node", "--cluster", path, "--rank", rank,
                      events ? "--events" : NULL, NULL};
      execv(exe, args);
      _exit(127);
    }
    ch[r] = (child){.pid = pid, .rank = r, .alive = true};
  }
  if (tap && proxy_start(&px, &c, tap) != 0) {
    signal_all(ch, n, SIGTERM);
    goto reap;
  }
  printf("{\"event\":\"launched\",\"nodes\":%d,\"cluster\":\"%s\",\"tap\":\"%s\",\"pids\":[", n,
         path, tap ? tap : "");
  for (int r = 0; r < n; r++) printf("%s%d", r ? "," : "", (int)ch[r].pid);
  printf("]}\n");
  fflush(stdout);
  exit_code = SC_EXIT_OK;
reap:;
  int alive = 0;
  for (int r = 0; r < n; r++) alive += ch[r].alive;
  bool stopping = exit_code != SC_EXIT_OK;
  uint64_t stop_at = 0, kill_at = stopping ? sc_now_ns() + 3000000000ull : 0;
  while (alive > 0) {
    struct timespec ts = {0, 100 * 1000000};
    const int sig = sigtimedwait(&set, NULL, &ts);
    if (sig == SIGINT || sig == SIGTERM) {
      if (!stopping) {
        stopping = true;
        signal_all(ch, n, SIGTERM);
        kill_at = sc_now_ns() + 3000000000ull;
      }
    }
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      for (int r = 0; r < n; r++) {
        if (ch[r].pid != pid || !ch[r].alive) continue;
        ch[r].alive = false;
        alive--;
        const bool sigd = WIFSIGNALED(status);
        const int val = sigd ? WTERMSIG(status) : WEXITSTATUS(status);
        if (!stopping || (!sigd && val != 0) || (sigd && val != SIGTERM && val != SIGKILL)) {
          fprintf(stderr, "sparsecp launch: node %d (pid %d) %s %d\n", r, (int)pid,
                  sigd ? "was killed by signal" : "exited with status", val);
          printf("{\"event\":\"exited\",\"rank\":%d,\"pid\":%d,\"%s\":%d}\n", r, (int)pid,
                 sigd ? "signal" : "status", val);
          fflush(stdout);
          exit_code = SC_EXIT_FAILURE;
          if (!stopping && stop_at == 0) stop_at = sc_now_ns() + (uint64_t)grace * 1000000ull;
        }
      }
    }
    const uint64_t now = sc_now_ns();
    if (!stopping && stop_at && now >= stop_at) {
      stopping = true;
      signal_all(ch, n, SIGTERM);
      kill_at = now + 3000000000ull;
    }
    if (stopping && kill_at && now >= kill_at) {
      signal_all(ch, n, SIGKILL);
      kill_at = 0;
    }
  }
out:
  proxy_stop(&px);
  sigprocmask(SIG_SETMASK, &old, NULL);
  sc_cluster_free(&c);
  free(ch);
  rm_tree(dir);
  return exit_code;
}
