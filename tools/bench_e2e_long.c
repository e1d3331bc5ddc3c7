/* bench_e2e_long.c - `sparsecp bench e2e --device cuda`: what long contexts cost end to
 * end on the GPU (issue 18): time to first token of one long prompt, and time per output
 * token once that prompt's context is in the cache, at a short context (64 tokens) and at
 * 32k and 128k, on one GPU (P = N = 1, a one-rank NCCL communicator), and where there
 * are two GPUs also at P = N = 2 (below).
 *
 * The model is examples/model-long.json (the default model's widths with top-K 2048 and
 * positions up to 256k), read from `--model`'s default place: ./examples, else the source
 * tree's. Each case starts a fresh cluster, proves it up with a one-token request, runs a
 * short unmeasured request of the case's shape (module loads, the KV pool's first touch,
 * the scratch areas' growth), then `rounds` measured requests, one at a time: TTFT from
 * the submission to the first token event, TPOT = (last token event - first) / (tokens -
 * 1). The client sees tokens as the scheduler streams them, one step each, so TPOT is the
 * step time as a user sees it (host work between steps included). Every case runs with
 * the KV cache in f32 (the pipeline's default), then in bf16 ("kv" in the params), in
 * bf16 with fp8 index keys ("index"), in fp8_ds_mla (DeepSeek-V3.2's KV cache, its keys in
 * fp8), and in bf16 with the gemms on TF32 tensor cores ("gemm"), or only in those
 * --kv-format, --index-format and --gemm-precision name (kv_layouts).
 * Then the short context once more with the steps profiled ("e2e.gpu_busy", issue 20):
 * how much of a decode step's kernel span the device was busy (CUPTI's records of what
 * ran, rank 0's step results on its tap), beside that run's TPOT. And once more with
 * every op launched, none replayed from a CUDA graph ("e2e.tpot_launched"), for the
 * graphs' speed-up in the same run, and with every step run one at a time, none planned
 * while the one before runs ("e2e.tpot_one_at_a_time", pipeline overlap off), for the
 * overlapped steps' (docs/pipeline.md). Every TPOT case also gives "e2e.step_gap": the
 * device's time from a decode step's last compute op to the next one's first
 * (step_result.gap_ns from rank 0's tap, for the steps queued while the one before ran;
 * issue 20's host gap as the device saw it), each round's median. Where the machine has
 * two GPUs or more, the TTFT and TPOT cases run once more at P = N = 2, a GPU a rank with NCCL ("pcp" and "dcp" 2 in
 * the params; their ratio_to_short_context against the 64-token TPOT of that layout).
 * Those steps have collectives, so they are neither replayed from graphs nor overlapped
 * (docs/cuda.md, docs/pipeline.md): not like for like with P = N = 1's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "client/client.h"
#include "kernels/cuda/kernels_cuda.h"
#include "model/model_config.h"
#include "model/step_prof.h"
#include "tools/bench.h"
#include "tools/cli.h"
#include "tools/local_cluster.h"
#include "tools/requests_file.h"
#include "tools/tap_steps.h"


#define LONG_MAX_ROUNDS 8
#define LONG_MAX_CASES 3 /* contexts of the full run */
#define LONG_TIMEOUT_S 300
#define LONG_MAX_OUT 256 /* step gaps a round keeps (a case generates 64 tokens at most) */

typedef struct long_case {
  int32_t context; /* prompt tokens */
  int32_t out;     /* tokens generated after it */
} long_case;

/* What one request measured; with a profile, what the device ran of its decode steps
 * (their summed busy and span times and op counts, from rank 0's step results). */
typedef struct long_sample {
  double ttft_ms, tpot_ms;
  int32_t steps;
  uint64_t busy_ns, span_ns, ops, idle_ns;
  double gap_us[LONG_MAX_OUT]; /* the decode steps' step_result.gap_ns where measured */
  int32_t gaps;
} long_sample;

/* Submits one prompt and waits for its end; ttft from submission to the first token
 * event, tpot over the rest. */
static int one_request(sc_client *cl, sc_local_cluster *lc, const int32_t *prompt,
                       int32_t len, int32_t max_tokens, long_sample *s, char *why,
                       size_t why_len) {
  const sc_client_request cr = {.prompt = prompt, .prompt_len = len, .max_tokens = max_tokens};
  uint64_t id;
  const double t0 = sc_now_s();
  if (sc_client_submit(cl, &cr, &id) != 0) {
    snprintf(why, why_len, "cannot submit a %d-token prompt", len);
    return SC_EIO;
  }
  double t_first = 0, t_last = 0;
  int32_t got = 0;
  for (;;) {
    if (sc_now_s() - t0 > LONG_TIMEOUT_S) {
      snprintf(why, why_len, "a %d-token prompt unfinished after %d s", len, LONG_TIMEOUT_S);
      return SC_ETIMEDOUT;
    }
    if (sc_local_cluster_poll(lc, why, why_len) > 0) return SC_EIO;
    sc_client_event ev;
    int rc = sc_client_next(cl, 100, &ev);
    if (rc == SC_ETIMEDOUT || rc == SC_EPROTO) continue;
    if (rc) {
      snprintf(why, why_len, "client: %s", sc_strerror(rc));
      return rc;
    }
    if (ev.request_id != id) continue;
    if (ev.kind == SC_CLIENT_ERROR) {
      snprintf(why, why_len, "request failed: %s (%s)", ev.message, sc_errname(ev.code));
      return SC_EIO;
    }
    if (ev.kind == SC_CLIENT_TOKENS && ev.n > 0) {
      const double now = sc_now_s();
      if (got == 0) t_first = now;
      t_last = now;
      got += ev.n;
    } else if (ev.kind == SC_CLIENT_DONE) {
      break;
    }
  }
  if (got < 2) {
    snprintf(why, why_len, "a %d-token prompt generated %d tokens", len, got);
    return SC_EPROTO;
  }
  s->ttft_ms = (t_first - t0) * 1e3;
  s->tpot_ms = (t_last - t_first) * 1e3 / (got - 1);
  return 0;
}

/* A request's decode steps on average. */
typedef struct step_avg {
  double busy_ms, span_ms, idle_ms; /* busy, kernel span, device idle before the step */
  double ops;
} step_avg;

static step_avg per_step(const long_sample *s) {
  return (step_avg){.busy_ms = (double)s->busy_ns * 1e-6 / s->steps,
                    .span_ms = (double)s->span_ns * 1e-6 / s->steps,
                    .idle_ms = (double)s->idle_ns * 1e-6 / s->steps,
                    .ops = (double)s->ops / s->steps};
}

/* The step results of one measured request from the tap (one a token: its prefill step,
 * then out - 1 decode steps): the decode steps' gaps, and with a profile their device
 * activity, into s. SC_ENOTSUP when profiled steps carry no activity (no CUPTI where the
 * nodes run). */
static int take_steps(sc_tap_steps *tap, int32_t out, bool profile, long_sample *s, char *why,
                      size_t why_len) {
  for (int32_t i = 0; i < out; i++) {
    sc_msg_step_result *r = NULL;
    const int rc = sc_tap_steps_next(tap, 2000, &r);
    if (rc) {
      snprintf(why, why_len, "step %d of %d of a request not seen on the tap (%s)", i + 1, out,
               sc_strerror(rc));
      return rc;
    }
    const bool measured = r->device_ns.n == SC_DEVICE_COUNT;
    if (i > 0 && r->gap_ns >= 0 && s->gaps < LONG_MAX_OUT)
      s->gap_us[s->gaps++] = (double)r->gap_ns * 1e-3;
    if (measured && i > 0) { /* (i = 0: the prefill step) */
      s->steps++;
      s->busy_ns += r->device_ns.v[SC_DEVICE_BUSY_NS];
      s->span_ns += r->device_ns.v[SC_DEVICE_SPAN_NS];
      s->ops += r->device_ns.v[SC_DEVICE_OPS];
      s->idle_ns += r->device_ns.v[SC_DEVICE_IDLE_BEFORE_NS];
    }
    sc_msg_body_destroy(SC_MSG_STEP_RESULT, r);
    if (profile && !measured) {
      snprintf(why, why_len, "the steps carry no device activity (no CUPTI on the GPU "
                             "machine: libcupti.so.13 in the library path)");
      return SC_ENOTSUP;
    }
  }
  return 0;
}

/* The layouts the cases run in: the KV rows' format, where the index keys live and the
 * gemms' precision (pipeline kv_format, index_format, gemm_precision). The f32 and bf16
 * rows' short context also runs the profiled and the baseline cases (`extras`). */
typedef struct kv_layout {
  const char *kv, *index;
  bool index_default; /* index is kv's default index_format (sc_pipeline_kv_formats) */
  bool extras;
  bool tf32;          /* gemm_precision tf32 */
} kv_layout;
static const kv_layout kv_layouts[] = {
    {"f32", "kv", true, true, false},   /* the pipeline's default, the CPU reference's */
    {"bf16", "kv", true, true, false},  /* the attention on the tensor cores */
    {"bf16", "fp8", false, false, false}, /* DeepSeek-V3.2's index keys: a decode step's
                                             indexer reads 132 bytes a key, not 256 */
    {"fp8_ds_mla", "fp8", true, false, false}, /* and its KV rows: 656 bytes, not 1152 */
    {"bf16", "kv", true, false, true}, /* the dense layers' gemms on the tensor cores */
};

/* How a case's cluster runs. */
typedef struct case_opts {
  bool p2n2;      /* P = N = 2 on two GPUs (NCCL), not P = N = 1 on one */
  const kv_layout *kv;
  bool profile;   /* the executors profile the steps; each round's decode steps' device
                     activity comes from the tap */
  bool no_graphs; /* every op launched, no step replayed from a CUDA graph */
  bool no_overlap; /* steps one at a time (pipeline overlap off) */
} case_opts;

/* One case on a fresh cluster. */
static int run_case(const char *model_file, const long_case *lcs, case_opts o, int rounds,
                    int32_t vocab, long_sample *out, char *why, size_t why_len) {
  const int32_t L = lcs->context;
  const bool profile = o.profile;
  const int32_t n = o.p2n2 ? 2 : 1;
  /* (two NCCL ranks: their nodes' errors shown, so that a start-up failure says why) */
  const sc_local_cluster_opts co = {
      .pcp = n, .dcp = n, .tp = 1, .model_file = model_file, .cuda = true, .gpus = n,
      .nccl = true, .token_budget = L > 4096 ? L : 4096, .num_blocks = L / 16 + 128,
      .max_model_len = L + lcs->out + 64, .deadline_ms = 120000, .log_level = "warn",
      .quiet = !o.p2n2, .kv_format = o.kv->kv, .index_format = o.kv->index,
      .gemm_tf32 = o.kv->tf32, .profile = profile,
      .taps = true, /* rank 0's step results: the gaps, and the profile's activity */
      .no_cuda_graphs = o.no_graphs, .overlap = o.no_overlap ? "off" : NULL};
  sc_local_cluster *lc = NULL;
  sc_client *cl = NULL;
  sc_tap_steps *tap = NULL;
  int32_t *prompt = malloc(sizeof(int32_t) * (size_t)L);
  sc_diag d = {0};
  int rc = prompt ? sc_local_cluster_start(&co, &lc, &d) : SC_ENOMEM;
  if (rc) {
    snprintf(why, why_len, "cannot start a P%d N%d cluster on %d GPU(s): %s", n, n, n,
             sc_diag_message(&d));
    goto out;
  }
  if ((rc = sc_client_connect(&cl, sc_local_cluster_listen(lc), &d)) != 0) {
    snprintf(why, why_len, "%s", sc_diag_message(&d));
    goto out;
  }
  if ((rc = sc_tap_steps_open(sc_local_cluster_tap(lc, 0), &tap)) != 0) {
    snprintf(why, why_len, "cannot subscribe to rank 0's tap: %s", sc_strerror(rc));
    goto out;
  }
  long_sample ignored;
  const int32_t one = 1;
  sc_requests_fill_prompt(prompt, L, vocab, 4242); /* the warm-up's own prompt */
  if ((rc = one_request(cl, lc, &one, 1, 2, &ignored, why, why_len)) != 0 ||
      (rc = one_request(cl, lc, prompt, L, 4, &ignored, why, why_len)) != 0)
    goto out;
  /* the warm-ups' steps; none seen: the subscription was not up yet, warm up again */
  for (int tries = 0; tries < 20 && sc_tap_steps_drain(tap, 300) == 0; tries++)
    if ((rc = one_request(cl, lc, &one, 1, 2, &ignored, why, why_len)) != 0) goto out;
  for (int r = 0; r < rounds; r++) {
    sc_requests_fill_prompt(prompt, L, vocab, 1000 + (uint64_t)r);
    out[r] = (long_sample){0};
    if ((rc = one_request(cl, lc, prompt, L, lcs->out, &out[r], why, why_len)) != 0 ||
        (rc = take_steps(tap, lcs->out, profile, &out[r], why, why_len)) != 0)
      goto out;
    fprintf(stderr, "  P%d N%d, %s KV%s%s, context %d, round %d%s%s: ttft %.1f ms, tpot %.3f ms",
            n, n, o.kv->kv, strcmp(o.kv->index, "fp8") == 0 ? " and fp8 index keys" : "",
            o.kv->tf32 ? ", TF32 gemms" : "", L, r + 1,
            profile ? " (profiled)" : "",
            o.no_graphs ? " (no graphs)" : o.no_overlap ? " (one step at a time)" : "",
            out[r].ttft_ms, out[r].tpot_ms);
    if (out[r].gaps > 0)
      fprintf(stderr, ", the device's gap between steps %.1f us (median of %d)",
              sc_bench_median(out[r].gap_us, out[r].gaps), out[r].gaps);
    if (profile) {
      const step_avg a = per_step(&out[r]);
      fprintf(stderr, ", a decode step's device busy %.3f ms of a %.3f ms kernel span, %.0f "
              "ops, idle %.3f ms before it", a.busy_ms, a.span_ms, a.ops, a.idle_ms);
    }
    fprintf(stderr, "\n");
  }
out:
  sc_tap_steps_close(tap);
  sc_client_close(cl);
  sc_local_cluster_stop(lc);
  free(prompt);
  return rc;
}

/* The short context once more with every step profiled: TPOT then, and the share of a
 * decode step's kernel span that the device was busy (issue 20), as "e2e.gpu_busy". A
 * GPU machine without CUPTI skips it with a note. */
static int busy_case(sc_bench *b, const char *model_file, const long_case *lc,
                     const kv_layout *kv, int rounds, int32_t vocab) {
  if (lc->out < 3) return 0; /* (decode steps to measure: every case has more) */
  long_sample s[LONG_MAX_ROUNDS];
  char why[1024] = "";
  const case_opts o = {.kv = kv, .profile = true};
  const int rc = run_case(model_file, lc, o, rounds, vocab, s, why, sizeof why);
  if (rc == SC_ENOTSUP) {
    fprintf(stderr, "bench e2e: no e2e.gpu_busy: %s\n", why);
    return 0;
  }
  if (rc) {
    fprintf(stderr, "bench e2e: %s\n", why);
    return rc;
  }
  double share[LONG_MAX_ROUNDS], tpot[LONG_MAX_ROUNDS], busy_ms[LONG_MAX_ROUNDS],
      span_ms[LONG_MAX_ROUNDS], ops[LONG_MAX_ROUNDS], idle_ms[LONG_MAX_ROUNDS];
  for (int r = 0; r < rounds; r++) {
    share[r] = s[r].span_ns ? 100.0 * (double)s[r].busy_ns / (double)s[r].span_ns : 0;
    tpot[r] = s[r].tpot_ms;
    const step_avg a = per_step(&s[r]);
    busy_ms[r] = a.busy_ms, span_ms[r] = a.span_ms, ops[r] = a.ops, idle_ms[r] = a.idle_ms;
  }
  const double tp = sc_bench_median(tpot, rounds), bu = sc_bench_median(busy_ms, rounds);
  char params[256], extra[320];
  snprintf(params, sizeof params,
           "\"device\":\"cuda\",\"pcp\":1,\"dcp\":1,\"tp\":1,\"gpus\":1,\"model\":\"model-long\","
           "\"kv\":\"%s\",\"context\":%d,\"out_tokens\":%d,\"profile\":true",
           kv->kv, lc->context, lc->out);
  /* busy of the kernel span, and of the step as a user sees it (TPOT, host gaps too) */
  snprintf(extra, sizeof extra,
           "\"tpot_ms\":%.4f,\"busy_ms\":%.4f,\"span_ms\":%.4f,\"ops\":%.1f,"
           "\"busy_of_tpot\":%.4f,\"idle_before_ms\":%.4f",
           tp, bu, sc_bench_median(span_ms, rounds), sc_bench_median(ops, rounds), bu / tp,
           sc_bench_median(idle_ms, rounds));
  sc_bench_add(b, "e2e.gpu_busy", params, "%", share, rounds, extra);
  return 0;
}

/* The short context once more as a baseline in the same run (issue 20): with every op
 * launched, no step replayed from a CUDA graph ("e2e.tpot_launched", graphs_speedup), or
 * with the steps one at a time, none planned ahead ("e2e.tpot_one_at_a_time",
 * overlap_speedup). */
static int baseline_case(sc_bench *b, const char *model_file, const long_case *lc,
                         const kv_layout *kv, bool no_graphs, int rounds, int32_t vocab,
                         double tpot_default) {
  long_sample s[LONG_MAX_ROUNDS];
  char why[1024] = "";
  const case_opts o = {.kv = kv, .no_graphs = no_graphs, .no_overlap = !no_graphs};
  const int rc = run_case(model_file, lc, o, rounds, vocab, s, why, sizeof why);
  if (rc) {
    fprintf(stderr, "bench e2e: %s\n", why);
    return rc;
  }
  double tpot[LONG_MAX_ROUNDS];
  for (int r = 0; r < rounds; r++) tpot[r] = s[r].tpot_ms;
  char params[256], extra[128];
  snprintf(params, sizeof params,
           "\"device\":\"cuda\",\"pcp\":1,\"dcp\":1,\"tp\":1,\"gpus\":1,\"model\":\"model-long\","
           "\"kv\":\"%s\",\"context\":%d,\"out_tokens\":%d,%s",
           kv->kv, lc->context, lc->out,
           no_graphs ? "\"cuda_graphs\":false" : "\"overlap\":\"off\"");
  snprintf(extra, sizeof extra, "\"%s_speedup\":%.4f", no_graphs ? "graphs" : "overlap",
           sc_bench_median(tpot, rounds) / tpot_default);
  sc_bench_add(b, no_graphs ? "e2e.tpot_launched" : "e2e.tpot_one_at_a_time", params, "ms",
               tpot, rounds, extra);
  return 0;
}

/* Whether a KV layout is among those --kv-format and --index-format ask for (all
 * without them; a format alone with its default index_format): a call on the GPU machine
 * can then time one layout's cases in a fraction of the time. */
static bool kv_wanted(const sc_bench *b, const kv_layout *kv) {
  if (b->kv_format != NULL && strcmp(b->kv_format, kv->kv) != 0) return false;
  if (b->gemm_precision != NULL && strcmp(b->gemm_precision, kv->tf32 ? "tf32" : "f32") != 0)
    return false;
  if (b->index_format != NULL) return strcmp(b->index_format, kv->index) == 0;
  return b->kv_format == NULL || kv->index_default;
}

/* The TTFT and TPOT cases of one layout in each KV layout kv_wanted (at P = N = 1 the f32
 * and bf16 rows' also with the profiled and baseline cases of the short context; the
 * params say "index":"fp8" where the keys are apart in fp8). */
static int layout_cases(sc_bench *b, const char *model_file, const long_case *cases,
                        int n_cases, int rounds, int32_t vocab, bool p2n2) {
  const int32_t n = p2n2 ? 2 : 1;
  double ttft[LONG_MAX_CASES][LONG_MAX_ROUNDS], tpot[LONG_MAX_CASES][LONG_MAX_ROUNDS];
  double gap[LONG_MAX_CASES][LONG_MAX_ROUNDS]; /* each round's median gap, us (NAN: none) */
  char why[1024] = "";
  for (size_t li = 0; li < sizeof kv_layouts / sizeof kv_layouts[0]; li++) {
    const kv_layout *kv = &kv_layouts[li];
    if (!kv_wanted(b, kv)) continue;
    int rc = 0;
    const bool fp8 = strcmp(kv->index, "fp8") == 0;
    for (int c = 0; c < n_cases && rc == 0; c++) {
      long_sample s[LONG_MAX_ROUNDS];
      const case_opts o = {.p2n2 = p2n2, .kv = kv};
      if ((rc = run_case(model_file, &cases[c], o, rounds, vocab, s, why, sizeof why))) break;
      for (int r = 0; r < rounds; r++) {
        ttft[c][r] = s[r].ttft_ms, tpot[c][r] = s[r].tpot_ms;
        gap[c][r] = s[r].gaps > 0 ? sc_bench_median(s[r].gap_us, s[r].gaps) : NAN;
      }
    }
    if (rc) {
      fprintf(stderr, "bench e2e: %s\n", why);
      return rc;
    }
    const double tpot_short = sc_bench_median(tpot[0], rounds);
    for (int c = 0; c < n_cases; c++) {
      char params[256], extra[256];
      snprintf(params, sizeof params,
               "\"device\":\"cuda\",\"pcp\":%d,\"dcp\":%d,\"tp\":1,\"gpus\":%d,"
               "\"model\":\"model-long\",\"kv\":\"%s\",%s%s\"context\":%d,\"out_tokens\":%d",
               n, n, n, kv->kv, fp8 ? "\"index\":\"fp8\"," : "",
               kv->tf32 ? "\"gemm\":\"tf32\"," : "", cases[c].context,
               cases[c].out);
      sc_bench_add(b, "e2e.ttft", params, "ms", ttft[c], rounds, NULL);
      snprintf(extra, sizeof extra, "\"ratio_to_short_context\":%.4f",
               sc_bench_median(tpot[c], rounds) / tpot_short);
      sc_bench_add(b, "e2e.tpot", params, "ms", tpot[c], rounds, extra);
      bool gaps = true; /* (steps with collectives over NCCL do not overlap: no gaps) */
      for (int r = 0; r < rounds; r++) gaps = gaps && !isnan(gap[c][r]);
      if (gaps) sc_bench_add(b, "e2e.step_gap", params, "us", gap[c], rounds, NULL);
    }
    if (p2n2 || !kv->extras) continue;
    const int rc_busy = busy_case(b, model_file, &cases[0], kv, rounds, vocab);
    if (rc_busy) return rc_busy;
    if ((rc = baseline_case(b, model_file, &cases[0], kv, true, rounds, vocab,
                            tpot_short)) ||
        (rc = baseline_case(b, model_file, &cases[0], kv, false, rounds, vocab,
                            tpot_short)))
      return rc;
  }
  return 0;
}

int sc_bench_e2e_long(sc_bench *b) {
  static const long_case k_full[] = {{64, 64}, {32768, 64}, {131072, 64}};
  static const long_case k_quick[] = {{64, 16}, {4096, 16}};
  _Static_assert(sizeof k_full / sizeof k_full[0] <= LONG_MAX_CASES &&
                     sizeof k_quick / sizeof k_quick[0] <= LONG_MAX_CASES,
                 "layout_cases' arrays");
  const long_case *cases = b->quick ? k_quick : k_full;
  const int n_cases = (int)(b->quick ? sizeof k_quick / sizeof k_quick[0]
                                     : sizeof k_full / sizeof k_full[0]);
  /* five rounds: on an H100 whose host moved a round's TPOT by up to 0.23 ms (0.47-0.70
   * ms at 128k, 2026-12-06, bench/long-context.md), three left the median, and so the
   * ratio to the short context, to one round's luck; a round costs well under a second */
  const int rounds = b->quick ? 1 : 5;
  const int gpus = sc_cuda_device_count();
  if (gpus < 1) {
    fprintf(stderr, "bench e2e: --device cuda: no CUDA device here\n");
    return SC_ENOTSUP;
  }
  char model_file[4096];
  sc_cli_example_path("model-long.json", model_file, sizeof model_file);
  sc_model_config model;
  sc_diag d = {0};
  if (sc_model_config_load(model_file, &model, &d) != 0) {
    fprintf(stderr, "bench e2e: %s\n", sc_diag_message(&d));
    return SC_EINVAL;
  }
  fprintf(stderr, "bench e2e (cuda): %s, P1 N1 on one GPU%s, %d round(s) per context\n",
          model_file, gpus >= 2 ? ", then P2 N2 on two (NCCL)" : " (one GPU here: no P2 N2)",
          rounds);
  int rc = layout_cases(b, model_file, cases, n_cases, rounds, model.vocab, false);
  /* the two-GPU layout adds to the one-GPU results: a failure there is reported and
   * leaves the document with those (the bench writes none when it fails) */
  if (rc == 0 && gpus >= 2 &&
      layout_cases(b, model_file, cases, n_cases, rounds, model.vocab, true) != 0)
    fprintf(stderr, "bench e2e: no P2 N2 results (above: why); the P1 N1 results stand\n");
  return rc;
}
