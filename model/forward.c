/* forward.c - one rank's forward pass of one step (see forward.h). */
#include "model/forward.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "model/kbuf.h"
#include "model/moe_ffn.h"
#include "model/yarn.h"

/* Scratch buffers (kernel memory), grown to the largest step and reused. */
enum {
  B_X, B_XN, B_QL, B_Q, B_QABS, B_KV, B_IQ, B_IW, B_OLAT, B_OV, B_AO, B_U, B_H,
  B_PG, B_SHARD, B_WS, B_TOPK, B_SEL, B_CAND, B_CANDG, B_QG, B_OD, B_LSE, B_LSEG, B_LSEX,
  B_XG, B_XL, B_LOGITS,
  /* the greedy choice of each logits row, kept for the step after (in->follow_*), and
   * its margin */
  B_GREEDY, B_MARGIN,
  /* the index arrays a step uploads (U_*): a decode step's in one piece, the others' */
  B_UPLOAD, B_UPLOAD_OTHER,
  /* index arrays built on the device, and the chunks' (prefill steps only) */
  I_KSLOT, I_KPOS, I_SSRC, I_DEINT, I_CKPOS,
  B_COUNT
};

/* The index arrays a step uploads, each at its own place in an upload buffer
 * (upload_all). */
enum {
  U_IDS, U_POS, U_REQ, U_DSLOT, U_PSLOT, U_LAST, U_KRREQ, U_KRB, U_KRE, U_KB, U_KE, U_WSB, U_BT,
  U_FAT, U_FROW, /* in->follow_*: where in U_IDS, and which row of B_GREEDY */
  /* each logits row's draw (in->temperature, seed, out_index): the temperature's bits,
   * the seed as two words (an array's place is 256-byte aligned: read as uint64) */
  U_TEMP, U_SEED, U_OIDX,
  U_COUNT
};

/* ---- recorded steps (kernels' recordings: CUDA graphs) ----
 *
 * A decode step of a given batch repeats its shapes step after step: only the contents
 * of its buffers change (tokens, positions, slots, key lists), and step_prepare writes
 * those before the compute. So step_body is recorded once per shape (rec_key) and
 * replayed after that: one launch for the host instead of one per op (2500 a step for
 * a 61-layer model), and no launch gaps on the device.
 *
 * Which steps: those without prefill rows (a prompt's shapes rarely repeat), of a model
 * whose compute never reads device memory on the host (MoE routing does), and not when
 * the top-K is captured for the caller (a host copy per layer); with collectives only on
 * a backend that can replay them (sc_coll_ops.recordable: the IPC backend's kernels;
 * NCCL's and the staged host's are not recorded). The others run as they always did.
 *
 * A recording with collectives keeps the requests its step made (rec->colls); before each
 * replay they are checked against the step's plan (sc_coll_session_replay), so a step
 * whose plan changed is refused before the replay moves a byte, as a run would refuse it.
 * The recording holds the comm's device addresses too: the comm's instance is part of
 * the key, so a rebuilt comm records anew.
 *
 * What a recording holds: the addresses of this forward's buffers (so any buffer that
 * grows makes every recording stale: buf_epoch), of the kernels' scratch (the kernels
 * answer SC_EAGAIN to a stale replay) and the shapes of rec_key. The key lists grow a
 * little every step: they are sized in powers of two, and the block table is widened to
 * a power of two (bt_w), so that a growing context does not change the key. The step's
 * timing marks are part of the recording; the profile's host side (which mark is which
 * stage) is kept with it and restored after each replay. */
typedef struct rec_key {
  uint64_t comm_instance; /* (0 for a step without collectives) */
  int32_t t_pad, decode, reqs, logits_rows, bt_w, follow;
  bool profile, logits, greedy, draws;
} rec_key;

struct sc_forward_rec {
  rec_key key;
  sc_krecording *rec;
  uint64_t buf_epoch;  /* f->buf_epoch when it was recorded */
  uint64_t last_used;  /* f->steps when it last ran (the least recent is replaced) */
  int32_t fails;       /* recordings of this key that failed in a row */
  sc_step_prof prof;   /* the profile's state after step_body, when profiled */
  sc_coll *colls;      /* the collectives the recorded step asked for, in order */
  int32_t num_colls, cap_colls;
};

/* An upload buffer's layout: U_* array u holds cap[u] int32 from off[u] on. */
typedef struct upload_area {
  int buf; /* B_UPLOAD or B_UPLOAD_OTHER */
  size_t cap[U_COUNT], off[U_COUNT], total;
  int32_t *host; /* the image uploaded in one copy (B_UPLOAD only) */
} upload_area;

struct sc_forward {
  sc_kernels *k;
  const sc_model_weights *w;
  sc_kv_cache *cache;
  sc_comm *comm;
  sc_plan_config pc;
  sc_model_config mc;
  void *buf[B_COUNT];
  size_t cap[B_COUNT];
  int32_t *host_ids; /* host staging */
  size_t host_cap;
  upload_area up[2];    /* B_UPLOAD's and B_UPLOAD_OTHER's layouts */
  /* the sessions of the steps queued and not finished yet, oldest first from sess_head:
   * two with overlapped steps (docs/pipeline.md), a step's kept until sc_forward_finish */
  sc_coll_session sess[SC_FORWARD_IN_FLIGHT];
  int32_t sess_head, sess_n;
  sc_step_prof prof;    /* the step's stage marks, when it is profiled */
  /* rotary embedding and attention scale: the synthetic model's plain RoPE from theta
   * (inv_freq NULL) or a checkpoint's table (model/yarn.h) */
  double *inv_freq;     /* kernel buffer [rope_dim / 2], or NULL */
  float attn_factor;    /* the table's cos/sin factor */
  float scale;          /* attention softmax scale */
  sc_moe_ffn *moe;      /* MoE layers' scratch, or NULL when the model has none */
  /* recorded steps (step_recorded) */
  bool recordings;      /* record and replay the steps that allow it */
  uint64_t buf_epoch;   /* bumped whenever a buffer of buf[] moves */
  uint64_t steps;       /* recordable steps so far (the recordings' clock) */
  uint64_t records, replays;
  struct sc_forward_rec *rec; /* [SC_FORWARD_RECS] */
  struct sc_forward_rec *recording; /* the entry being recorded (coll() adds to it) */
  sc_forward_host host;       /* the last step's host time */
  /* steps queued without a failure and steps finished, each step's ordinal in both: its
   * stamps (sc_forward_gap) are 2 (o % GAP_RING) before its compute and the next after */
  uint64_t queued, finished;
  /* what B_GREEDY holds: the greedy rows of step greedy_of (0: none) */
  uint64_t greedy_of, last_step;
  int32_t greedy_rows;
};

/* The rotary table of a checkpoint model, its scales, and the kernels it needs. */
static int setup_checkpoint(sc_forward *f, sc_diag *d) {
  const sc_model_config *m = &f->mc;
  sc_kernels *k = f->k;
  if (k->ops->rope_freq == NULL || k->ops->layernorm == NULL || k->ops->weighted_sum_rows == NULL)
    return sc_fail(d, SC_ENOTSUP, "forward: the %s kernels cannot run a DeepSeek-V3.2 "
                   "checkpoint yet (rope_freq, layernorm, weighted_sum_rows)", k->device);
  const size_t bytes = (size_t)(m->rope_dim / 2) * sizeof(double);
  double *tbl = malloc(bytes > 0 ? bytes : 1);
  if (tbl == NULL) return sc_fail(d, SC_ENOMEM, "out of memory");
  int rc = sc_rope_inv_freq(&m->arch.rope, (double)m->rope_theta, m->rope_dim, tbl, d);
  if (rc == 0 && ((rc = k->ops->alloc(k, bytes, (void **)&f->inv_freq)) ||
                  (rc = k->ops->copy(k, f->inv_freq, tbl, bytes, SC_KCOPY_H2D))))
    sc_fail(d, rc, "forward: cannot upload the rotary table");
  free(tbl);
  if (rc) return rc;
  f->attn_factor = (float)sc_rope_attention_factor(&m->arch.rope);
  f->scale = (float)sc_rope_softmax_scale(&m->arch.rope, sc_model_q_head_dim(m));
  if (m->arch.route.n_experts > 0 && (rc = sc_moe_ffn_create(k, &f->moe, d))) return rc;
  return 0;
}

int sc_forward_create(sc_kernels *k, const sc_model_weights *w, sc_kv_cache *cache,
                      sc_comm *comm, const sc_plan_config *cfg, sc_forward **out,
                      sc_diag *d) {
  const sc_model_config *m = &w->cfg;
  if (cfg->layers != m->layers || cfg->heads != m->heads || cfg->kv_lora_rank != m->kv_lora_rank ||
      cfg->rope_dim != m->rope_dim || cfg->index_dim != m->index_dim || cfg->topk != m->topk ||
      cfg->hidden != m->hidden)
    return sc_fail(d, SC_EINVAL, "forward: the plan's model dimensions differ from the weights'");
  if (cfg->tp != w->tp || comm->group_rank[SC_GROUP_TP] != w->tp_rank)
    return sc_fail(d, SC_EINVAL, "forward: weights of TP rank %d/%d on TP rank %d/%d",
                   w->tp_rank, w->tp, comm->group_rank[SC_GROUP_TP], cfg->tp);
  if (cfg->dtype != SC_DT_F32)
    return sc_fail(d, SC_ENOTSUP, "forward: only f32 collectives are implemented");
  if (cache->layers != m->layers || cache->width != sc_model_kv_width(m) + m->index_dim ||
      cache->index_dim != m->index_dim || cache->block_size != cfg->block_size)
    return sc_fail(d, SC_EINVAL, "forward: the KV cache shape does not fit the model and plan");
  /* (a shard row carries an fp8 key's row in the room of its f32 values: row_keys) */
  if (sc_kv_cache_keys_apart(cache) &&
      SC_KFP8_INDEX_ROW_BYTES(m->index_dim) > 4 * (int64_t)m->index_dim)
    return sc_fail(d, SC_EINVAL, "forward: fp8 index keys need index_dim >= 2");
  sc_forward *f = calloc(1, sizeof *f);
  if (f == NULL) return sc_fail(d, SC_ENOMEM, "out of memory");
  *f = (sc_forward){.k = k, .w = w, .cache = cache, .comm = comm, .pc = *cfg, .mc = *m,
                    .attn_factor = 1.0f, .scale = 1.0f / sqrtf((float)sc_model_q_head_dim(m))};
  f->up[0].buf = B_UPLOAD;
  f->up[1].buf = B_UPLOAD_OTHER;
  if (k->ops->record_begin != NULL &&
      (f->rec = calloc(SC_FORWARD_RECS, sizeof *f->rec)) == NULL) {
    free(f);
    return sc_fail(d, SC_ENOMEM, "out of memory");
  }
  if (m->arch.checkpoint) {
    const int rc = setup_checkpoint(f, d);
    if (rc) {
      sc_forward_destroy(f);
      return rc;
    }
  }
  *out = f;
  return 0;
}

void sc_forward_destroy(sc_forward *f) {
  if (f == NULL) return;
  for (int i = 0; i < B_COUNT; i++)
    if (f->buf[i]) f->k->ops->free(f->k, f->buf[i]);
  if (f->inv_freq) f->k->ops->free(f->k, f->inv_freq);
  sc_moe_ffn_destroy(f->moe);
  if (f->rec != NULL)
    for (int i = 0; i < SC_FORWARD_RECS; i++) {
      f->k->ops->recording_free(f->k, f->rec[i].rec);
      free(f->rec[i].colls);
    }
  free(f->rec);
  free(f->host_ids);
  free(f->up[0].host);
  free(f);
}

/* Buffers that only steps with prefill rows use: never part of a recording. */
static bool prefill_only(int i) {
  return i == B_UPLOAD_OTHER || i == I_SSRC || i == I_DEINT || i == I_CKPOS || i == B_PG ||
         i == B_SHARD || i == B_WS;
}

static void *ensure(sc_forward *f, int i, size_t bytes, int *rc) {
  const void *was = f->buf[i];
  void *b = sc_kbuf_grow(f->k, &f->buf[i], &f->cap[i], bytes, rc);
  if (b != was && !prefill_only(i)) f->buf_epoch++; /* (recordings of it are stale) */
  return b;
}

/* B_GREEDY grows keeping what it holds: a step planned ahead takes its tokens from
 * there after its own buffers were made ready (step_prepare), so the step before's rows
 * must survive a move. */
static int grow_greedy(sc_forward *f, size_t bytes) {
  if (f->buf[B_GREEDY] != NULL && f->cap[B_GREEDY] >= bytes) return 0;
  const size_t cap = bytes < 4096 ? 4096 : 2 * bytes;
  void *nb = NULL;
  int rc = f->k->ops->alloc(f->k, cap, &nb);
  if (rc == 0 && f->buf[B_GREEDY] != NULL && f->greedy_rows > 0)
    rc = f->k->ops->copy(f->k, nb, f->buf[B_GREEDY], (size_t)f->greedy_rows * sizeof(int32_t),
                         SC_KCOPY_D2D);
  if (rc) {
    f->k->ops->free(f->k, nb);
    return rc;
  }
  f->k->ops->free(f->k, f->buf[B_GREEDY]);
  f->buf[B_GREEDY] = nb;
  f->cap[B_GREEDY] = cap;
  f->buf_epoch++; /* (recordings of it are stale) */
  return 0;
}

/* Whether request i has a logits row this step (sc_forward_logits_rows). */
static bool has_logits_row(const sc_meta *m, const uint8_t *sample, int32_t i) {
  return m->last_token[i] >= 0 && (sample == NULL || sample[i]);
}

int32_t sc_forward_logits_rows(const sc_meta *m, const uint8_t *sample, int32_t num_reqs,
                               int32_t *row_of) {
  int32_t n = 0;
  for (int32_t i = 0; i < num_reqs; i++) row_of[i] = has_logits_row(m, sample, i) ? n++ : -1;
  return n;
}

static int32_t pow2_at_least(int32_t n) {
  int32_t p = 1;
  while (p < n && p < (INT32_MAX >> 1) + 1) p <<= 1;
  return p;
}

/* A step's cache key list grows by one entry per decode request: sized in powers of two,
 * its buffers move (and the recordings that hold them go stale) only when it doubles. */
static size_t key_list_bytes(int32_t num_keys) {
  return (size_t)pow2_at_least(num_keys) * sizeof(int32_t);
}

typedef struct step_ctx {
  sc_forward *f;
  const sc_forward_in *in;
  sc_forward_out *out;
  sc_coll_session *sess; /* the step's, in f->sess */
  sc_diag *d;
  /* dims */
  int32_t Tp, D, Hl, dn, dr, dc, dv, qd, kvw, iw, HI, dI, idr, K, hid, F, P, N, T, I, B;
  int32_t layer;
  bool has_prefill;
  int32_t bt_w; /* the block table's row width on the device: max_blocks to a power of 2 */
  int32_t cache_keys_shared; /* keys_shared of the local cache's tokens [0, cache_tok_end):
                              * the same in every layer, so counted once a step */
  int32_t nl;   /* rows whose logits are taken (step_prepare) */
  int32_t nf;   /* tokens of this rank taken from the step before (step_prepare) */
  const upload_area *up; /* where step_prepare put the step's index arrays (ix) */
  uint64_t upload_ns, keys_ns; /* step_prepare's host time queueing them and the key list */
  /* B_AO holds a sublayer's output not yet added to the residual stream B_X: the next
   * sublayer adds it as it norms x (add_rmsnorm, one launch), the last one after the
   * layers (sublayer_in, residual_flush) */
  bool residual;
  bool tokens; /* the logits rows' tokens are computed on the device (B_GREEDY) */
  bool draws; /* a logits row is drawn at a temperature on the device (draw_rows) */
} step_ctx;

/* Device address of uploaded index array u (after upload_all). */
static int32_t *ix(const step_ctx *s, int u) {
  return (int32_t *)s->f->buf[s->up->buf] + s->up->off[u];
}

/* One upload array's source: n int32 at p. */
typedef struct upload_src {
  const int32_t *p;
  size_t n;
} upload_src;

/* Uploads every U_* array to its place in area a's buffer. Each array has a fixed place
 * with room to the next power of two, so the layout (and the addresses a recorded step
 * holds) changes only when an array outgrows its room.
 *
 * A decode step's arrays (`one_copy`: a few per request; the steps that are recorded)
 * go in one copy of the area's image: a dozen small arrays then cost one transfer instead of a
 * dozen (each a host call and a round of the copy engine's latency between kernels).
 * The other steps copy array by array: their rooms are sized by the largest prompt seen
 * (13 arrays of 128k tokens after a 128k prompt), and one copy of the whole area would
 * carry those rooms' unused ends to the device every step. */
static int upload_all(step_ctx *s, upload_area *a, const upload_src src[U_COUNT],
                      bool one_copy) {
  sc_forward *f = s->f;
  size_t cap[U_COUNT];
  bool relayout = a->total == 0;
  for (int u = 0; u < U_COUNT; u++) {
    cap[u] = a->cap[u] ? a->cap[u] : 64; /* (256 bytes: every array starts aligned) */
    while (cap[u] < src[u].n) cap[u] *= 2;
    relayout |= cap[u] != a->cap[u];
  }
  if (relayout) { /* (the new layout holds only once everything it needs is there) */
    size_t total = 0;
    for (int u = 0; u < U_COUNT; u++) total += cap[u];
    if (one_copy) {
      int32_t *h = realloc(a->host, total * sizeof *h);
      if (h == NULL) return SC_ENOMEM;
      a->host = h;
    }
    for (size_t u = 0, off = 0; u < U_COUNT; off += cap[u], u++) {
      a->cap[u] = cap[u];
      a->off[u] = off;
    }
    a->total = total;
    if (one_copy) f->buf_epoch++; /* the arrays moved inside a buffer recordings read */
  }
  int rc = 0;
  int32_t *dev = ensure(f, a->buf, a->total * sizeof(int32_t), &rc);
  if (rc) return rc;
  s->up = a;
  if (!one_copy) {
    for (int u = 0; u < U_COUNT && rc == 0; u++)
      if (src[u].n > 0)
        rc = f->k->ops->copy(f->k, dev + a->off[u], src[u].p, src[u].n * sizeof(int32_t),
                             SC_KCOPY_H2D);
    return rc;
  }
  size_t end = 0;
  for (int u = 0; u < U_COUNT; u++) {
    if (src[u].n == 0) continue;
    memcpy(a->host + a->off[u], src[u].p, src[u].n * sizeof(int32_t));
    if (a->off[u] + src[u].n > end) end = a->off[u] + src[u].n;
  }
  return end == 0 ? 0 : f->k->ops->copy(f->k, dev, a->host, end * sizeof(int32_t), SC_KCOPY_H2D);
}

/* A collective this step ran, kept while recording: a replay is checked as it was. */
static int keep_coll(step_ctx *s, const sc_coll *req) {
  struct sc_forward_rec *e = s->f->recording;
  if (e == NULL) return 0;
  if (e->num_colls == e->cap_colls) {
    const int32_t cap = e->cap_colls ? 2 * e->cap_colls : 16;
    sc_coll *c = realloc(e->colls, (size_t)cap * sizeof *c);
    if (c == NULL) return sc_fail(s->d, SC_ENOMEM, "out of memory");
    e->colls = c, e->cap_colls = cap;
  }
  e->colls[e->num_colls++] = *req;
  return 0;
}

static sc_coll coll_req(const step_ctx *s, int group, int op, int dtype, int purpose,
                        int64_t rows, int64_t width) {
  return (sc_coll){.layer = s->layer, .group = (uint8_t)group, .op = (uint8_t)op,
                   .dtype = (uint8_t)dtype, .purpose = (uint8_t)purpose, .chunk = -1,
                   .rows = rows, .width = width};
}

static int coll(step_ctx *s, int group, int op, int dtype, int purpose, int64_t rows,
                int64_t width, const void *send, void *recv) {
  const sc_coll req = coll_req(s, group, op, dtype, purpose, rows, width);
  sc_step_prof *p = &s->f->prof;
  const sc_stage was = sc_step_prof_stage(p);
  sc_step_prof_enter(p, SC_STAGE_COLL);
  int rc = sc_coll_session_run(s->sess, &req, send, recv);
  sc_step_prof_enter(p, was);
  if (rc == 0) rc = keep_coll(s, &req);
  else if (s->d) *s->d = s->sess->diag;
  return rc;
}

/* The decode attention's merge over DCP: the planned LSE gather, this shard's scale and
 * the planned reduction of the parts (od) into olat, or, where the backend offers it,
 * the same bits in one exchange (sc_coll_session_run_lse: both plan entries checked). */
static int lse_merge_coll(step_ctx *s, int32_t D, int64_t h_att, float *lse, float *lseg,
                          float *od, float *olat) {
  sc_forward *f = s->f;
  const int op = s->P > 1 ? SC_OP_ALL_REDUCE : SC_OP_REDUCE_SCATTER;
  const sc_coll g = coll_req(s, SC_GROUP_DCP, SC_OP_ALL_GATHER, SC_DT_F32, SC_PURPOSE_DECODE_LSE,
                             D, h_att);
  const sc_coll r = coll_req(s, SC_GROUP_DCP, op, SC_DT_F32, SC_PURPOSE_DECODE_OUT, D,
                             h_att * s->dc);
  int rc;
  if (sc_coll_session_lse_fused(s->sess)) {
    sc_step_prof *p = &f->prof;
    const sc_stage was = sc_step_prof_stage(p);
    sc_step_prof_enter(p, SC_STAGE_COLL);
    rc = sc_coll_session_run_lse(s->sess, &g, &r, lse, od, olat);
    sc_step_prof_enter(p, was);
    if (rc != 0) {
      if (s->d) *s->d = s->sess->diag;
      return rc;
    }
    if ((rc = keep_coll(s, &g)) == 0) rc = keep_coll(s, &r);
    return rc;
  }
  if ((rc = coll(s, SC_GROUP_DCP, SC_OP_ALL_GATHER, SC_DT_F32, SC_PURPOSE_DECODE_LSE, D, h_att,
                 lse, lseg)) != 0)
    return rc;
  if ((rc = f->k->ops->lse_scale(f->k, s->N, s->in->meta->coords.dcp_rank, (int64_t)D * h_att,
                                 s->dc, lseg, od, NULL)) != 0)
    return sc_fail(s->d, rc, "layer %d: LSE scale", s->layer);
  return coll(s, SC_GROUP_DCP, op, SC_DT_F32, SC_PURPOSE_DECODE_OUT, D, h_att * s->dc, od, olat);
}

/* The work queued from here on belongs to `stage` (step_prof.h). */
static void stage(step_ctx *s, sc_stage st) { sc_step_prof_enter(&s->f->prof, st); }

#define CK(expr, ...)                   \
  do {                                  \
    if ((rc = (expr)) != 0) {           \
      sc_fail(s->d, rc, __VA_ARGS__);   \
      goto out;                         \
    }                                   \
  } while (0)
/* A collective already wrote its message into d. */
#define CC(expr)                        \
  do {                                  \
    if ((rc = (expr)) != 0) goto out;   \
  } while (0)

/* Cache slots slots[i] = row i of src (f32 rows s->iw apart: the KV values, then the index
 * key): one write when the key is in the KV row, a second into the key rows when the keys
 * are apart (then only for a layer with its own keys: a shared layer's are never read). */
static int cache_write(step_ctx *s, int64_t n, const float *src, const int32_t *slots, bool own) {
  const sc_kv_cache *c = s->f->cache;
  sc_kernels *k = s->f->k;
  const sc_krows rows = sc_kv_cache_rows(c, s->layer);
  if (!sc_kv_cache_keys_apart(c)) return k->ops->kv_write(k, n, s->iw, src, s->iw, slots, rows);
  int rc = k->ops->kv_write(k, n, s->kvw, src, s->iw, slots, rows);
  if (rc == 0 && own)
    rc = k->ops->kv_write(k, n, s->dI, src + s->kvw, s->iw, slots, sc_kv_cache_keys(c, s->layer));
  return rc;
}

/* The index keys of n rows of f32 rows s->iw wide (a shard or the context workspace):
 * the last s->dI values, or with fp8 keys the fp8_index row that shard_pack copied into
 * their room (SC_KFP8_INDEX_ROW_BYTES(dI) <= 4 dI bytes, sc_forward_create checks). */
static sc_krows row_keys(const step_ctx *s, float *rows, int64_t n) {
  if (!sc_kv_cache_keys_apart(s->f->cache)) return (sc_krows){rows + s->kvw, SC_KFMT_F32, s->iw, n};
  return (sc_krows){rows + s->kvw, SC_KFMT_FP8_INDEX, (int64_t)s->iw * (int64_t)sizeof(float), n};
}

/* Shard row i = cache slot slots[i] in f32 rows s->iw wide: the KV values, then the key
 * (row_keys: fp8 keys as they are, so that the workspace's keys are the cache's bytes and
 * every token scores them by the same code, whichever path it takes). */
static int shard_pack(step_ctx *s, int64_t n, const int32_t *slots, float *shard, bool own) {
  const sc_kv_cache *c = s->f->cache;
  sc_kernels *k = s->f->k;
  const sc_krows rows = sc_kv_cache_rows(c, s->layer);
  const sc_krows dst = {shard, SC_KFMT_F32, s->iw, n};
  if (!sc_kv_cache_keys_apart(c)) return k->ops->gather_rows(k, n, s->iw, rows, slots, dst);
  int rc = k->ops->gather_rows(k, n, s->kvw, rows, slots, dst);
  if (rc == 0 && own)
    rc = k->ops->gather_rows(k, n, s->dI, sc_kv_cache_keys(c, s->layer), slots,
                             row_keys(s, shard, n));
  return rc;
}

/* Whether the caller asked for the selected sets (sc_forward_out.topk). */
static bool capturing(const step_ctx *s) { return s->out != NULL && s->out->topk != NULL; }

/* Captures the selected (score, position) sets of local rows [b, e) for this layer. */
static int capture(step_ctx *s, const sc_kcand *cand_buf, int32_t b, int32_t e) {
  if (!capturing(s) || e <= b) return 0;
  sc_forward *f = s->f;
  const sc_meta *m = s->in->meta;
  const size_t per = (size_t)s->K;
  sc_kcand *host = malloc((size_t)(e - b) * per * sizeof *host);
  if (host == NULL) return SC_ENOMEM;
  int rc = f->k->ops->copy(f->k, host, cand_buf + (size_t)b * per,
                           (size_t)(e - b) * per * sizeof *host, SC_KCOPY_D2H);
  if (rc == 0) {
    const size_t nt = (size_t)s->in->plan->num_tokens;
    for (int32_t k = b; k < e; k++) {
      const int32_t g = m->tok_global[k];
      if (g < 0) continue;
      memcpy(s->out->topk + ((size_t)s->layer * nt + (size_t)g) * per, host + (size_t)(k - b) * per,
             per * sizeof *host);
    }
  }
  free(host);
  return rc;
}

/* xn = rmsnorm(x) with w, after adding the sublayer output still pending (s->residual). */
static int sublayer_in(step_ctx *s, const float *w, float *xn) {
  sc_forward *f = s->f;
  float *x = f->buf[B_X];
  if (!s->residual)
    return f->k->ops->rmsnorm(f->k, s->Tp, s->hid, x, s->hid, w, f->mc.rms_eps, xn, s->hid);
  s->residual = false;
  return f->k->ops->add_rmsnorm(f->k, s->Tp, s->hid, f->buf[B_AO], s->hid, x, s->hid, w,
                                f->mc.rms_eps, xn, s->hid);
}

/* x += the sublayer output still pending, if any. */
static int residual_flush(step_ctx *s) {
  if (!s->residual) return 0;
  s->residual = false;
  sc_forward *f = s->f;
  return f->k->ops->add(f->k, s->Tp, s->hid, f->buf[B_AO], s->hid, f->buf[B_X], s->hid);
}

/* sc_indexer_args.keys_shared of the indexer's tokens [b, e) (key_begin: the host's
 * copy of their ranges' starts): whether at least half the pairs of consecutive tokens,
 * counted from b, share their key list, as a prompt's rows do and a batch of decode rows
 * does not. A hint that shapes a kernel's launch (CUDA's dense path scores such a pair
 * from keys loaded once), never what it selects. */
static int32_t keys_shared(const int32_t *key_begin, int32_t b, int32_t e) {
  int32_t pairs = 0, shared = 0;
  for (int32_t t = b; t + 1 < e; t += 2, pairs++) shared += key_begin[t] == key_begin[t + 1];
  return pairs > 0 && 2 * shared >= pairs;
}

static int attention_layer(step_ctx *s) {
  sc_forward *f = s->f;
  sc_kernels *k = f->k;
  const sc_kernels_ops *o = k->ops;
  const sc_model_weights *w = f->w;
  const sc_meta *m = s->in->meta;
  const int32_t l = s->layer, Tp = s->Tp, D = s->D;
  int rc = 0;
  float *xn = f->buf[B_XN], *ql = f->buf[B_QL], *q = f->buf[B_Q],
        *qabs = f->buf[B_QABS], *kv = f->buf[B_KV], *iq = f->buf[B_IQ], *iwt = f->buf[B_IW],
        *olat = f->buf[B_OLAT], *ov = f->buf[B_OV], *ao = f->buf[B_AO];
  int32_t *topk = f->buf[B_TOPK], *sel = f->buf[B_SEL];
  sc_kcand *cand = f->buf[B_CAND];
  float *lsex = f->buf[B_LSEX];
  const int32_t *pos = ix(s, U_POS);
  const sc_krows cache = sc_kv_cache_rows(f->cache, l);
  const float scale = f->scale;
  /* A checkpoint's q_norm and kv_norm have their own epsilon (model_config.h). */
  const float leps = f->mc.arch.checkpoint ? f->mc.arch.latent_norm_eps : f->mc.rms_eps;
  /* A layer without its own indexer (GLM-5's "shared" layers) attends over the top-K of
   * the last layer that has one: topk, cand and sel still hold it, for the same rows, and
   * they are layer-independent (positions, cache slots, workspace rows; the context
   * workspace of a chunk has the same layout in every layer). Its index keys are not
   * read: written with its KV rows when they share a row, left unwritten when apart. */
  const bool own = !sc_model_layer_index_shared(&f->mc, l);

  /* ---- projections ---- */
  stage(s, SC_STAGE_DENSE);
  CK(sublayer_in(s, sc_w(w, l, SC_W_ATTN_NORM), xn), "layer %d: attn_norm", l);
  /* The projections of xn (q's latent, the KV row, the index key and the indexer's head
   * weights) are one op, and those of the normed q latent (q and the index query)
   * another: a decode step's products are a few rows each (kernels.h, sc_linears). */
  const int32_t qr = f->mc.q_lora_rank;
  const int64_t qw = (int64_t)s->Hl * s->qd, iqw = (int64_t)s->HI * s->dI;
  const int64_t qaw = (int64_t)s->Hl * s->kvw; /* qabs: [q_nope W_UK ; q_rope] a head */
  sc_linears from_xn = {.rows = Tp, .k = s->hid, .x = xn, .ld_x = s->hid, .n_parts = 2};
  from_xn.part[0] = (sc_linear_part){sc_w(w, l, SC_W_WQ_A), qr, s->hid, 1.0f, ql, qr};
  /* KV row [c_kv ; k_rope] and the index key, one row (as cache_write takes them) */
  from_xn.part[1] = (sc_linear_part){sc_w(w, l, SC_W_WKV_A), s->kvw, s->hid, 1.0f, kv, s->iw};
  if (own) {
    from_xn.part[2] = (sc_linear_part){sc_w(w, l, SC_W_IDX_WK), s->dI, s->hid, 1.0f,
                                       kv + s->kvw, s->iw};
    from_xn.part[3] = (sc_linear_part){sc_w(w, l, SC_W_IDX_WW), s->HI, s->hid,
                                       1.0f / sqrtf((float)s->dI * (float)s->HI), iwt, s->HI};
    from_xn.n_parts = 4;
  }
  CK(o->linears(k, &from_xn), "layer %d: wq_a, wkv_a%s", l, own ? ", indexer wk and weights" : "");
  const sc_rmsnorms norms = {
      .n_rows = Tp, .eps = leps, .n_parts = 2,
      .part = {{qr, ql, qr, sc_w(w, l, SC_W_Q_NORM), ql, qr},
               {s->dc, kv, s->iw, sc_w(w, l, SC_W_KV_NORM), kv, s->iw}}};
  CK(o->rmsnorms(k, &norms), "layer %d: q_norm, kv_norm", l);
  sc_linears from_ql = {.rows = Tp, .k = qr, .x = ql, .ld_x = qr, .n_parts = own ? 2 : 1};
  from_ql.part[0] = (sc_linear_part){sc_w(w, l, SC_W_WQ_B), qw, qr, 1.0f, q, qw};
  if (own) from_ql.part[1] = (sc_linear_part){sc_w(w, l, SC_W_IDX_WQ), iqw, qr, 1.0f, iq, iqw};
  CK(o->linears(k, &from_ql), "layer %d: wq_b%s", l, own ? ", indexer wq" : "");
  const float *knw = own ? sc_wx(w, l, SC_WX_IDX_KNORM_W) : NULL;
  if (knw != NULL) /* a checkpoint's indexer key: LayerNorm before its rotary part */
    CK(o->layernorm(k, Tp, s->dI, kv + s->kvw, s->iw, knw, sc_wx(w, l, SC_WX_IDX_KNORM_B),
                    f->mc.arch.index_norm_eps, kv + s->kvw, s->iw),
       "layer %d: indexer k_norm", l);
  /* q's and the KV row's rotary parts, then the index key's and query's: one op */
  sc_ropes rot = {.n_tok = Tp, .pos = ix(s, U_POS), .theta = f->mc.rope_theta,
                  .inv_freq = f->inv_freq, .attn_factor = f->attn_factor};
  if (s->dr > 0) {
    /* q's into qabs, after each head's absorbed latent part (below) */
    rot.part[rot.n_parts++] = (sc_rope_part){
        .n_heads = s->Hl, .rot_dim = s->dr, .x = q + s->dn, .ld_tok = qw, .ld_head = s->qd,
        .out = qabs + s->dc, .ld_tok_out = qaw, .ld_head_out = s->kvw};
    rot.part[rot.n_parts++] = (sc_rope_part){
        .n_heads = 1, .rot_dim = s->dr, .x = kv + s->dc, .ld_tok = s->iw, .ld_head = s->dr};
  }
  if (own && s->idr > 0) {
    rot.part[rot.n_parts++] = (sc_rope_part){
        .n_heads = 1, .rot_dim = s->idr, .x = kv + s->kvw, .ld_tok = s->iw, .ld_head = s->dI};
    rot.part[rot.n_parts++] = (sc_rope_part){
        .n_heads = s->HI, .rot_dim = s->idr, .x = iq, .ld_tok = iqw, .ld_head = s->dI};
  }
  if (rot.n_parts > 0) CK(o->ropes(k, &rot), "layer %d: rope", l);
  /* Absorb W_UK: qabs[t,h,:dc] = q_nope[t,h] * W_UK[h] (q_rope is already after it) */
  const float *wkvb = sc_w(w, l, SC_W_WKV_B);
  const int64_t hstride = (int64_t)(s->dn + s->dv) * s->dc;
  const sc_gemm absorb = {.m = Tp, .n = s->dc, .k = s->dn, .alpha = 1.0f, .a = q, .lda = qw,
                          .stride_a = s->qd, .b = wkvb, .ldb = s->dc, .stride_b = hstride,
                          .c = qabs, .ldc = qaw, .stride_c = s->kvw, .batch = s->Hl};
  CK(o->gemm(k, &absorb), "layer %d: W_UK absorption", l);
  CK(o->memset(k, olat, 0, (size_t)Tp * s->Hl * s->dc * sizeof(float)), "memset");

  /* ---- KV writes: prefill rows (owner copies, gathered over PCP), then decode rows ---- */
  const int32_t prows = m->prefill_rows;
  if (s->has_prefill) {
    const float *src = kv + (size_t)D * s->iw;
    if (s->P > 1) {
      float *pg = f->buf[B_PG];
      CC(coll(s, SC_GROUP_PCP, SC_OP_ALL_GATHER, SC_DT_F32, SC_PURPOSE_PREFILL_KV, prows, s->iw,
              src, pg));
      src = pg;
    }
    CK(cache_write(s, m->num_prefill_src, src, ix(s, U_PSLOT), own), "layer %d: prefill KV write",
       l);
  }
  if (D > 0)
    CK(cache_write(s, D, kv, ix(s, U_DSLOT), own), "layer %d: decode KV write", l);

  /* ---- workspace path: prefill rows under DCP, one context_kv gather per chunk ---- */
  if (s->has_prefill && s->N > 1) {
    float *shard = f->buf[B_SHARD], *ws = f->buf[B_WS];
    const sc_krows wsr_all = {ws, SC_KFMT_F32, s->iw, 0};
    int64_t ssrc_off = 0, deint_off = 0;
    for (int32_t c = 0; c < m->num_chunks; c++) {
      const sc_meta_chunk *mc = &m->chunks[c];
      const int32_t S = mc->shard_rows_total;
      const int32_t *ssrc = (const int32_t *)f->buf[I_SSRC] + ssrc_off;
      const int32_t *deint = (const int32_t *)f->buf[I_DEINT] + deint_off;
      const int32_t *ckpos = (const int32_t *)f->buf[I_CKPOS] + deint_off;
      ssrc_off += S;
      deint_off += mc->extent_total;
      stage(s, SC_STAGE_DENSE);
      CK(shard_pack(s, S, ssrc, shard, own), "layer %d: shard pack", l);
      CC(coll(s, SC_GROUP_DCP, SC_OP_ALL_GATHER, SC_DT_F32, SC_PURPOSE_CONTEXT_KV, S, s->iw,
              shard, ws));
      const int32_t tb = mc->tok_begin, n = mc->tok_end - mc->tok_begin;
      if (n <= 0) continue;
      sc_krows wsr = wsr_all;
      wsr.rows = (int64_t)s->N * S;
      const sc_indexer_args ia = {
          .n_tok = n, .n_heads = s->HI, .dim = s->dI, .topk = s->K,
          .q = iq + (size_t)tb * iqw, .ld_q = iqw, .w = iwt + (size_t)tb * s->HI, .ld_w = s->HI,
          .q_pos = pos + tb, .keys = row_keys(s, ws, wsr.rows), .key_rows = deint,
          .key_pos = ckpos, .key_begin = ix(s, U_KB) + tb,
          .key_end = ix(s, U_KE) + tb, .out_pos = topk + (size_t)tb * s->K,
          .out_cand = capturing(s) ? cand + (size_t)tb * s->K : NULL, /* (else unread) */
          /* the chunk's key list is its extent (deint, ckpos): a bound of every range,
           * which lets a long prompt's chunk take the sampled floors (cuda_indexer.cu) */
          .max_keys = mc->extent_total,
          .keys_shared = keys_shared(m->tok_key_begin, tb, tb + n)};
      stage(s, SC_STAGE_INDEXER);
      if (own) CK(o->indexer_topk(k, &ia), "layer %d: indexer (chunk %d)", l, c);
      CK(capture(s, cand, tb, tb + n), "layer %d: top-K capture", l);
      if (own)
        CK(o->topk_to_workspace(k, n, s->K, topk + (size_t)tb * s->K,
                                ix(s, U_WSB) + tb, S, s->N, s->I,
                                sel + (size_t)tb * s->K),
           "layer %d: top-K to workspace rows", l);
      const sc_attn_args aa = {
          .n_tok = n, .n_heads = s->Hl, .dc = s->dc, .dr = s->dr, .topk = s->K, .scale = scale,
          .q = qabs + (size_t)tb * qaw, .ld_q = qaw, .kv = wsr, .sel = sel + (size_t)tb * s->K,
          .ld_sel = s->K, .out = olat + (size_t)tb * s->Hl * s->dc, .ld_out = (int64_t)s->Hl * s->dc,
          .lse = lsex + (size_t)tb * s->Hl, .ld_lse = s->Hl,
          .model_heads = s->f->mc.heads}; /* (the kernel's choice must not follow T) */
      stage(s, SC_STAGE_ATTENTION);
      CK(o->sparse_attn(k, &aa), "layer %d: prefill attention (chunk %d)", l, c);
    }
  }

  /* ---- cache path: decode rows (and prefill rows without DCP) over the local shard ---- */
  const int32_t cte = m->cache_tok_end;
  const bool dcp_decode = D > 0 && s->N > 1;
  float *qg = f->buf[B_QG];
  stage(s, SC_STAGE_INDEXER);
  if (dcp_decode && s->P == 1) { /* gather the queries of every DCP rank's heads */
    CC(coll(s, SC_GROUP_DCP, SC_OP_ALL_GATHER, SC_DT_F32, SC_PURPOSE_DECODE_Q, D, qaw, qabs, qg));
  }
  if (cte > 0 && own) {
    const sc_indexer_args ia = {
        .n_tok = cte, .n_heads = s->HI, .dim = s->dI, .topk = s->K, .q = iq, .ld_q = iqw,
        .w = iwt, .ld_w = s->HI, .q_pos = pos, .keys = sc_kv_cache_keys(f->cache, l),
        .key_rows = f->buf[I_KSLOT], .key_pos = f->buf[I_KPOS], .key_begin = ix(s, U_KB),
        .key_end = ix(s, U_KE), .out_pos = topk,
        /* the scores go to the other DCP ranks or to a capture, else nowhere: a 32k
         * prompt's would be 512 MB written a layer for nothing */
        .out_cand = dcp_decode || capturing(s) ? cand : NULL,
        /* a token's keys are its request's positions, within bt_w blocks (bt_w is part of
         * a recording's key, so a replay's bound holds) */
        .max_keys = (int32_t)((int64_t)s->bt_w * s->B < INT32_MAX ? (int64_t)s->bt_w * s->B
                                                                      : INT32_MAX),
        /* (a replay may hold another step's hint: it never changes what is selected) */
        .keys_shared = s->cache_keys_shared};
    CK(o->indexer_topk(k, &ia), "layer %d: indexer (local cache)", l);
  }
  if (dcp_decode) { /* every rank selects the same global top-K from all shards' picks */
    sc_kcand *candg = f->buf[B_CANDG];
    /* The plan has this gather in every layer (the planner does not know which layers
     * share their top-K), so a shared layer issues it too and leaves its result unused. */
    CC(coll(s, SC_GROUP_DCP, SC_OP_ALL_GATHER, SC_DT_W32, SC_PURPOSE_TOPK_CANDIDATES, D,
            2 * (int64_t)s->K, cand, candg));
    if (own) CK(o->topk_merge(k, D, s->N, s->K, candg, topk, cand), "layer %d: top-K merge", l);
  }
  CK(capture(s, cand, 0, cte), "layer %d: top-K capture", l);
  if (cte > 0 && own)
    CK(o->topk_to_slots(k, cte, s->K, topk, ix(s, U_REQ), ix(s, U_BT), s->bt_w,
                        s->B, s->N, s->I, m->coords.dcp_rank, sel),
       "layer %d: top-K to cache slots", l);
  stage(s, SC_STAGE_ATTENTION);
  if (cte > 0 && !dcp_decode) {
    /* decode rows [0, D) and prefill rows [D, cte) apart: a backend may run them with
     * different kernels, and a decode token is a decode row in every layout */
    for (int part = 0; part < 2; part++) {
      const int32_t t0 = part == 0 ? 0 : D, t1 = part == 0 ? D : cte;
      if (t1 <= t0) continue;
      const sc_attn_args aa = {
          .n_tok = t1 - t0, .n_heads = s->Hl, .dc = s->dc, .dr = s->dr, .topk = s->K,
          .scale = scale, .q = qabs + (size_t)t0 * qaw, .ld_q = qaw, .kv = cache,
          .sel = sel + (size_t)t0 * s->K, .ld_sel = s->K,
          .out = olat + (size_t)t0 * s->Hl * s->dc, .ld_out = (int64_t)s->Hl * s->dc,
          .lse = lsex + (size_t)t0 * s->Hl, .ld_lse = s->Hl, .decode = part == 0,
          .model_heads = s->f->mc.heads};
      CK(o->sparse_attn(k, &aa), "layer %d: attention (local cache)", l);
    }
  } else if (dcp_decode) {
    /* Partial attention over this shard for H_att heads; rows (member, token, head) in
     * member-major order, so the reduce-scatter hands each member its own heads. */
    const int32_t nq = s->P == 1 ? s->N : 1;
    float *od = s->P == 1 ? f->buf[B_OD] : olat, *lse = f->buf[B_LSE];
    for (int32_t mq = 0; mq < nq; mq++) {
      const float *qsrc = s->P == 1 ? qg + (size_t)mq * D * qaw : qabs;
      const sc_attn_args aa = {
          .n_tok = D, .n_heads = s->Hl, .dc = s->dc, .dr = s->dr, .topk = s->K, .scale = scale,
          .q = qsrc, .ld_q = qaw, .kv = cache, .sel = sel, .ld_sel = s->K,
          .out = od + (size_t)mq * D * s->Hl * s->dc, .ld_out = (int64_t)s->Hl * s->dc,
          .lse = lse + (size_t)mq * D * s->Hl, .ld_lse = s->Hl, .decode = true,
          .model_heads = s->f->mc.heads};
      CK(o->sparse_attn(k, &aa), "layer %d: decode attention (shard)", l);
    }
    CC(lse_merge_coll(s, D, (int64_t)nq * s->Hl, lse, f->buf[B_LSEG], od, olat));
  }

  /* ---- W_UV, o_proj, TP reduce, residual ---- */
  stage(s, SC_STAGE_DENSE);
  const int64_t vw = (int64_t)s->Hl * s->dv;
  const sc_gemm uv = {.trans_b = true, .m = Tp, .n = s->dv, .k = s->dc, .alpha = 1.0f,
                      .a = olat, .lda = (int64_t)s->Hl * s->dc, .stride_a = s->dc,
                      .b = wkvb + (int64_t)s->dn * s->dc, .ldb = s->dc, .stride_b = hstride,
                      .c = ov, .ldc = vw, .stride_c = s->dv, .batch = s->Hl};
  CK(o->gemm(k, &uv), "layer %d: W_UV", l);
  CK(sc_linear(k, Tp, s->hid, vw, ov, vw, sc_w(w, l, SC_W_WO), vw, ao, s->hid, 1.0f),
     "layer %d: o_proj", l);
  if (s->T > 1) {
    CC(coll(s, SC_GROUP_TP, SC_OP_ALL_REDUCE, SC_DT_F32, SC_PURPOSE_ATTN_OUT, Tp, s->hid, ao, ao));
  }
  s->residual = true; /* added by the MLP's norm */
out:
  return rc;
}

static int mlp_layer(step_ctx *s) {
  sc_forward *f = s->f;
  sc_kernels *k = f->k;
  const sc_model_weights *w = f->w;
  const int32_t l = s->layer, Tp = s->Tp, F = s->F;
  int rc = 0;
  float *xn = f->buf[B_XN], *u = f->buf[B_U],
        *h = f->buf[B_H], *ao = f->buf[B_AO];
  CK(sublayer_in(s, sc_w(w, l, SC_W_FFN_NORM), xn), "layer %d: ffn_norm", l);
  if (sc_model_layer_is_moe(&f->mc, l)) { /* the rank's partial sum, as the dense one */
    if ((rc = sc_moe_ffn_run(f->moe, w, l, Tp, xn, s->in->meta->tok_global, ao, s->d))) goto out;
  } else {
    CK(sc_linear_gated(k, Tp, F, s->hid, xn, sc_w(w, l, SC_W_W1), sc_w(w, l, SC_W_W3), h, u),
       "layer %d: w1, w3, swiglu", l);
    CK(sc_linear(k, Tp, s->hid, F, h, F, sc_w(w, l, SC_W_W2), F, ao, s->hid, 1.0f),
       "layer %d: w2", l);
  }
  if (s->T > 1) {
    CC(coll(s, SC_GROUP_TP, SC_OP_ALL_REDUCE, SC_DT_F32, SC_PURPOSE_MLP_OUT, Tp, s->hid, ao, ao));
  }
  s->residual = true; /* added by the next layer's norm, or after the last layer */
out:
  return rc;
}

/* Whether the step's compute can be recorded and replayed (see "recorded steps"). */
static bool recordable(const step_ctx *s) {
  const sc_forward *f = s->f;
  const bool colls_ok = s->in->plan->num_colls == 0 ||
                        (f->comm->ops != NULL && f->comm->ops->recordable);
  return f->recordings && f->k->ops->record_begin != NULL && colls_ok && !s->has_prefill &&
         s->in->meta->num_chunks == 0 && f->moe == NULL &&
         (s->out == NULL || s->out->topk == NULL);
}

/* Grows the step's buffers, uploads its index arrays and builds the cache key list:
 * everything of a step that reads host memory or may allocate, so that what follows
 * (step_body) can be recorded. The rows whose logits are taken are known here too. */
static int step_prepare(step_ctx *s) {
  sc_forward *f = s->f;
  const sc_forward_in *in = s->in;
  const sc_plan *plan = in->plan;
  const sc_meta *m = in->meta;
  const sc_model_config *mc = &f->mc;
  int rc = 0;
  const size_t Tp = (size_t)s->Tp, fl = sizeof(float);
  const int32_t nq = s->P == 1 ? s->N : 1;
  int64_t max_s = 0, sum_s = 0, sum_e = 0;
  for (int32_t c = 0; c < m->num_chunks; c++) {
    if (m->chunks[c].shard_rows_total > max_s) max_s = m->chunks[c].shard_rows_total;
    sum_s += m->chunks[c].shard_rows_total;
    sum_e += m->chunks[c].extent_total;
  }
  const size_t D = (size_t)s->D, K = (size_t)s->K, Hl = (size_t)s->Hl;
  ensure(f, B_X, Tp * s->hid * fl, &rc);
  ensure(f, B_XN, Tp * s->hid * fl, &rc);
  ensure(f, B_QL, Tp * mc->q_lora_rank * fl, &rc);
  ensure(f, B_Q, Tp * Hl * s->qd * fl, &rc);
  ensure(f, B_QABS, Tp * Hl * s->kvw * fl, &rc);
  ensure(f, B_KV, Tp * s->iw * fl, &rc);
  ensure(f, B_IQ, Tp * s->HI * s->dI * fl, &rc);
  ensure(f, B_IW, Tp * s->HI * fl, &rc);
  ensure(f, B_OLAT, Tp * Hl * s->dc * fl, &rc);
  ensure(f, B_OV, Tp * Hl * s->dv * fl, &rc);
  ensure(f, B_AO, Tp * s->hid * fl, &rc);
  ensure(f, B_U, Tp * s->F * fl, &rc);
  ensure(f, B_H, Tp * s->F * fl, &rc);
  ensure(f, B_PG, (size_t)m->num_prefill_src * s->iw * fl, &rc);
  ensure(f, B_SHARD, (size_t)max_s * s->iw * fl, &rc);
  ensure(f, B_WS, (size_t)s->N * max_s * s->iw * fl, &rc);
  ensure(f, B_TOPK, Tp * K * sizeof(int32_t), &rc);
  ensure(f, B_SEL, Tp * K * sizeof(int32_t), &rc);
  ensure(f, B_CAND, Tp * K * sizeof(sc_kcand), &rc);
  ensure(f, B_CANDG, (size_t)s->N * D * K * sizeof(sc_kcand), &rc);
  ensure(f, B_QG, (size_t)s->N * D * Hl * s->kvw * fl, &rc);
  ensure(f, B_OD, (size_t)nq * D * Hl * s->dc * fl, &rc);
  ensure(f, B_LSE, (size_t)nq * D * Hl * fl, &rc);
  ensure(f, B_LSEG, (size_t)s->N * nq * D * Hl * fl, &rc);
  ensure(f, B_LSEX, Tp * Hl * fl, &rc);
  ensure(f, B_XG, (size_t)s->P * Tp * s->hid * fl, &rc);
  ensure(f, B_XL, (size_t)plan->num_reqs * s->hid * fl, &rc);
  ensure(f, B_LOGITS, (size_t)plan->num_reqs * mc->vocab * fl, &rc);
  CK(rc, "forward: cannot allocate step buffers");
  if (s->tokens) {
    ensure(f, B_MARGIN, (size_t)plan->num_reqs * fl, &rc);
    CK(rc ? rc : grow_greedy(f, (size_t)plan->num_reqs * sizeof(int32_t)),
       "forward: cannot allocate step buffers");
  }

  /* ---- index arrays ---- */
  const size_t nr = (size_t)plan->num_reqs, bt_n = nr * (size_t)s->bt_w;
  const size_t nfol = (size_t)in->n_follow, ntok = (size_t)plan->num_tokens;
  const size_t host_need = Tp + nr + bt_n + (nfol ? 2 * nfol + ntok : 0) + 4 * nr;
  if (f->host_cap < host_need) {
    int32_t *p = realloc(f->host_ids, host_need * sizeof *p);
    CK(p == NULL ? SC_ENOMEM : 0, "out of memory");
    f->host_ids = p;
    f->host_cap = host_need;
  }
  int32_t *ids = f->host_ids, *last = ids + Tp, *bt_host = last + nr;
  int32_t *fat = bt_host + bt_n, *frow = fat + nfol, *follow_of = frow + nfol;
  int32_t *dtemp = follow_of + (nfol ? ntok : 0), *dseed = dtemp + nr, *doidx = dseed + 2 * nr;
  if (nfol > 0) { /* the step before must be the one whose greedy rows B_GREEDY holds */
    CK(in->follows == 0 || in->follows != f->greedy_of || f->last_step != in->follows
           ? SC_EPROTO : 0,
       "step %llu follows step %llu, but the step before on this rank was %llu (greedy rows "
       "of %llu)", (unsigned long long)in->step, (unsigned long long)in->follows,
       (unsigned long long)f->last_step, (unsigned long long)f->greedy_of);
    for (size_t g = 0; g < ntok; g++) follow_of[g] = -1;
    for (size_t j = 0; j < nfol; j++) {
      const int32_t g = in->follow_tok[j], r = in->follow_row[j];
      CK(g < 0 || (size_t)g >= ntok || follow_of[g] >= 0 || r < 0 || r >= f->greedy_rows
             ? SC_EPROTO : 0,
         "step %llu: token %d from row %d of step %llu: no such token or row (or twice)",
         (unsigned long long)in->step, g, r, (unsigned long long)in->follows);
      follow_of[g] = (int32_t)j;
    }
  }
  for (int32_t i = 0; i < plan->num_reqs; i++)
    if (plan->reqs[i].extent > mc->max_position)
      CK(SC_ERANGE, "request %d reaches extent %d; the model's max_position is %d", i,
         plan->reqs[i].extent, mc->max_position);
  s->nf = 0;
  for (size_t t = 0; t < Tp; t++) {
    const int32_t g = m->tok_global[t];
    if (nfol > 0 && g >= 0 && follow_of[g] >= 0) { /* (the device puts it there) */
      CK(s->nf >= (int32_t)nfol ? SC_EPROTO : 0, "step %llu: a followed token held twice",
         (unsigned long long)in->step);
      ids[t] = 0;
      fat[s->nf] = (int32_t)t;
      frow[s->nf++] = in->follow_row[follow_of[g]];
      continue;
    }
    ids[t] = g < 0 ? -1 : in->tokens[g];
    if (g >= 0 && (ids[t] < 0 || ids[t] >= mc->vocab))
      CK(SC_EINVAL, "token id %d of global token %d is outside the vocabulary [0, %d)", ids[t], g,
         mc->vocab);
  }
  /* the block table, its rows widened to bt_w (the columns past max_blocks are never read:
   * a position's block is below its request's extent) */
  for (size_t r = 0; r < nr; r++) {
    memcpy(bt_host + r * s->bt_w, in->block_table + r * in->max_blocks,
           (size_t)in->max_blocks * sizeof *bt_host);
    for (int32_t b = in->max_blocks; b < s->bt_w; b++) bt_host[r * s->bt_w + b] = -1;
  }
  /* the hidden rows of the last tokens whose logits are taken */
  s->nl = 0;
  s->draws = false;
  for (int32_t i = 0; i < plan->num_reqs; i++) {
    if (!has_logits_row(m, in->sample, i)) continue;
    const float t = in->temperature != NULL ? in->temperature[i] : 0.0f;
    s->draws |= s->tokens && t > 0.0f;
    memcpy(&dtemp[s->nl], &t, sizeof t);
    const uint64_t seed = in->seed != NULL ? in->seed[i] : 0;
    dseed[2 * s->nl] = (int32_t)(uint32_t)seed; /* (little-endian: read back as uint64) */
    dseed[2 * s->nl + 1] = (int32_t)(uint32_t)(seed >> 32);
    doidx[s->nl] = in->out_index != NULL ? in->out_index[i] : 0;
    last[s->nl++] = m->hidden_restore[m->last_token[i]];
  }
  const size_t nkr = (size_t)m->num_key_ranges;
  upload_src up[U_COUNT] = {
      [U_IDS] = {ids, Tp}, [U_POS] = {m->tok_pos, Tp}, [U_REQ] = {m->tok_req, Tp},
      [U_DSLOT] = {m->decode_slots, D}, [U_PSLOT] = {m->prefill_slots, (size_t)m->num_prefill_src},
      [U_LAST] = {last, (size_t)s->nl}, [U_KRREQ] = {m->key_range_req, nkr},
      [U_KRB] = {m->key_range_begin, nkr}, [U_KRE] = {m->key_range_end, nkr},
      [U_KB] = {m->tok_key_begin, Tp}, [U_KE] = {m->tok_key_end, Tp},
      [U_WSB] = {m->tok_ws_base, Tp}, [U_BT] = {bt_host, bt_n},
      [U_FAT] = {fat, (size_t)s->nf}, [U_FROW] = {frow, (size_t)s->nf},
      [U_TEMP] = {dtemp, s->draws ? (size_t)s->nl : 0},
      [U_SEED] = {dseed, s->draws ? 2 * (size_t)s->nl : 0},
      [U_OIDX] = {doidx, s->draws ? (size_t)s->nl : 0}};
  const bool one_copy = !s->has_prefill && m->num_chunks == 0; /* decode rows only */
  const uint64_t u0 = sc_now_ns();
  CK(upload_all(s, &f->up[one_copy ? 0 : 1], up, one_copy),
     "forward: cannot upload the step's index arrays");
  s->upload_ns = sc_now_ns() - u0;
  int32_t *kslot = ensure(f, I_KSLOT, key_list_bytes(m->num_keys), &rc);
  int32_t *kpos = ensure(f, I_KPOS, key_list_bytes(m->num_keys), &rc);
  /* the cache key list (1 MB a step at a 128k context) is filled on the kernels' side */
  if (rc == 0 && m->num_keys > 0) {
    const uint64_t k0 = sc_now_ns();
    rc = f->k->ops->cache_keys(f->k, m->num_key_ranges, m->num_keys, ix(s, U_KRREQ),
                               ix(s, U_KRB), ix(s, U_KRE), ix(s, U_BT), s->bt_w,
                               f->pc.block_size, f->pc.dcp, f->pc.interleave,
                               m->coords.dcp_rank, kpos, kslot);
    s->keys_ns = sc_now_ns() - k0;
  }
  int32_t *ssrc = ensure(f, I_SSRC, (size_t)sum_s * sizeof(int32_t), &rc);
  int32_t *deint = ensure(f, I_DEINT, (size_t)sum_e * sizeof(int32_t), &rc);
  int32_t *ckpos = ensure(f, I_CKPOS, (size_t)sum_e * sizeof(int32_t), &rc);
  CK(rc, "forward: cannot upload the step's index arrays");
  for (int32_t c = 0; c < m->num_chunks && rc == 0; c++) {
    const sc_meta_chunk *ch = &m->chunks[c];
    if ((rc = f->k->ops->copy(f->k, ssrc, ch->shard_src, (size_t)ch->shard_rows_total * 4,
                              SC_KCOPY_H2D)) ||
        (rc = f->k->ops->copy(f->k, deint, ch->deinterleave, (size_t)ch->extent_total * 4,
                              SC_KCOPY_H2D)) ||
        (rc = f->k->ops->copy(f->k, ckpos, ch->key_pos, (size_t)ch->extent_total * 4,
                              SC_KCOPY_H2D)))
      break;
    ssrc += ch->shard_rows_total;
    deint += ch->extent_total;
    ckpos += ch->extent_total;
  }
  CK(rc, "forward: cannot upload the chunk index arrays");
out:
  return rc;
}

/* The step's compute on the kernels' queue, from the embedding to the logits of the last
 * rows (B_LOGITS): no host memory and no allocation, so that it can be recorded. */
static int step_body(step_ctx *s) {
  sc_forward *f = s->f;
  const sc_model_config *mc = &f->mc;
  int rc = 0;
  const int64_t Tp = s->Tp;
  float *x = f->buf[B_X];
  /* (a step whose recording failed runs again on the same s: no residual of the failed
   * run may be added to this run's embedding) */
  s->residual = false;
  if (s->nf > 0)
    CK(f->k->ops->take_tokens(f->k, s->nf, ix(s, U_FAT), ix(s, U_FROW), f->buf[B_GREEDY],
                              ix(s, U_IDS)),
       "forward: the tokens of step %llu", (unsigned long long)s->in->follows);
  const sc_krows embed = {f->w->t[SC_W_EMBED], SC_KFMT_F32, s->hid, mc->vocab};
  CK(f->k->ops->gather_rows(f->k, Tp, s->hid, embed, ix(s, U_IDS),
                            (sc_krows){x, SC_KFMT_F32, s->hid, Tp}),
     "forward: embedding");

  for (s->layer = 0; s->layer < mc->layers; s->layer++) {
    /* a checkpoint's resident fp8 weights of this layer, expanded to f32 (weights.h) */
    CK(sc_model_weights_expand(f->k, f->w, s->layer), "layer %d: cannot expand its fp8 weights",
       s->layer);
    if ((rc = attention_layer(s)) || (rc = mlp_layer(s))) goto out;
  }
  s->layer = -1;
  const bool want_logits = (s->tokens || (s->out != NULL && s->out->logits != NULL)) &&
                           s->nl > 0;
  /* One rank whose every row gives logits (a decode step): the last residual add and the
   * final norm are one op over all rows, and the gather moves normed rows (a row's norm
   * is its own: the same values as norming the gathered rows) */
  const bool norm_all = want_logits && s->P == 1 && s->nl == Tp && s->residual;
  if (norm_all) {
    s->residual = false;
    CK(f->k->ops->add_rmsnorm(f->k, Tp, s->hid, f->buf[B_AO], s->hid, x, s->hid,
                              f->w->t[SC_W_NORM], mc->rms_eps, f->buf[B_XN], s->hid),
       "forward: the last layer's residual and the final norm");
  }
  CK(residual_flush(s), "forward: the last layer's residual");

  /* ---- restore the global token order, final norm, LM head ---- */
  stage(s, SC_STAGE_HEAD);
  float *xg = norm_all ? f->buf[B_XN] : x;
  if (s->P > 1) {
    xg = f->buf[B_XG];
    CC(coll(s, SC_GROUP_PCP, SC_OP_ALL_GATHER, SC_DT_F32, SC_PURPOSE_HIDDEN_RESTORE, s->Tp, s->hid,
            x, xg));
  }
  if (!want_logits) goto out;
  float *xl = f->buf[B_XL], *logits = f->buf[B_LOGITS];
  CK(f->k->ops->gather_rows(f->k, s->nl, s->hid,
                            (sc_krows){xg, SC_KFMT_F32, s->hid, (int64_t)s->P * s->Tp},
                            ix(s, U_LAST), (sc_krows){xl, SC_KFMT_F32, s->hid, s->nl}),
     "forward: last-token rows");
  if (!norm_all)
    CK(f->k->ops->rmsnorm(f->k, s->nl, s->hid, xl, s->hid, f->w->t[SC_W_NORM], mc->rms_eps, xl,
                          s->hid),
       "forward: final norm");
  CK(sc_linear(f->k, s->nl, mc->vocab, s->hid, xl, s->hid, f->w->t[SC_W_HEAD], s->hid, logits,
               mc->vocab, 1.0f),
     "forward: LM head");
  if (s->tokens)
    CK(f->k->ops->argmax_rows(f->k, s->nl, mc->vocab, logits, mc->vocab, f->buf[B_GREEDY],
                              f->buf[B_MARGIN]),
       "forward: greedy tokens");
  if (s->draws)
    CK(f->k->ops->draw_rows(f->k, s->nl, mc->vocab, logits, mc->vocab, (float *)ix(s, U_TEMP),
                            (uint64_t *)ix(s, U_SEED), ix(s, U_OIDX), f->buf[B_GREEDY]),
       "forward: tokens drawn at a temperature");
out:
  return rc;
}

/* The logits of the selected requests, and their greedy tokens, to the caller's memory,
 * once the step has run. */
static int step_download(step_ctx *s) {
  sc_forward *f = s->f;
  const sc_plan *plan = s->in->plan;
  const sc_meta *m = s->in->meta;
  const size_t vocab = (size_t)f->mc.vocab;
  if (s->out == NULL) return 0;
  const float *logits = f->buf[B_LOGITS];
  int32_t r = 0;
  int rc = 0;
  for (int32_t i = 0; s->out->logits != NULL && i < plan->num_reqs; i++) {
    float *dst = s->out->logits + (size_t)i * vocab;
    if (!has_logits_row(m, s->in->sample, i)) {
      memset(dst, 0, vocab * sizeof(float));
      continue;
    }
    const float *row = logits + (size_t)r++ * vocab;
    if (s->out->logits_of != NULL && !s->out->logits_of[i]) continue;
    CK(f->k->ops->copy(f->k, dst, row, vocab * sizeof(float), SC_KCOPY_D2H_DEFERRED),
       "forward: logits download");
  }
  if (s->out->greedy != NULL && s->nl > 0)
    CK(f->k->ops->copy(f->k, s->out->greedy, f->buf[B_GREEDY], (size_t)s->nl * sizeof(int32_t),
                       SC_KCOPY_D2H_DEFERRED),
       "forward: greedy tokens download");
  if (s->out->greedy != NULL && s->out->margins != NULL && s->nl > 0)
    CK(f->k->ops->copy(f->k, s->out->margins, f->buf[B_MARGIN], (size_t)s->nl * sizeof(float),
                       SC_KCOPY_D2H_DEFERRED),
       "forward: greedy margins download");
out:
  return rc;
}

/* How often a key may fail to record before its steps just run (a shape that needs new
 * scratch every time would otherwise be recorded and thrown away every step). */
#define REC_MAX_FAILS 3

static struct sc_forward_rec *rec_slot(sc_forward *f, const rec_key *key) {
  struct sc_forward_rec *victim = &f->rec[0];
  for (int i = 0; i < SC_FORWARD_RECS; i++) {
    struct sc_forward_rec *e = &f->rec[i];
    if (e->last_used > 0 && memcmp(&e->key, key, sizeof *key) == 0) return e;
    if (e->last_used < victim->last_used) victim = e;
  }
  f->k->ops->recording_free(f->k, victim->rec);
  sc_coll *colls = victim->colls; /* (the room is kept) */
  const int32_t cap = victim->cap_colls;
  memset(victim, 0, sizeof *victim);
  victim->key = *key;
  victim->colls = colls, victim->cap_colls = cap;
  return victim;
}

/* Where the step's collective session stood, to go back to when a step that was
 * checked or recorded ends up running op by op after all (nothing of it ran). */
typedef struct sess_mark {
  sc_coll_session sess;
  sc_coll_stat stats[SC_PURPOSE_COUNT];
} sess_mark;

static void sess_mark_take(const step_ctx *s, sess_mark *m) {
  m->sess = *s->sess;
  memcpy(m->stats, s->sess->comm->stats, sizeof m->stats);
}
static void sess_mark_restore(step_ctx *s, const sess_mark *m) {
  *s->sess = m->sess;
  memcpy(s->sess->comm->stats, m->stats, sizeof m->stats);
}

static int step_recorded(step_ctx *s) {
  sc_forward *f = s->f;
  sc_kernels *k = f->k;
  rec_key key;
  memset(&key, 0, sizeof key); /* (compared with memcmp: no stray padding bytes) */
  key.t_pad = s->Tp, key.decode = s->D, key.reqs = s->in->plan->num_reqs;
  key.logits_rows = s->nl, key.bt_w = s->bt_w, key.profile = s->in->profile;
  key.logits = s->out != NULL && s->out->logits != NULL;
  key.greedy = s->tokens;
  key.draws = s->draws;
  key.follow = s->nf;
  key.comm_instance = s->in->plan->num_colls > 0 ? f->comm->instance : 0;
  struct sc_forward_rec *e = rec_slot(f, &key);
  e->last_used = ++f->steps;
  sess_mark mark;
  sess_mark_take(s, &mark);
  if (e->rec != NULL && e->buf_epoch == f->buf_epoch) {
    int rc = sc_coll_session_replay(s->sess, e->colls, e->num_colls);
    if (rc) {
      if (s->d) *s->d = s->sess->diag;
      return rc;
    }
    if ((rc = k->ops->replay(k, e->rec)) == 0) {
      if (s->in->profile) f->prof = e->prof;
      f->replays++;
      return 0;
    }
    if (rc != SC_EAGAIN) return sc_fail(s->d, rc, "forward: cannot replay the step");
    sess_mark_restore(s, &mark); /* nothing was launched: recorded again below */
  }
  k->ops->recording_free(k, e->rec);
  e->rec = NULL;
  e->num_colls = 0;
  if (e->fails >= REC_MAX_FAILS) return step_body(s);
  const sc_step_prof before = f->prof;
  int rc = k->ops->record_begin(k);
  if (rc == 0) {
    f->recording = e;
    const int body_rc = step_body(s);
    f->recording = NULL;
    rc = k->ops->record_end(k, &e->rec);
    if (rc == 0 && body_rc != 0) { /* an op failed: the recording stops short of the step */
      k->ops->recording_free(k, e->rec);
      e->rec = NULL;
      rc = body_rc;
    }
  }
  if (rc == 0) {
    e->fails = 0;
    e->buf_epoch = f->buf_epoch;
    e->prof = f->prof;
    f->records++;
    if ((rc = k->ops->replay(k, e->rec)) != 0)
      return sc_fail(s->d, rc, "forward: cannot replay the step just recorded");
    return 0;
  }
  /* Nothing ran: the same ops once more, as they are called. That grows what they needed
   * (SC_EAGAIN: scratch), and any other failure (the recording's own, or an op's) shows
   * there with its own message, or does not recur. */
  SC_DEBUG("forward", "step %llu not recorded (%s): its ops run as they are called",
           (unsigned long long)s->in->step, sc_strerror(rc));
  e->fails++;
  f->prof = before;
  sess_mark_restore(s, &mark); /* the recorded requests launched nothing */
  s->layer = -1;
  if (s->d) *s->d = (sc_diag){0};
  return step_body(s);
}

static int forward_step(sc_forward *f, const sc_forward_in *in, sc_forward_out *out,
                        sc_coll_session *sess, sc_diag *d);

/* Steps whose stamps are kept: when step o finishes, o - 1's are read and o + 1 (the
 * most that may be queued meanwhile) writes its own, so three would do; a power of two
 * keeps the modulo plain. */
#define GAP_RING 4
_Static_assert(2 * GAP_RING <= SC_KSTAMP_MAX, "two stamps a step");

static int gap_stamp(sc_forward *f, bool end) {
  return f->k->ops->stamp(f->k, 2 * (int32_t)(f->queued % GAP_RING) + end);
}

int sc_forward_gap(const sc_forward *f, int64_t *ns) {
  if (f->finished < 2) return SC_ENOENT;
  const uint64_t o = f->finished - 1; /* the step just finished */
  return f->k->ops->stamp_gap(f->k, 2 * (int32_t)((o - 1) % GAP_RING) + 1,
                              2 * (int32_t)(o % GAP_RING), ns);
}

int sc_forward_step(sc_forward *f, const sc_forward_in *in, sc_forward_out *out, sc_diag *d) {
  if (f->sess_n == SC_FORWARD_IN_FLIGHT)
    return sc_fail(d, SC_EINVAL, "forward: step %llu queued with %d steps unfinished",
                   (unsigned long long)in->step, SC_FORWARD_IN_FLIGHT);
  sc_coll_session *sess = &f->sess[(f->sess_head + f->sess_n) % SC_FORWARD_IN_FLIGHT];
  f->sess_n++;
  const int rc = forward_step(f, in, out, sess, d);
  if (rc) f->sess_n--; /* (a step that failed to queue has nothing to finish) */
  else f->queued++;
  return rc;
}

int sc_forward_finish(sc_forward *f, sc_diag *d) {
  if (f->sess_n == 0) return 0;
  sc_coll_session *sess = &f->sess[f->sess_head];
  f->sess_head = (f->sess_head + 1) % SC_FORWARD_IN_FLIGHT;
  f->sess_n--;
  f->finished++;
  const int rc = sc_coll_session_finish(sess);
  if (rc && d) *d = sess->diag;
  return rc;
}

/* sc_forward_step with the step's session. */
static int forward_step(sc_forward *f, const sc_forward_in *in, sc_forward_out *out,
                        sc_coll_session *sess, sc_diag *d) {
  const sc_plan *plan = in->plan;
  const sc_meta *m = in->meta;
  const sc_model_config *mc = &f->mc;
  step_ctx sx = {.f = f, .in = in, .out = out, .sess = sess, .d = d, .layer = -1};
  step_ctx *s = &sx;
  int rc = 0;
  s->Tp = m->t_pad, s->D = m->num_decode;
  s->Hl = mc->heads / f->pc.tp, s->dn = mc->qk_nope_dim, s->dr = mc->rope_dim;
  s->dc = mc->kv_lora_rank, s->dv = mc->v_head_dim, s->qd = sc_model_q_head_dim(mc);
  s->kvw = s->dc + s->dr, s->iw = s->kvw + mc->index_dim, s->HI = mc->index_heads;
  s->dI = mc->index_dim, s->idr = sc_model_index_rope_dim(mc), s->K = mc->topk;
  s->hid = mc->hidden, s->F = mc->ffn_hidden / f->pc.tp;
  s->P = f->pc.pcp, s->N = f->pc.dcp, s->T = f->pc.tp, s->I = f->pc.interleave;
  s->B = f->pc.block_size;
  s->bt_w = pow2_at_least(in->max_blocks);
  s->cache_keys_shared = keys_shared(m->tok_key_begin, 0, m->cache_tok_end);
  for (int32_t i = 0; i < plan->num_ordered && !s->has_prefill; i++)
    s->has_prefill = plan->reqs[plan->order[i]].flags & SC_REQ_PREFILL;
  sc_coll_session_begin(s->sess, f->comm, plan->colls, plan->num_colls, in->step);
  s->tokens = in->device_tokens || (out != NULL && out->greedy != NULL);
  sc_step_prof_begin(&f->prof, in->profile ? f->k : NULL);

  /* (four clock reads a step: cheap enough to take always) */
  uint64_t t[4] = {sc_now_ns(), 0, 0, 0};
  const uint64_t replays = f->replays;
  if ((rc = step_prepare(s))) goto out;
  t[1] = sc_now_ns();
  CK(gap_stamp(f, false), "forward: step stamp");
  if ((rc = recordable(s) ? step_recorded(s) : step_body(s))) goto out;
  CK(sc_coll_session_end(s->sess), "%s", s->sess->diag.msg);
  CK(gap_stamp(f, true), "forward: step stamp");
  t[2] = sc_now_ns();
  if ((rc = step_download(s))) goto out;
  sc_step_prof_end(&f->prof);
  t[3] = sc_now_ns();
  f->host = (sc_forward_host){.prepare_ns = t[1] - t[0], .upload_ns = s->upload_ns,
                              .keys_ns = s->keys_ns, .compute_ns = t[2] - t[1],
                              .download_ns = t[3] - t[2], .replayed = f->replays != replays};
out:
  f->last_step = in->step;
  /* what B_GREEDY holds once this step has been queued, for the step after if it follows
   * (step_prepare checks): nothing usable until it was queued without a failure */
  f->greedy_of = rc == 0 && s->tokens ? in->step : 0;
  f->greedy_rows = f->greedy_of ? s->nl : 0;
  return rc;
}

void sc_forward_set_recordings(sc_forward *f, bool on) { f->recordings = on; }

sc_forward_host sc_forward_host_profile(const sc_forward *f) { return f->host; }

void sc_forward_recording_stats(const sc_forward *f, uint64_t *records, uint64_t *replays) {
  *records = f->records;
  *replays = f->replays;
}

int sc_forward_profile(const sc_forward *f, uint64_t ns[SC_STAGE_COUNT], uint64_t *span) {
  return sc_step_prof_read(&f->prof, ns, span);
}


