/* local_cluster.c - child `sparsecp node` processes of a local pipeline cluster. */
#define _XOPEN_SOURCE 700 /* nftw (ftw.h asks for the X/Open interface) */
#include "tools/local_cluster.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "actors/fault.h"
#include "actors/pipeline_config.h"
#include "actors/runtime/sc_cluster.h"
#include "base/clock.h"
#include "base/curve_key.h"
#include "base/inet_addr.h"
#include "base/log.h"
#include "model/hf_model.h"
#include "model/model_defaults.h"
#include "plan/plan.h"
#include "tools/child_env.h"
#include "tools/cli.h"
#include "tools/mps_daemon.h"

typedef struct child {
  pid_t pid;
  bool alive;
} child;

struct sc_local_cluster {
  int32_t n;
  child *ch;
  char dir[PATH_MAX];
  char path[PATH_MAX + 32];
  char listen[SC_ENDPOINT_MAX];
  char http[SC_ENDPOINT_MAX];    /* HOST:PORT with the port chosen ("" = none) */
  char (*taps)[SC_ENDPOINT_MAX];
  char tap_key_file[PATH_MAX];   /* tcp taps: the subscriber key they admit ("" = none) */
  /* how a node is started (again: sc_local_cluster_restart) */
  char exe[PATH_MAX];
  pid_t parent;
  const char *log_level;         /* borrowed from the options, as they promise */
  bool quiet, events, cuda, nccl;
  int32_t gpus;
  sc_mps *mps;                   /* the cluster's own MPS daemon, or NULL */
  bool mps_ended;                /* it was found ended (sc_local_cluster_mps_check) */
  char no_mps[PATH_MAX];         /* --mps off: an empty folder given to the nodes as
                                    CUDA_MPS_PIPE_DIRECTORY ("" = none) */
  bool under_mps;                /* ranks sharing a GPU run under an MPS server (the
                                    cluster's own or the environment's) */
};

const char *sc_local_cluster_listen(const sc_local_cluster *c) { return c->listen; }
const char *sc_local_cluster_http(const sc_local_cluster *c) { return c->http; }
const char *sc_local_cluster_file(const sc_local_cluster *c) { return c->path; }
int32_t sc_local_cluster_size(const sc_local_cluster *c) { return c->n; }
const char *sc_local_cluster_tap_key_file(const sc_local_cluster *c) { return c->tap_key_file; }
const char *sc_local_cluster_tap(const sc_local_cluster *c, int32_t rank) {
  return rank >= 0 && rank < c->n ? c->taps[rank] : "";
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  (void)(type == FTW_DP ? rmdir(path) : unlink(path));
  return 0; /* go on: whatever stays is in a temporary folder */
}

/* Removes the cluster's folder and what the nodes left in it (ipc socket files), without
 * a shell: the folder's name comes from $TMPDIR, which may hold any character. */
static void rm_dir(const char *dir) { (void)nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

/* On tcp, as the cluster file requires (docs/cluster-file.md): a key pair per node, each
 * secret in its own file in the cluster's private folder, and with taps a subscriber key
 * pair (tap.key) that tap_keys_file lists: launch's tap forwarding uses it, and a user's
 * `sparsecp tap --key` may. Ephemeral: they go with the folder. */
static int path_in_dir(const sc_local_cluster *lc, const char *name, char *out, size_t cap,
                       sc_diag *d) {
  const int n = snprintf(out, cap, "%s/%s", lc->dir, name);
  return n > 0 && (size_t)n < cap ? 0 : sc_fail(d, SC_EINVAL, "%s: the path is too long", lc->dir);
}

static int make_keys(sc_local_cluster *lc, sc_cluster *c, bool taps, sc_diag *d) {
  int rc = 0;
  for (int32_t r = 0; r < lc->n && rc == 0; r++) {
    sc_cluster_node *nd = &c->nodes[r];
    char name[32];
    snprintf(name, sizeof name, "node-%d.key", (int)r);
    if ((rc = path_in_dir(lc, name, nd->key_file, sizeof nd->key_file, d)) == 0 &&
        (rc = sc_curve_new_key_file(nd->key_file, nd->public_key, d)) == 0)
      nd->has_key = true;
  }
  if (rc != 0) return rc;
  c->curve = true;
  if (!taps) return 0;
  uint8_t tap_key[32];
  char z85[SC_CURVE_Z85_LEN + 1];
  if ((rc = path_in_dir(lc, "tap.key", lc->tap_key_file, sizeof lc->tap_key_file, d)) ||
      (rc = path_in_dir(lc, "taps.pub", c->tap_keys_file, sizeof c->tap_keys_file, d)))
    return rc;
  rc = sc_curve_new_key_file(lc->tap_key_file, tap_key, d);
  FILE *f = rc == 0 ? fopen(c->tap_keys_file, "w") : NULL;
  if (rc == 0 && (f == NULL || fprintf(f, "%s\n", zmq_z85_encode(z85, tap_key, 32)) < 0))
    rc = sc_fail(d, SC_EIO, "cannot write %s", c->tap_keys_file);
  if (f && fclose(f) != 0 && rc == 0) rc = sc_fail(d, SC_EIO, "cannot write %s", c->tap_keys_file);
  return rc;
}

/* The HTTP address with its port: as given, or with port 0 a free one of that host
 * (bound and read back, then released for the head to bind: another process may take it
 * in between, which the head then reports). IPv4 or [IPv6] numeric hosts; SC_EINVAL
 * (said) for anything else. */
static int choose_http_port(const char *addr, char *out, size_t cap, sc_diag *d) {
  struct sockaddr_storage ss;
  socklen_t len;
  sc_diag why = {0};
  if (sc_inet_addr_parse(addr, &ss, &len, &why) != 0)
    return sc_fail(d, SC_EINVAL, "--http %s", sc_diag_message(&why));
  if (sc_inet_addr_port(&ss) == 0) {
    const int fd = socket(ss.ss_family, SOCK_STREAM, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) != 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
      const int err = errno;
      if (fd >= 0) close(fd);
      return sc_fail(d, SC_EIO, "--http %s: %s", addr, strerror(err));
    }
    close(fd);
  }
  sc_inet_addr_format(&ss, out, cap);
  return 0;
}

/* The cluster file: the runtime's part from sc_cluster_to_json, plus each node's "coll"
 * endpoint and the "pipeline" section. Endpoints come from one sc_cluster_local call of
 * 2n entries (free tcp ports, or ipc paths in the folder): n node endpoints and n
 * collective endpoints; one call, so that no tcp port is handed out twice, which is what
 * bounds n (SC_LOCAL_CLUSTER_MAX_NODES). */
static int write_cluster_file(sc_local_cluster *lc, const sc_local_cluster_opts *o, sc_diag *d) {
  /* clients of a local cluster are local: by default they reach the gateway in the
   * private folder also with tcp between the nodes (a tcp client endpoint serves whoever
   * reaches it, unless it has a key: `launch --listen tcp://... --listen-key-file`) */
  int rc = 0;
  if (o->listen)
    snprintf(lc->listen, sizeof lc->listen, "%s", o->listen);
  else if ((rc = path_in_dir(lc, "client", lc->listen + 6, sizeof lc->listen - 6, d)) != 0)
    return rc;
  else
    memcpy(lc->listen, "ipc://", 6);
  sc_cluster c = {0};
  if ((rc = sc_cluster_local(2 * lc->n, o->tcp ? NULL : lc->dir, &c, d)) != 0) return rc;
  for (int32_t r = 0; r < lc->n; r++) {
    if (!o->taps) c.nodes[r].tap[0] = '\0'; /* a tap is bound only when asked for */
    snprintf(lc->taps[r], sizeof lc->taps[r], "%s", c.nodes[r].tap);
  }
  c.plaintext_tcp = o->tcp && o->plaintext_tcp;
  if (o->tcp && !o->plaintext_tcp && (rc = make_keys(lc, &c, o->taps, d)) != 0) {
    sc_cluster_free(&c);
    return rc;
  }
  json_t *coll = json_array();
  for (int32_t r = 0; r < lc->n; r++) json_array_append_new(coll, json_string(c.nodes[lc->n + r].endpoint));
  c.num_nodes = lc->n;
  c.pcp = o->pcp;
  c.dcp = o->dcp;
  c.tp = o->tp;
  if (o->heartbeat_ms) c.heartbeat_ms = o->heartbeat_ms;
  if (o->heartbeat_timeout_ms) c.heartbeat_timeout_ms = o->heartbeat_timeout_ms;
  snprintf(c.listen, sizeof c.listen, "%s", lc->listen);
  if (o->listen_key_file)
    snprintf(c.listen_key_file, sizeof c.listen_key_file, "%s", o->listen_key_file);
  if (o->client_keys_file)
    snprintf(c.client_keys_file, sizeof c.client_keys_file, "%s", o->client_keys_file);
  if (o->http && (rc = choose_http_port(o->http, lc->http, sizeof lc->http, d)) != 0) {
    sc_cluster_free(&c);
    json_decref(coll);
    return rc;
  }
  snprintf(c.http, sizeof c.http, "%s", lc->http);
  if (o->http_api_key_file)
    snprintf(c.http_api_key_file, sizeof c.http_api_key_file, "%s", o->http_api_key_file);
  if (o->http_timeout_s) c.http_timeout_s = o->http_timeout_s;
  char *text = NULL;
  rc = sc_cluster_to_json(&c, &text);
  sc_cluster_free(&c);
  json_t *root = rc == 0 ? json_loads(text, 0, NULL) : NULL;
  free(text);
  if (root == NULL) {
    json_decref(coll);
    return sc_fail(d, SC_ENOMEM, "cannot build the cluster file");
  }
  json_t *nodes = json_object_get(root, "nodes");
  for (size_t i = 0; i < json_array_size(nodes); i++) {
    json_t *nd = json_array_get(nodes, i);
    const json_int_t r = json_integer_value(json_object_get(nd, "rank"));
    json_object_set(nd, "coll", json_array_get(coll, (size_t)r));
  }
  json_decref(coll);
  json_t *p = json_object();
  if (o->model_file) {
    /* absolute: the cluster file's folder is not the caller's working directory */
    char abs[PATH_MAX];
    json_object_set_new(p, "model_file",
                        json_string(realpath(o->model_file, abs) ? abs : o->model_file));
  }
  if (o->model_dir) {
    char abs[PATH_MAX];
    json_object_set_new(p, "model_dir", json_string(realpath(o->model_dir, abs) ? abs : o->model_dir));
  }
  if (o->tokenizer) {
    char abs[PATH_MAX];
    json_object_set_new(p, "tokenizer",
                        json_string(realpath(o->tokenizer, abs) ? abs : o->tokenizer));
  }
  if (o->token_budget) json_object_set_new(p, "token_budget", json_integer(o->token_budget));
  if (o->num_blocks) json_object_set_new(p, "num_blocks", json_integer(o->num_blocks));
  if (o->block_size) json_object_set_new(p, "block_size", json_integer(o->block_size));
  if (o->deadline_ms) json_object_set_new(p, "deadline_ms", json_integer(o->deadline_ms));
  if (o->max_model_len) json_object_set_new(p, "max_model_len", json_integer(o->max_model_len));
  if (o->cuda) json_object_set_new(p, "device", json_string("cuda"));
  if (o->cuda && lc->n > lc->gpus) /* (under MPS their kernels run at once: start_mps) */
    json_object_set_new(p, "ranks_per_gpu", json_integer((lc->n + lc->gpus - 1) / lc->gpus));
  if (o->nccl) json_object_set_new(p, "collectives", json_string("nccl"));
  if (o->ipc) json_object_set_new(p, "collectives", json_string("ipc"));
  if (o->profile) json_object_set_new(p, "profile", json_true());
  if (o->no_cuda_graphs) json_object_set_new(p, "cuda_graphs", json_false());
  if (o->overlap) json_object_set_new(p, "overlap", json_string(o->overlap));
  if (o->kv_format) json_object_set_new(p, "kv_format", json_string(o->kv_format));
  if (o->gemm_tf32) json_object_set_new(p, "gemm_precision", json_string("tf32"));
  if (o->index_format) json_object_set_new(p, "index_format", json_string(o->index_format));
  if (o->rejoin_wait_ms)
    json_object_set_new(p, "rejoin_wait_ms", json_integer(o->rejoin_wait_ms));
  if (o->step_retries) json_object_set_new(p, "step_retries", json_integer(o->step_retries));
  if (o->num_inject) {
    json_t *inj = json_array();
    for (int32_t i = 0; i < o->num_inject; i++) json_array_append_new(inj, json_string(o->inject[i]));
    json_object_set_new(p, "inject", inj);
  }
  json_object_set_new(root, "pipeline", p);
  snprintf(lc->path, sizeof lc->path, "%s/cluster.json", lc->dir);
  rc = json_dump_file(root, lc->path, JSON_INDENT(1)) == 0
           ? 0
           : sc_fail(d, SC_EIO, "cannot write %s", lc->path);
  json_decref(root);
  return rc;
}

/* Starts node r as a child (`sparsecp node --cluster FILE --rank r`). Its environment
 * is built before the fork (child_env.h: launch forks restarts while its threads run). */
static int spawn(sc_local_cluster *lc, int32_t r, sc_diag *d) {
  char dev[16];
  snprintf(dev, sizeof dev, "%d", (int)(r % lc->gpus));
  const char *const names[] = {"SPARSECP_LOG", "CUDA_VISIBLE_DEVICES", "NCCL_NVLS_ENABLE",
                               "CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY"};
  const char *const values[] = {
      lc->log_level,
      lc->cuda ? dev : NULL,
      /* NVLink multicast stays off on these hosts (shared/GPU.md) */
      lc->cuda && lc->nccl ? "0" : NULL,
      !lc->cuda ? NULL : lc->mps ? sc_mps_pipe_dir(lc->mps) : lc->no_mps[0] ? lc->no_mps : NULL,
      lc->cuda && lc->mps ? sc_mps_log_dir(lc->mps) : NULL,
  };
  char **envp = sc_child_env_new(names, values, sizeof names / sizeof *names);
  if (envp == NULL) return sc_fail(d, SC_ENOMEM, "out of memory");
  char rank[16];
  snprintf(rank, sizeof rank, "%d", (int)r);
  char *args[] = {"sparsecp", "node", "--cluster", lc->path, "--rank", rank,
                  lc->events ? "--events" : NULL, NULL};
  const pid_t pid = fork();
  if (pid < 0) {
    const int e = errno;
    free(envp);
    return sc_fail(d, SC_ESYS, "fork: %s", strerror(e));
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != lc->parent) _exit(1);
    if (lc->quiet) {
      const int fd = open("/dev/null", O_WRONLY);
      if (fd >= 0) dup2(fd, 2);
    }
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    execve(lc->exe, args, envp);
    _exit(127);
  }
  free(envp);
  lc->ch[r] = (child){.pid = pid, .alive = true};
  return 0;
}

/* Ranks that share a GPU meet at every collective, and without MPS each meeting waits
 * for the GPU to switch among their contexts (mps_daemon.h has the numbers). A daemon
 * the environment names (CUDA_MPS_PIPE_DIRECTORY, or one at the default folder) is the
 * user's, and the nodes inherit it, unless it does not answer. Otherwise the cluster
 * starts its own; where it cannot, mode "on" fails and "auto" warns and runs without.
 * Mode "off" keeps the nodes from any daemon. */
static int start_mps(sc_local_cluster *lc, const char *mode, sc_diag *d) {
  if (lc->cuda && strcmp(mode, "off") == 0) {
    /* a folder where no daemon listens: a client that cannot reach one runs without
     * MPS, whatever daemon the environment names */
    if (path_in_dir(lc, "no-mps", lc->no_mps, sizeof lc->no_mps, d)) return SC_EINVAL;
    if (mkdir(lc->no_mps, 0700) != 0)
      return sc_fail(d, SC_ESYS, "cannot create %s: %s", lc->no_mps, strerror(errno));
    return 0;
  }
  if (!lc->cuda || lc->n <= lc->gpus) return 0;
  /* The user's daemon, unless the control program says none answers there (a control
   * socket can outlive its daemon); when it cannot be asked, it is taken at its word */
  const char *env = getenv("CUDA_MPS_PIPE_DIRECTORY");
  const char *theirs = env && *env                                      ? env
                       : access("/tmp/nvidia-mps/control", F_OK) == 0 ? "/tmp/nvidia-mps"
                                                                      : NULL;
  const int probe = theirs ? sc_mps_probe(theirs) : SC_ENOENT;
  if (theirs && probe != SC_EIO) {
    lc->under_mps = true;
    return 0;
  }
  if (theirs)
    sc_log_write(SC_LOG_INFO, "cluster",
                 "no MPS daemon answers at %s: starting the cluster's own", theirs);
  sc_diag why = {0};
  const int rc = sc_mps_start(lc->dir, &lc->mps, &why);
  if (rc == 0) {
    lc->under_mps = true;
    return 0;
  }
  if (strcmp(mode, "on") == 0)
    return sc_fail(d, rc, "--mps on: %s", sc_diag_message(&why));
  sc_log_write(SC_LOG_WARN, "cluster",
               "%d ranks share %d GPU%s without MPS (%s): every collective waits for the GPU "
               "to switch among their contexts, several times slower (--mps off says this "
               "is meant)",
               (int)lc->n, (int)lc->gpus, lc->gpus == 1 ? "" : "s", sc_diag_message(&why));
  return 0;
}

/* The injections, parsed as the nodes will parse them: one they refuse would end every
 * node at start-up, and a cluster whose caller waits for it would never serve. */
static int check_injections(const sc_local_cluster_opts *o, int32_t ranks, sc_diag *d) {
  sc_faults probe = {0};
  for (int32_t i = 0; i < o->num_inject; i++)
    if (sc_faults_parse(&probe, o->inject[i], ranks, d) != 0) return SC_EINVAL;
  return 0;
}

int sc_local_cluster_start(const sc_local_cluster_opts *o, sc_local_cluster **out,
                           sc_diag *d) {
  *out = NULL;
  if (check_injections(o, o->pcp * o->tp, d)) return SC_EINVAL;
  sc_local_cluster *lc = calloc(1, sizeof *lc);
  if (lc == NULL) return sc_fail(d, SC_ENOMEM, "out of memory");
  lc->n = o->pcp * o->tp;
  lc->gpus = o->gpus > 0 ? o->gpus : 1; /* (the cluster file says how many share one) */
  const char *tmp = getenv("TMPDIR");
  snprintf(lc->dir, sizeof lc->dir, "%s/sparsecp-run-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  lc->ch = calloc((size_t)lc->n, sizeof *lc->ch);
  lc->taps = calloc((size_t)lc->n, sizeof *lc->taps);
  if (lc->ch == NULL || lc->taps == NULL || mkdtemp(lc->dir) == NULL) {
    free(lc->ch);
    free(lc->taps);
    free(lc);
    return sc_fail(d, SC_EIO, "cannot create a temporary folder: %s", strerror(errno));
  }
  /* absolute: the cluster file names files in it, and the nodes read them from its
   * folder (a relative $TMPDIR would be counted twice) */
  char abs_dir[PATH_MAX];
  if (realpath(lc->dir, abs_dir) != NULL && strlen(abs_dir) < sizeof lc->dir)
    memcpy(lc->dir, abs_dir, strlen(abs_dir) + 1);
  int rc = write_cluster_file(lc, o, d);
  char exe[PATH_MAX];
  ssize_t el = -1;
  if (rc == 0 && o->exe) el = snprintf(exe, sizeof exe, "%s", o->exe);
  else if (rc == 0) el = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (rc == 0 && (el <= 0 || el >= (ssize_t)sizeof exe - 1))
    rc = sc_fail(d, SC_EIO, "cannot find the sparsecp executable");
  if (rc) {
    rm_dir(lc->dir);
    free(lc->ch);
    free(lc->taps);
    free(lc);
    return rc;
  }
  exe[el] = '\0';
  memcpy(lc->exe, exe, (size_t)el + 1);
  lc->parent = getpid();
  lc->log_level = o->log_level;
  lc->quiet = o->quiet;
  lc->events = o->events;
  lc->cuda = o->cuda;
  lc->nccl = o->nccl;
  /* An ignored SIGCHLD (inherited from whoever started us) would have the kernel reap
   * the nodes itself: waitpid would never see them end, a dead node would go unreported
   * and stopping would wait for nodes that are long gone. */
  signal(SIGCHLD, SIG_DFL);
  rc = start_mps(lc, o->mps ? o->mps : "auto", d);
  for (int32_t r = 0; r < lc->n && rc == 0; r++) rc = spawn(lc, r, d);
  if (rc) {
    sc_local_cluster_stop(lc);
    return rc;
  }
  *out = lc;
  return 0;
}

int sc_local_cluster_clear_injections(sc_local_cluster *c, sc_diag *d) {
  json_error_t err;
  json_t *root = json_load_file(c->path, 0, &err);
  if (root == NULL) return sc_fail(d, SC_EIO, "cannot read %s: %s", c->path, err.text);
  json_t *p = json_object_get(root, "pipeline");
  int rc = 0;
  if (p && json_object_get(p, "inject")) {
    json_object_del(p, "inject");
    /* written aside, then renamed: a node starting meanwhile reads one file or the other */
    char tmp[sizeof c->path + 8];
    snprintf(tmp, sizeof tmp, "%s.new", c->path);
    rc = json_dump_file(root, tmp, JSON_INDENT(1)) == 0 && rename(tmp, c->path) == 0
             ? 0
             : sc_fail(d, SC_EIO, "cannot write %s", c->path);
  }
  json_decref(root);
  return rc;
}

int sc_local_cluster_restart(sc_local_cluster *c, int32_t rank, sc_diag *d) {
  if (rank < 0 || rank >= c->n || c->ch[rank].alive)
    return sc_fail(d, SC_EINVAL, "node %d is not a node that ended", (int)rank);
  return spawn(c, rank, d);
}

bool sc_local_cluster_alive(const sc_local_cluster *c, int32_t rank) {
  return rank >= 0 && rank < c->n && c->ch[rank].alive;
}

pid_t sc_local_cluster_pid(const sc_local_cluster *c, int32_t rank) {
  return rank >= 0 && rank < c->n ? c->ch[rank].pid : -1;
}

/* Whether child ch has ended (reaped now, into *status, or already gone: -1, when
 * something else reaped it). */
static bool child_ended(child *ch, int *status) {
  const pid_t w = waitpid(ch->pid, status, WNOHANG);
  if (w == ch->pid) return true;
  if (w < 0 && errno == ECHILD) {
    *status = -1;
    return true;
  }
  return false;
}

int sc_local_cluster_reap(sc_local_cluster *c, sc_local_exit *out, int max) {
  int n = 0;
  int status;
  for (int32_t r = 0; r < c->n && n < max; r++) {
    if (!c->ch[r].alive || !child_ended(&c->ch[r], &status)) continue;
    c->ch[r].alive = false;
    out[n] = (sc_local_exit){.rank = r, .pid = c->ch[r].pid, .value = -1};
    if (status != -1) {
      out[n].signaled = WIFSIGNALED(status);
      out[n].value = WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status);
    }
    n++;
  }
  return n;
}

void sc_local_exit_describe(const sc_local_exit *e, char *out, size_t len) {
  if (e->value < 0)
    snprintf(out, len, "node %d (pid %d) ended (its status was not ours to read)",
             (int)e->rank, (int)e->pid);
  else
    snprintf(out, len, "node %d (pid %d) %s %d", (int)e->rank, (int)e->pid,
             e->signaled ? "was killed by signal" : "exited with status", e->value);
}

int sc_local_cluster_poll(sc_local_cluster *c, char *msg, size_t len) {
  sc_local_exit ex[8];
  int total = 0, n;
  while ((n = sc_local_cluster_reap(c, ex, 8)) > 0) {
    if (total == 0 && msg) sc_local_exit_describe(&ex[0], msg, len);
    total += n;
  }
  return total;
}

/* Reaps what ended (each to report, when given) and returns how many still run. */
static int32_t reap(sc_local_cluster *c, sc_local_exit_fn report, void *ud) {
  sc_local_exit ex[16];
  int k;
  while ((k = sc_local_cluster_reap(c, ex, 16)) > 0)
    for (int i = 0; report && i < k; i++) report(ud, &ex[i]);
  int32_t alive = 0;
  for (int32_t r = 0; r < c->n; r++) alive += c->ch[r].alive;
  return alive;
}

void sc_local_cluster_stop(sc_local_cluster *c) { sc_local_cluster_stop_report(c, NULL, NULL); }

int32_t sc_local_cluster_wait(sc_local_cluster *c, int64_t timeout_ms, sc_local_exit_fn report,
                              void *ud) {
  const uint64_t until = sc_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
  int32_t alive;
  while ((alive = reap(c, report, ud)) > 0 && sc_now_ns() < until) usleep(10000);
  return alive;
}

void sc_local_cluster_mps_check(sc_local_cluster *c) {
  sc_diag why = {0};
  if (c->mps == NULL || c->mps_ended || sc_mps_alive(c->mps, &why)) return;
  c->mps_ended = true;
  sc_log_write(SC_LOG_WARN, "cluster",
               "the cluster's MPS daemon %s: nodes started from now on run without MPS",
               sc_diag_message(&why));
}

bool sc_local_cluster_mps_shared(const sc_local_cluster *c, int32_t rank) {
  return c->under_mps && rank >= 0 && rank < c->n && (rank >= c->gpus || rank + c->gpus < c->n);
}

int32_t sc_local_cluster_kill_gpu_peers(sc_local_cluster *c, int32_t rank, int sig) {
  int32_t n = 0;
  for (int32_t r = 0; r < c->n; r++)
    if (r != rank && r % c->gpus == rank % c->gpus && c->ch[r].alive) {
      if (sig) kill(c->ch[r].pid, sig);
      n++;
    }
  return n;
}

void sc_local_cluster_kill(sc_local_cluster *c, int sig) {
  for (int32_t r = 0; r < c->n; r++)
    if (c->ch[r].alive) kill(c->ch[r].pid, sig);
}

void sc_local_cluster_stop_report(sc_local_cluster *c, sc_local_exit_fn report, void *ud) {
  if (c == NULL) return;
  /* The head first: it tells the others to shut down, so they leave in order instead of
   * reporting each other DOWN. Whatever is still running a second later gets SIGTERM,
   * and three seconds after that SIGKILL. */
  if (c->ch[0].alive) kill(c->ch[0].pid, SIGTERM);
  if (sc_local_cluster_wait(c, 1000, report, ud) > 0) {
    sc_local_cluster_kill(c, SIGTERM);
    while (sc_local_cluster_wait(c, 3000, report, ud) > 0) sc_local_cluster_kill(c, SIGKILL);
  }
  sc_mps_stop(c->mps);
  rm_dir(c->dir);
  free(c->ch);
  free(c->taps);
  free(c);
}

/* `--NAME VALUE` for an integer in [lo, hi] into *dst. */
static int int_opt(const char *cmd, const char *name, const char *arg, int64_t lo, int64_t hi,
                   int32_t *dst) {
  int64_t v;
  if (!sc_cli_int(cmd, name, arg, lo, hi, &v)) return SC_EINVAL;
  *dst = (int32_t)v;
  return 1;
}

/* An option with two values: *second says whether arg is b. 1, or SC_EINVAL (said). */
static int pick_opt(const char *cmd, const char *name, const char *arg, const char *a,
                    const char *b, bool *second) {
  if (strcmp(arg, a) != 0 && strcmp(arg, b) != 0) {
    sc_cli_error(cmd, "%s must be %s or %s", name, a, b);
    return SC_EINVAL;
  }
  *second = strcmp(arg, b) == 0;
  return 1;
}

/* An option of auto, on or off: *dst = arg. 1, or SC_EINVAL (said). */
static int auto_opt(const char *cmd, const char *name, const char *arg, const char **dst) {
  if (strcmp(arg, "auto") != 0 && strcmp(arg, "on") != 0 && strcmp(arg, "off") != 0) {
    sc_cli_error(cmd, "%s must be auto, on or off, not '%s'", name, arg);
    return SC_EINVAL;
  }
  *dst = arg;
  return 1;
}

int sc_local_cluster_parse_opt(const char *cmd, int ch, const char *arg,
                               sc_local_cluster_opts *o) {
  switch (ch) {
  case SC_LCOPT_PCP: return int_opt(cmd, "--pcp", arg, 1, 64, &o->pcp);
  case SC_LCOPT_DCP: return int_opt(cmd, "--dcp", arg, 1, 64, &o->dcp);
  case SC_LCOPT_TP: return int_opt(cmd, "--tp", arg, 1, 64, &o->tp);
  case SC_LCOPT_GPUS: return int_opt(cmd, "--gpus", arg, 1, 64, &o->gpus);
  case SC_LCOPT_TOKEN_BUDGET: return int_opt(cmd, "--token-budget", arg, 1, 1 << 24, &o->token_budget);
  case SC_LCOPT_NUM_BLOCKS: return int_opt(cmd, "--num-blocks", arg, 1, 1 << 24, &o->num_blocks);
  case SC_LCOPT_DEVICE: {
    const int rc = pick_opt(cmd, "--device", arg, "cpu", "cuda", &o->cuda);
#ifndef SC_HAVE_CUDA
    if (rc == 1 && o->cuda) {
      sc_cli_error(cmd, "--device cuda: this sparsecp was built without CUDA");
      return SC_EINVAL;
    }
#endif
    return rc;
  }
  case SC_LCOPT_COLLECTIVES:
    if (strcmp(arg, "ipc") == 0) { /* (collectives/backend_ipc.h) */
      o->nccl = false, o->ipc = true;
      return 1;
    }
    o->ipc = false;
    return pick_opt(cmd, "--collectives", arg, "host", "nccl", &o->nccl);
  case SC_LCOPT_TRANSPORT: return pick_opt(cmd, "--transport", arg, "ipc", "tcp", &o->tcp);
  case SC_LCOPT_MODEL: o->model_file = arg; return 1;
  case SC_LCOPT_MODEL_DIR: o->model_dir = arg; return 1;
  case SC_LCOPT_PROFILE: o->profile = true; return 1;
  case SC_LCOPT_NO_CUDA_GRAPHS: o->no_cuda_graphs = true; return 1;
  case SC_LCOPT_OVERLAP: return auto_opt(cmd, "--overlap", arg, &o->overlap);
  case SC_LCOPT_MPS: return auto_opt(cmd, "--mps", arg, &o->mps);
  /* (the values here; whether they go together, and with the model, in validate) */
  case SC_LCOPT_KV_FORMAT:
    if (strcmp(arg, "f32") != 0 && strcmp(arg, "bf16") != 0 && strcmp(arg, "fp8_ds_mla") != 0) {
      sc_cli_error(cmd, "--kv-format must be f32, bf16 or fp8_ds_mla");
      return SC_EINVAL;
    }
    o->kv_format = arg;
    return 1;
  case SC_LCOPT_GEMM_PRECISION:
    return pick_opt(cmd, "--gemm-precision", arg, "f32", "tf32", &o->gemm_tf32);
  case SC_LCOPT_INDEX_FORMAT: {
    bool fp8;
    const int rc = pick_opt(cmd, "--index-format", arg, "kv", "fp8", &fp8);
    if (rc == 1) o->index_format = arg;
    return rc;
  }
  case SC_LCOPT_INJECT:
    if (o->num_inject == SC_LOCAL_CLUSTER_MAX_INJECT) {
      sc_cli_error(cmd, "at most %d --inject options", SC_LOCAL_CLUSTER_MAX_INJECT);
      return SC_EINVAL;
    }
    o->inject[o->num_inject++] = arg;
    return 1;
  default: return 0;
  }
}

int sc_local_cluster_validate(const char *cmd, const sc_local_cluster_opts *o,
                              sc_model_config *model) {
  sc_model_config m;
  sc_model_config_default(&m);
  sc_diag d = {0};
  if (o->model_file && o->model_dir) {
    sc_cli_error(cmd, "--model and --model-dir exclude each other (a model directory has "
                      "its own config.json)");
    return SC_EINVAL;
  }
  if ((o->model_file && sc_model_config_load(o->model_file, &m, &d)) ||
      (o->model_dir && sc_model_config_load_dir(o->model_dir, &m, &d))) {
    sc_cli_error(cmd, "%s", sc_diag_message(&d));
    return SC_EINVAL;
  }
  sc_plan_config pc;
  sc_model_plan_config_default(&pc);
  pc.pcp = o->pcp, pc.dcp = o->dcp, pc.tp = o->tp;
  sc_model_config_to_plan(&m, &pc);
  sc_kfmt kv;
  bool index_fp8;
  if (sc_plan_config_validate(&pc, &d) || sc_model_config_check_tp(&m, pc.tp, &d) ||
      sc_pipeline_kv_formats(o->kv_format, o->index_format, &m, &kv, &index_fp8, &d)) {
    sc_cli_error(cmd, "%s", sc_diag_message(&d));
    return SC_EINVAL;
  }
  const int32_t ranks = o->pcp * o->tp;
  if (ranks > SC_LOCAL_CLUSTER_MAX_NODES) {
    sc_cli_error(cmd, "a local cluster has at most %d nodes (--pcp %d x --tp %d is %d)",
                 SC_LOCAL_CLUSTER_MAX_NODES, (int)o->pcp, (int)o->tp, (int)ranks);
    return SC_EINVAL;
  }
  if (o->gemm_tf32 && !o->cuda) {
    sc_cli_error(cmd, "--gemm-precision tf32 needs --device cuda (the CPU's gemms are the "
                      "f32 reference)");
    return SC_EINVAL;
  }
  if (o->ipc && (!o->cuda || o->gpus > 1)) {
    sc_cli_error(cmd, "--collectives ipc needs --device cuda and every rank on one GPU "
                      "(--gpus 1)");
    return SC_EINVAL;
  }
  if (o->nccl && (!o->cuda || o->gpus < ranks)) {
    sc_cli_error(cmd, "--collectives nccl needs --device cuda and one GPU per rank "
                      "(--gpus >= %d): NCCL refuses two ranks on one GPU",
                 ranks);
    return SC_EINVAL;
  }
  /* the nodes' own parser, so that what passes here cannot fail in every child */
  sc_diag why = {0};
  if (check_injections(o, ranks, &why)) {
    sc_cli_error(cmd, "%s", sc_diag_message(&why));
    return SC_EINVAL;
  }
  if (model) *model = m;
  return 0;
}
