/* cmd_run.c - `sparsecp run`: the main job (DESIGN.md §7). Starts a local cluster
 * (default PCP2 x DCP2 on the CPU), submits a request stream through the client API,
 * shows progress, and ends with a summary: requests, prompt and generated tokens, time to
 * first token and time per output token (p50, p99), tokens per second. --verify runs the
 * same requests on a single-rank cluster and checks SPEC.md §8 equivalence of the
 * generated tokens (exit 1 on a mismatch); --inject demonstrates the protection against
 * desynchronised collectives and lost nodes. */
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/index.h"
#include "base/jsonw.h"
#include "client/client.h"
#include "model/model_config.h"
#include "tools/bench.h"
#include "tools/cli.h"
#include "tools/local_cluster.h"
#include "tools/requests_file.h"

#define MAX_CLIENTS 64
/* A greedy token may differ from the reference only where the reference's top-2 margin
 * is within what the arithmetic can move a logit: fp32 reordering (SPEC.md §8: relative
 * 1e-4 on logits of magnitude O(10) for the synthetic model), bf16 tensor core attention
 * (relative 1e-2). Such positions are reported as ties. A run on the GPU is checked
 * twice: against one rank on the same GPU with the same kernels, where only the layout
 * differs (fp32 reordering with f32 KV rows; with bf16 rows DCP's shards round their
 * partial softmax apart), and against the CPU's fp32 reference. */
#define TIE_MARGIN_CPU 1e-3
#define TIE_MARGIN_CUDA 1e-1

static volatile sig_atomic_t g_interrupted;
static void on_sigint(int sig) {
  (void)sig;
  g_interrupted = 1;
}

typedef struct req_result {
  uint64_t id;
  int32_t client;
  int32_t *tokens;
  float *margins;
  int32_t n;
  double t_submit, t_first, t_last;
  bool done, submitted;
  char finish_reason[16]; /* when done: "length", or "stop" (the model's end-of-sequence) */
  char error[512];
} req_result;

typedef struct run_opts {
  sc_local_cluster_opts cluster;
  int64_t timeout_s, clients;
  bool json, verify, progress;
} run_opts;

/* The result index of each submitted request, by (client, request id), so that a token
 * event finds its request in O(1) whatever --num-requests is. Request ids are per client
 * (client/client.c), hence the pair as the key. */
typedef struct req_key {
  int32_t client;
  uint64_t id;
} req_key;

static uint64_t req_hash(int32_t client, uint64_t id) {
  return id ^ (uint64_t)(uint32_t)client * 0x9E3779B97F4A7C15ull; /* client into every bit */
}
static uint64_t req_hash_at(const void *res, int32_t k) {
  const req_result *r = &((const req_result *)res)[k];
  return req_hash(r->client, r->id);
}
static bool req_is(const void *res, int32_t k, const void *key) {
  const req_result *r = &((const req_result *)res)[k];
  const req_key *q = key;
  return r->client == q->client && r->id == q->id;
}

/* The index of the request, or -1 (not ours: the warm-up, or an unknown id). */
static int32_t req_find(const sc_index *x, const req_result *res, int32_t client, uint64_t id) {
  const req_key key = {client, id};
  return sc_index_find(x, req_hash(client, id), req_is, res, &key);
}

static void free_results(req_result *r, int32_t n) {
  for (int32_t i = 0; r && i < n; i++) {
    free(r[i].tokens);
    free(r[i].margins);
  }
  free(r);
}

/* Runs one request stream on one cluster; fills res[] and wall time. Returns 0 when every
 * request finished, else 1 with the first failure in why (the run stops at the first
 * failure: a clear error beats a half-finished summary). */
static int run_stream(const run_opts *o, const sc_local_cluster_opts *co, const sc_requests *rq,
                      req_result *res, double *wall_s, double *elapsed_s, double *failed_at_s,
                      char *why, size_t why_len, const char *label) {
  sc_local_cluster *lc = NULL;
  sc_client *cls[MAX_CLIENTS] = {0}, *cl = NULL;
  const int32_t ncl = (int32_t)o->clients;
  sc_diag d = {0};
  int failed = 1;
  double t_stream = 0;
  sc_index idx = {0};
  if (sc_index_init(&idx, (size_t)rq->n) != 0) {
    snprintf(why, why_len, "out of memory");
    return 1;
  }
  if (sc_local_cluster_start(co, &lc, &d) != 0) {
    sc_index_free(&idx);
    snprintf(why, why_len, "cannot start the %s cluster: %s", label, sc_diag_message(&d));
    return 1;
  }
  for (int32_t k = 0; k < ncl; k++)
    if (sc_client_connect(&cls[k], sc_local_cluster_listen(lc), &d) != 0) {
      snprintf(why, why_len, "%s", sc_diag_message(&d));
      goto out;
    }
  cl = cls[0];
  /* Warm-up: one tiny request proves the whole pipeline is up before the clock starts.
   * Its limit: up to 180 s (a node dies sooner than that: poll reports it), since making
   * and loading weights takes time (examples/model-deep.json's 32 GB took 50-60 s on the
   * GPU machine, too close to the 60 s this was). */
  const int64_t ready_s = o->timeout_s < 180 ? o->timeout_s : 180;
  const double t_ready_limit = sc_now_s() + (double)ready_s;
  {
    const int32_t one = 1;
    const sc_client_request w = {.prompt = &one, .prompt_len = 1, .max_tokens = 1};
    uint64_t wid;
    sc_client_event ev;
    bool ready = false;
    if (sc_client_submit(cl, &w, &wid) == 0)
      while (!ready && sc_now_s() < t_ready_limit && !g_interrupted) {
        if (sc_local_cluster_poll(lc, why, why_len) > 0) goto out;
        if (sc_client_next(cl, 200, &ev) != 0 || ev.request_id != wid) continue;
        if (ev.kind == SC_CLIENT_ERROR) {
          snprintf(why, why_len, "the %s cluster failed its warm-up request: %s", label, ev.message);
          goto out;
        }
        ready = ev.kind == SC_CLIENT_DONE;
      }
    if (!ready) {
      if (g_interrupted)
        snprintf(why, why_len, "interrupted while the %s cluster was starting", label);
      else
        snprintf(why, why_len, "the %s cluster did not become ready within %lld s", label,
                 (long long)ready_s);
      goto out;
    }
  }
  const double t0 = sc_now_s(), deadline = t0 + (double)o->timeout_s;
  t_stream = t0;
  int32_t next = 0, finished = 0;
  double last_progress = 0;
  int64_t generated = 0;
  while (finished < rq->n) {
    const double now = sc_now_s();
    if (g_interrupted) {
      snprintf(why, why_len, "interrupted");
      goto out;
    }
    if (now > deadline) {
      snprintf(why, why_len, "%d of %d requests unfinished after %lld s", rq->n - finished,
               rq->n, (long long)o->timeout_s);
      goto out;
    }
    if (sc_local_cluster_poll(lc, why, why_len) > 0) {
      /* a node died: give the cluster a moment to report errors to us first (on any
       * client: requests go to them in turn) */
      sc_client_event ev;
      const double until = sc_now_s() + 5;
      bool reported = false;
      /* until an error, or a round of all clients that brought nothing (about 100 ms) */
      for (int32_t k = 0, quiet = 0; sc_now_s() < until && !reported && quiet < ncl;
           k = (k + 1) % ncl) {
        const int rc = sc_client_next(cls[k], 100 / ncl + 1, &ev);
        quiet = rc == SC_ETIMEDOUT ? quiet + 1 : 0;
        if (rc != 0) continue; /* (ev not filled) */
        reported = ev.kind == SC_CLIENT_ERROR;
        if (reported) {
          char died[256];
          snprintf(died, sizeof died, "%s", why);
          snprintf(why, why_len, "%s; the cluster reported: %s", died, ev.message);
        }
      }
      goto out;
    }
    while (next < rq->n && now - t0 >= (double)rq->v[next].arrive_ms / 1000.0) {
      const sc_run_request *q = &rq->v[next];
      const sc_client_request cr = {.prompt = q->prompt, .prompt_len = q->prompt_len,
                                    .max_tokens = q->max_tokens, .temperature = q->temperature,
                                    .seed = q->seed, .ignore_eos = q->ignore_eos};
      res[next].client = next % ncl;
      res[next].tokens = malloc(sizeof(int32_t) * (size_t)q->max_tokens);
      res[next].margins = malloc(sizeof(float) * (size_t)q->max_tokens);
      const int rc_submit = !res[next].tokens || !res[next].margins
                                ? SC_ENOMEM
                                : sc_client_submit(cls[res[next].client], &cr, &res[next].id);
      if (rc_submit != 0) {
        snprintf(why, why_len, "cannot submit request %d: %s", next, sc_strerror(rc_submit));
        goto out;
      }
      res[next].submitted = true;
      res[next].t_submit = sc_now_s();
      if (sc_index_put(&idx, req_hash_at(res, next), next, req_hash_at, res) != 0) {
        snprintf(why, why_len, "out of memory");
        goto out;
      }
      next++;
    }
    /* every client in turn without waiting; a short sleep only when all were idle */
    sc_client_event ev;
    int rc = SC_ETIMEDOUT;
    int32_t from = -1;
    for (int32_t c = 0; c < ncl && rc != 0; c++)
      if ((rc = sc_client_next(cls[c], 0, &ev)) == 0) from = c;
    if (rc != 0) usleep(1000);
    if (rc == 0) {
      const int32_t k = req_find(&idx, res, from, ev.request_id);
      if (k < 0) {
        if (ev.kind == SC_CLIENT_ERROR) {
          snprintf(why, why_len, "%s", ev.message);
          goto out;
        }
        continue;
      }
      req_result *r = &res[k];
      const double t = sc_now_s();
      if (ev.kind == SC_CLIENT_TOKENS) {
        for (int32_t i = 0; i < ev.n && r->n < rq->v[k].max_tokens; i++) {
          r->tokens[r->n] = ev.tokens[i];
          r->margins[r->n] = ev.margins ? ev.margins[i] : INFINITY;
          r->n++;
          generated++;
        }
        if (r->t_first == 0) r->t_first = t;
        r->t_last = t;
      } else if (ev.kind == SC_CLIENT_DONE) {
        r->done = true;
        snprintf(r->finish_reason, sizeof r->finish_reason, "%s",
                 ev.finish_reason ? ev.finish_reason : "");
        finished++;
        if (o->progress && !isatty(2))
          fprintf(stderr, "[%s] request %d done: %d prompt + %d generated tokens (%d/%d)\n",
                  label, k, rq->v[k].prompt_len, r->n, finished, rq->n);
      } else {
        snprintf(r->error, sizeof r->error, "%s (%s)", ev.message, sc_errname(ev.code));
        snprintf(why, why_len, "request %d failed: %s", k, r->error);
        goto out;
      }
    }
    if (o->progress && isatty(2) && sc_now_s() - last_progress > 0.25) {
      last_progress = sc_now_s();
      fprintf(stderr, "\r[%s] %d/%d requests done, %lld tokens generated, %.1f s   ", label,
              finished, rq->n, (long long)generated, last_progress - t0);
    }
  }
  if (o->progress && isatty(2)) fprintf(stderr, "\n");
  *wall_s = sc_now_s() - t0;
  failed = 0;
out:
  /* when the first failure reached us, from the first submission (the fault tests'
   * bound on how fast a broken step ends); before the cluster is stopped */
  *failed_at_s = failed && t_stream > 0 ? sc_now_s() - t_stream : 0;
  for (int32_t k = 0; k < ncl; k++) sc_client_close(cls[k]);
  sc_local_cluster_stop(lc);
  sc_index_free(&idx);
  /* from the first submission until every node is gone: the bound the fault tests check */
  *elapsed_s = t_stream > 0 ? sc_now_s() - t_stream : 0;
  return failed;
}

typedef struct summary {
  int32_t requests;
  int64_t prompt_tokens, generated;
  double ttft_p50, ttft_p99, tpot_p50, tpot_p99, tok_per_s, wall_s;
} summary;

static void summarize(const sc_requests *rq, const req_result *res, double wall, summary *s) {
  memset(s, 0, sizeof *s);
  double *ttft = calloc((size_t)rq->n + 1, sizeof *ttft), *tpot = calloc((size_t)rq->n + 1, sizeof *tpot);
  int nt = 0, np = 0;
  for (int32_t i = 0; i < rq->n; i++) {
    s->requests++;
    s->prompt_tokens += rq->v[i].prompt_len;
    s->generated += res[i].n;
    if (ttft && res[i].n > 0) ttft[nt++] = (res[i].t_first - res[i].t_submit) * 1e3;
    if (tpot && res[i].n > 1) tpot[np++] = (res[i].t_last - res[i].t_first) * 1e3 / (res[i].n - 1);
  }
  s->ttft_p50 = ttft ? sc_bench_percentile(ttft, nt, 50) : NAN;
  s->ttft_p99 = ttft ? sc_bench_percentile(ttft, nt, 99) : NAN;
  s->tpot_p50 = tpot ? sc_bench_percentile(tpot, np, 50) : NAN;
  s->tpot_p99 = tpot ? sc_bench_percentile(tpot, np, 99) : NAN;
  s->wall_s = wall;
  s->tok_per_s = wall > 0 ? (double)s->generated / wall : 0;
  free(ttft);
  free(tpot);
}

typedef struct verdict {
  int32_t checked, identical, ties, mismatches, sampled, sampled_differ;
  int32_t same_tokens; /* greedy requests whose tokens are the reference's, ties included */
  char first_mismatch[256];
} verdict;

/* A single-rank reference that --verify compares the run with. */
typedef struct reference {
  const char *label; /* for progress and the text summary */
  const char *key;   /* its JSON object */
  sc_local_cluster_opts cluster;
  double tie_margin;
  verdict v;
  bool verified;
} reference;

/* SPEC.md §8 on tokens: greedy requests must match the single-rank reference token for
 * token, except after a position where the reference's top-2 margin is a tie (reported,
 * never counted as a pass or a failure). Sampled requests are compared and reported. */
static void verify(const sc_requests *rq, const req_result *a, const req_result *ref,
                   double tie_margin, verdict *v) {
  memset(v, 0, sizeof *v);
  for (int32_t i = 0; i < rq->n; i++) {
    const bool greedy = rq->v[i].temperature == 0;
    int32_t k = 0;
    while (k < a[i].n && k < ref[i].n && a[i].tokens[k] == ref[i].tokens[k]) k++;
    const bool same = k == a[i].n && k == ref[i].n;
    if (!greedy) {
      v->sampled++;
      v->sampled_differ += !same;
      continue;
    }
    v->checked++;
    v->same_tokens += same;
    /* SPEC.md §8: positions where the reference's top-2 margin is within the tolerance
     * are ties even when both runs chose the same token: never counted as passes. */
    bool tie_seen = false;
    for (int32_t j = 0; j < k && !tie_seen; j++) tie_seen = ref[i].margins[j] <= tie_margin;
    if (same) {
      if (tie_seen) v->ties++;
      else v->identical++;
    } else if (k < ref[i].n && ref[i].margins[k] <= tie_margin) {
      v->ties++;
    } else {
      if (v->mismatches++ == 0)
        snprintf(v->first_mismatch, sizeof v->first_mismatch,
                 "request %d token %d: %d, the single-rank reference has %d (margin %.3g)", i, k,
                 k < a[i].n ? a[i].tokens[k] : -1, k < ref[i].n ? ref[i].tokens[k] : -1,
                 k < ref[i].n ? (double)ref[i].margins[k] : 0.0);
    }
  }
}

static void help(FILE *f) {
  fprintf(f,
          "usage: sparsecp run [--pcp P] [--dcp N] [--tp T] [--device cpu|cuda]\n"
          "                    [--collectives host|nccl|ipc] [--model FILE | --model-dir DIR]\n"
          "                    [--requests FILE.jsonl | --num-requests K] [--verify] [--json]\n"
          "                    [--inject KIND:RANK:STEP]\n"
          "                    [--transport ipc|tcp]\n"
          "                    [--token-budget N] [--seed S] [--timeout SECONDS] [--quiet]\n"
          "                    [--clients K] [--gpus K] [--num-blocks B] [--max-model-len L]\n"
          "                    [--deadline-ms MS] [--profile]\n"
          "                    [--kv-format f32|bf16|fp8_ds_mla]\n"
          "                    [--index-format kv|fp8] [--gemm-precision f32|tf32]\n"
          "                    [--no-cuda-graphs] [--overlap auto|on|off] [--mps auto|on|off]\n"
          "\n"
          "Starts a local cluster (default P = 2, N = 2, T = 1 on the CPU), submits the\n"
          "requests of FILE (default examples/requests.jsonl) or K random ones, shows\n"
          "progress, and prints a summary: requests, prompt and generated tokens, time to\n"
          "first token and time per output token (p50, p99), tokens per second.\n"
          "  --verify      also run a single-rank cluster on the same requests and check\n"
          "                that the generated tokens are the same (SPEC.md §8); exit 1 on a\n"
          "                mismatch; ties (top-2 logit margin <= %g) are reported. With\n"
          "                --device cuda, against one rank on the same GPU (margin %g with\n"
          "                --kv-format bf16 or fp8_ds_mla) and against the CPU's (margin %g)\n"
          "  --model-dir DIR  serve a DeepSeek-V3.2 checkpoint directory (Hugging Face\n"
          "                layout: config.json, safetensors shards, bf16 or fp8 weights;\n"
          "                docs/model.md) instead of the embedded synthetic model, on the\n"
          "                CPU or CUDA (fp8 weights stay fp8, expanded a layer at a time);\n"
          "                without --requests it runs 8 random requests that fit the model\n"
          "  --collectives host (default; device buffers staged through host memory) or\n"
          "                nccl (one rank per GPU, unique ids exchanged between the comm\n"
          "                actors; NCCL_NVLS_ENABLE=0 is set for the nodes) or ipc\n"
          "                (ranks sharing GPU 0 exchange on the device, under MPS)\n"
          "  --gpus K      with --device cuda: rank r runs on GPU r %% K (default 1: all\n"
          "                ranks share GPU 0, which needs --collectives host or ipc)\n"
          "  --inject F    fault injection: desync:RANK:STEP makes that rank's executor ask\n"
          "                for a wrongly shaped collective; kill:RANK:STEP kills that node;\n"
          "                badack:RANK:STEP has that rank acknowledge a wrong plan fingerprint;\n"
          "                noack:RANK:STEP loses that rank's acknowledgement;\n"
          "                devfault:RANK:STEP makes that rank's device fail;\n"
          "                nocomplete:RANK:STEP loses that rank's step_complete\n"
          "  --json        print the summary as one JSON object; its \"results\" give each\n"
          "                request's \"state\" (finished, failed with its \"error\", or\n"
          "                not_started when the run stopped before submitting it)\n"
          "  --num-blocks B, --max-model-len L   KV blocks per rank and the longest request\n"
          "                (prompt + output) for long-context runs\n"
          "  --deadline-ms MS  per-collective deadline (default 10000)\n"
          "  --clients K   spread the requests over K client connections (default 4)\n"
          "  --profile     every rank times each step's stages (dense, indexer, attention,\n"
          "                collectives, ...) and logs them (info); rank 0's are also in its\n"
          "                step_result on the taps (docs/pipeline.md, \"Profiling steps\")\n"
          "  --kv-format   the KV cache rows: f32 (default, the CPU reference's), bf16\n"
          "                (half the memory; on CUDA the attention then runs on the\n"
          "                tensor cores, docs/cuda.md) or fp8_ds_mla (DeepSeek-V3.2's: 512\n"
          "                e4m3 values with 4 scales and 64 bf16 rope values, 656 bytes;\n"
          "                kv_lora_rank 512 and rope_dim 64 only; its index keys in fp8);\n"
          "                the single-rank references of --verify use the same format\n"
          "  --index-format  the indexer's keys: kv (default: in the KV rows, in their\n"
          "                format) or fp8 (DeepSeek-V3.2's: e4m3 values and a power-of-two\n"
          "                scale a key, in rows of their own, and each query head rounded\n"
          "                alike; the reference of --verify uses the same; the only one,\n"
          "                and the default, of fp8_ds_mla rows)\n"
          "  --gemm-precision  with --device cuda: f32 (default: cuBLAS's exact f32\n"
          "                gemms on CUDA cores) or tf32 (on the tensor cores, ~1e-3\n"
          "                relative; the single-rank reference of --verify uses the same)\n"
          "  --no-cuda-graphs  launch every kernel of every step (by default, on CUDA, a\n"
          "                decode step of one rank, or of ranks with ipc collectives, is\n"
          "                recorded as a CUDA graph the first time its batch shape occurs\n"
          "                and replayed after: docs/cuda.md)\n"
          "  --overlap M   plan each step while the one before runs: auto (on CUDA, the\n"
          "                default), on (also the CPU), off; several ranks only with\n"
          "                host or ipc collectives (not NCCL); docs/pipeline.md\n"
          "  --mps M       ranks sharing a GPU run under an MPS server, one context for\n"
          "                them all (without, the GPU switches among their contexts at\n"
          "                every collective, several times slower): auto (the default)\n"
          "                uses the daemon the environment names, else starts one for\n"
          "                the cluster, else warns and runs without; on: the same, but\n"
          "                an error instead; off: none; docs/cuda.md\n"
          "  --quiet       no progress, and the nodes' logs are discarded\n"
          "Exit status: 0 all requests finished (and verified), 1 a failure, 2 bad usage.\n",
          (double)TIE_MARGIN_CPU, (double)TIE_MARGIN_CUDA, (double)TIE_MARGIN_CUDA);
}

int sc_cmd_run(int argc, char **argv) {
  static const struct option opts[] = {
      SC_LOCAL_CLUSTER_LONG_OPTIONS, /* --pcp --dcp --tp --device --collectives --gpus --model
                                        --token-budget --num-blocks --inject --transport */
      {"requests", required_argument, NULL, 'r'},      {"num-requests", required_argument, NULL, 'k'},
      {"verify", no_argument, NULL, 'v'},              {"json", no_argument, NULL, 'j'},
      {"seed", required_argument, NULL, 's'},          {"timeout", required_argument, NULL, 'T'},
      {"quiet", no_argument, NULL, 'q'},               {"clients", required_argument, NULL, 'c'},
      {"max-model-len", required_argument, NULL, 'M'}, {"deadline-ms", required_argument, NULL, 'L'},
      {"help", no_argument, NULL, 'h'},                {NULL, 0, NULL, 0}};
  run_opts o = {.timeout_s = 600, .progress = true, .clients = 4};
  sc_local_cluster_opts *co = &o.cluster;
  /* the nodes log warnings and errors unless SPARSECP_LOG asks for more */
  *co = (sc_local_cluster_opts){.pcp = 2, .dcp = 2, .tp = 1,
                                .log_level = getenv("SPARSECP_LOG") ? NULL : "warn"};
  const char *requests_path = NULL;
  int64_t v, num_random = 0, seed = 1;
  int ch;
  optind = 1;
  while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (ch) {
    case 'k': if (!sc_cli_int("run", "--num-requests", optarg, 1, 100000, &num_random)) return SC_EXIT_USAGE; break;
    case 's': if (!sc_cli_int("run", "--seed", optarg, 0, INT64_MAX, &seed)) return SC_EXIT_USAGE; break;
    case 'T': if (!sc_cli_int("run", "--timeout", optarg, 1, 86400, &o.timeout_s)) return SC_EXIT_USAGE; break;
    case 'c': if (!sc_cli_int("run", "--clients", optarg, 1, MAX_CLIENTS, &o.clients)) return SC_EXIT_USAGE; break;
    case 'M': if (!sc_cli_int("run", "--max-model-len", optarg, 2, 1 << 27, &v)) return SC_EXIT_USAGE; co->max_model_len = (int32_t)v; break;
    case 'L': if (!sc_cli_int("run", "--deadline-ms", optarg, 1, 3600000, &v)) return SC_EXIT_USAGE; co->deadline_ms = (int32_t)v; break;
    case 'r': requests_path = optarg; break;
    case 'v': o.verify = true; break;
    case 'j': o.json = true; break;
    case 'q': o.progress = false; co->quiet = true; break;
    case 'h': help(stdout); return SC_EXIT_OK;
    default: {
      const int r = sc_local_cluster_parse_opt("run", ch, optarg, co);
      if (r < 0) return SC_EXIT_USAGE;
      if (r == 0) {
        help(stderr);
        return SC_EXIT_USAGE;
      }
    }
    }
  }
  if (optind != argc || (requests_path && num_random)) {
    sc_cli_error("run", optind != argc ? "unexpected argument '%s'" : "give --requests or --num-requests, not both",
                 optind != argc ? argv[optind] : "");
    return SC_EXIT_USAGE;
  }
  /* The configuration is checked here, before any process starts. */
  sc_model_config model;
  if (sc_local_cluster_validate("run", co, &model)) return SC_EXIT_USAGE;
  sc_diag d = {0};

  sc_requests rq = {0};
  int rc = 0;
  /* The example stream is made for the embedded synthetic model: a checkpoint gets random
   * requests unless a file is given, and so does a model file the stream does not fit
   * (examples/model-small.json: ids beyond its vocabulary of 4096), with a note saying
   * why. A file given by hand that does not fit is an error. */
  if (co->model_dir && requests_path == NULL && num_random == 0) num_random = 8;
  if (num_random == 0) {
    char example[4096];
    const bool by_hand = requests_path != NULL;
    if (!by_hand) requests_path = sc_cli_example_path("requests.jsonl", example, sizeof example);
    char *text = NULL;
    size_t len = 0;
    if ((rc = sc_cli_read_text_file("run", requests_path, 64u << 20, &text, &len)) != 0)
      return rc;
    rc = sc_requests_parse(text, model.vocab, &rq, &d);
    free(text);
    if (rc && by_hand) {
      sc_cli_error("run", "%s: %s", requests_path, sc_diag_message(&d));
      return SC_EXIT_USAGE;
    }
    if (rc) {
      fprintf(stderr, "sparsecp run: %s does not fit this model (%s): 8 random requests instead\n",
              requests_path, sc_diag_message(&d));
      num_random = 8;
    }
  }
  if (num_random) {
    /* prompts of up to 256 tokens, and no request longer than the model allows */
    int32_t max_prompt = model.max_position - 16 - 1;
    max_prompt = max_prompt > 256 ? 256 : max_prompt < 1 ? 1 : max_prompt;
    rc = sc_requests_random((int32_t)num_random, max_prompt, 16, model.vocab, (uint64_t)seed, &rq);
  }
  if (rc) {
    sc_cli_error("run", "out of memory");
    return SC_EXIT_FAILURE;
  }

  sc_cli_catch_stop_signals(on_sigint);
  signal(SIGPIPE, SIG_IGN);

  req_result *res = calloc((size_t)rq.n, sizeof *res);
  char why[1024] = "", label[64];
  double wall = 0, elapsed = 0, failed_at = 0;
  snprintf(label, sizeof label, "P%d N%d T%d", co->pcp, co->dcp, co->tp);
  if (!o.json && o.progress)
    fprintf(stderr, "sparsecp run: %d requests on a local %s cluster (%d nodes, %s)\n", rq.n,
            label, co->pcp * co->tp, co->cuda ? "cuda" : "cpu");
  int failed = res ? run_stream(&o, co, &rq, res, &wall, &elapsed, &failed_at, why, sizeof why, label) : 1;
  /* The references: one rank on the same device first (on the GPU: the same kernels, so
   * only the layout differs), then, for a GPU run, the CPU's fp32. */
  reference refs[2];
  int nref = 0;
  /* (rounded rows: the DCP workspace's f32 copies and the cache's own rows take different
   * kernels on the GPU, whose sums differ in the last bits: docs/pipeline.md) */
  const bool kv_f32 = co->kv_format == NULL || strcmp(co->kv_format, "f32") == 0;
  if (o.verify) {
    sc_local_cluster_opts single = *co;
    single.pcp = single.dcp = single.tp = 1;
    single.num_inject = 0;
    single.nccl = single.ipc = false; /* (one rank runs no collectives) */
    refs[nref++] = (reference){.label = co->cuda ? "single rank, cuda" : "single rank",
                               .key = "verify", .cluster = single,
                               .tie_margin = co->cuda && !kv_f32 ? TIE_MARGIN_CUDA
                                                                 : TIE_MARGIN_CPU};
    if (co->cuda) {
      single.cuda = false;
      single.gemm_tf32 = false; /* (the CPU's gemms are f32) */
      refs[nref++] = (reference){.label = "CPU reference", .key = "verify_cpu",
                                 .cluster = single, .tie_margin = TIE_MARGIN_CUDA};
    }
  }
  for (int i = 0; i < nref && !failed; i++) {
    reference *rf = &refs[i];
    req_result *ref = calloc((size_t)rq.n, sizeof *ref);
    double ref_wall = 0, ref_elapsed = 0, ref_failed_at = 0;
    if (!o.json && o.progress) fprintf(stderr, "sparsecp run: the reference run (%s)\n", rf->label);
    failed = ref ? run_stream(&o, &rf->cluster, &rq, ref, &ref_wall, &ref_elapsed, &ref_failed_at,
                              why, sizeof why, "reference")
                 : 1;
    if (!failed) {
      verify(&rq, res, ref, rf->tie_margin, &rf->v);
      rf->verified = true;
    }
    free_results(ref, rq.n);
  }
  summary s;
  summarize(&rq, res, wall, &s);
  bool ok = !failed;
  for (int i = 0; i < nref; i++) ok = ok && (!refs[i].verified || refs[i].v.mismatches == 0);

  if (o.json) {
    sc_jsonw w;
    sc_jsonw_init(&w);
    sc_jsonw_obj_begin(&w);
    sc_jsonw_kv_bool(&w, "ok", ok);
    sc_jsonw_key(&w, "config");
    sc_jsonw_obj_begin(&w);
    sc_jsonw_kv_int(&w, "pcp", co->pcp);
    sc_jsonw_kv_int(&w, "dcp", co->dcp);
    sc_jsonw_kv_int(&w, "tp", co->tp);
    sc_jsonw_kv_str(&w, "device", co->cuda ? "cuda" : "cpu");
    sc_jsonw_kv_str(&w, "collectives", co->nccl ? "nccl" : co->ipc ? "ipc" : "host");
    sc_jsonw_obj_end(&w);
    sc_jsonw_kv_int(&w, "requests", s.requests);
    sc_jsonw_kv_int(&w, "prompt_tokens", s.prompt_tokens);
    sc_jsonw_kv_int(&w, "generated_tokens", s.generated);
    sc_jsonw_kv_double(&w, "ttft_ms_p50", s.ttft_p50);
    sc_jsonw_kv_double(&w, "ttft_ms_p99", s.ttft_p99);
    sc_jsonw_kv_double(&w, "tpot_ms_p50", s.tpot_p50);
    sc_jsonw_kv_double(&w, "tpot_ms_p99", s.tpot_p99);
    sc_jsonw_kv_double(&w, "tokens_per_s", s.tok_per_s);
    sc_jsonw_kv_double(&w, "wall_s", s.wall_s);
    sc_jsonw_kv_double(&w, "elapsed_s", elapsed);
    if (failed_at > 0) sc_jsonw_kv_double(&w, "failed_at_s", failed_at);
    if (why[0]) sc_jsonw_kv_str(&w, "error", why);
    for (int i = 0; i < nref; i++) {
      const verdict *vd = &refs[i].v;
      if (!refs[i].verified) continue;
      sc_jsonw_key(&w, refs[i].key);
      sc_jsonw_obj_begin(&w);
      sc_jsonw_kv_str(&w, "reference", refs[i].label);
      sc_jsonw_kv_double(&w, "tie_margin", refs[i].tie_margin);
      sc_jsonw_kv_int(&w, "checked", vd->checked);
      sc_jsonw_kv_int(&w, "identical", vd->identical);
      sc_jsonw_kv_int(&w, "ties", vd->ties);
      sc_jsonw_kv_int(&w, "same_tokens", vd->same_tokens);
      sc_jsonw_kv_int(&w, "mismatches", vd->mismatches);
      sc_jsonw_kv_int(&w, "sampled", vd->sampled);
      sc_jsonw_kv_int(&w, "sampled_differ", vd->sampled_differ);
      if (vd->mismatches) sc_jsonw_kv_str(&w, "first_mismatch", vd->first_mismatch);
      sc_jsonw_obj_end(&w);
    }
    sc_jsonw_key(&w, "results");
    sc_jsonw_arr_begin(&w);
    for (int32_t i = 0; res && i < rq.n; i++) {
      sc_jsonw_obj_begin(&w);
      /* every request ends with a state: what a run that stopped at a failure did not
       * finish says so, instead of a token list that looks whole */
      const req_result *r = &res[i];
      sc_jsonw_kv_str(&w, "state", r->done            ? "finished"
                                   : r->submitted || r->error[0] ? "failed"
                                                                 : "not_started");
      if (r->done) sc_jsonw_kv_str(&w, "finish_reason", r->finish_reason);
      sc_jsonw_key(&w, "tokens");
      sc_jsonw_int32_array(&w, r->tokens, (size_t)r->n);
      if (r->error[0]) {
        sc_jsonw_kv_str(&w, "error", r->error);
      } else if (!r->done && r->submitted) {
        char cut[640];
        snprintf(cut, sizeof cut, "unfinished: the run stopped at the first failure (%.512s)",
                 why[0] ? why : "unknown");
        sc_jsonw_kv_str(&w, "error", cut);
      }
      sc_jsonw_obj_end(&w);
    }
    sc_jsonw_arr_end(&w);
    sc_jsonw_obj_end(&w);
    puts(sc_jsonw_str(&w));
    sc_jsonw_free(&w);
  } else {
    printf("\n%-24s %s (%d nodes, %s, %s collectives)\n", "cluster", label, co->pcp * co->tp,
           co->cuda ? "cuda" : "cpu", co->nccl ? "nccl" : co->ipc ? "ipc" : "host");
    printf("%-24s %d\n", "requests", s.requests);
    printf("%-24s %lld\n", "prompt tokens", (long long)s.prompt_tokens);
    printf("%-24s %lld\n", "generated tokens", (long long)s.generated);
    printf("%-24s p50 %.1f ms, p99 %.1f ms\n", "time to first token", s.ttft_p50, s.ttft_p99);
    printf("%-24s p50 %.1f ms, p99 %.1f ms\n", "time per output token", s.tpot_p50, s.tpot_p99);
    printf("%-24s %.1f tok/s over %.2f s\n", "throughput", s.tok_per_s, s.wall_s);
    for (int i = 0; i < nref; i++) {
      const verdict *vd = &refs[i].v;
      if (!refs[i].verified) continue;
      char head[64];
      snprintf(head, sizeof head, "verify (%s)", refs[i].label);
      printf("%-24s %d greedy requests: %d identical, %d ties, %d mismatches", head,
             vd->checked, vd->identical, vd->ties, vd->mismatches);
      if (vd->ties) printf(" (the same tokens in %d of %d)", vd->same_tokens, vd->checked);
      if (vd->sampled) printf("; %d sampled (%d differ)", vd->sampled, vd->sampled_differ);
      printf(" (tie margin %g)\n", (double)refs[i].tie_margin);
      if (vd->mismatches) printf("%-24s %s\n", "first mismatch", vd->first_mismatch);
    }
    if (why[0]) printf("%-24s %s\n", "error", why);
    printf("%-24s %s\n", "result", ok ? "ok" : "FAILED");
  }
  free_results(res, rq.n);
  sc_requests_free(&rq);
  return ok ? SC_EXIT_OK : SC_EXIT_FAILURE;
}
