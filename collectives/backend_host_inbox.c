/* backend_host_inbox.c - which blocks a rank of the host backend holds: the rules of
 * backend_host.h, applied to each message as it is read. */
#include "collectives/backend_host_inbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/zap.h"

#define LOG "coll"
#define ADMIT (-1) /* judge(): the block may be held */
#define STALE (-2) /* judge(): too late (its collective is over here): dropped unsaid */

static const char *const k_reasons[SC_HOST_REFUSED_COUNT] = {
    "no valid source rank",        "malformed",
    "the sender is not a member of that group",
    "not a collective the sender can be at", "not the planned size",
    "a second block for that collective",     "it does not fit the plan of its step"};

const char *sc_host_refusal_name(int reason) {
  return (unsigned)reason < SC_HOST_REFUSED_COUNT ? k_reasons[reason] : "?";
}

int sc_inbox_init(sc_host_inbox *in, int32_t world, int32_t rank, bool curve,
                  size_t max_block_bytes, int32_t *const members[SC_GROUP_COUNT],
                  const int32_t size[SC_GROUP_COUNT]) {
  *in = (sc_host_inbox){.world = world, .rank = rank, .curve = curve,
                        .max_block_bytes = max_block_bytes};
  for (int g = 0; g < SC_GROUP_COUNT; g++) {
    in->members[g] = members[g];
    in->size[g] = size[g];
  }
  in->limits = calloc((size_t)world + 1, sizeof *in->limits);
  return in->limits ? 0 : SC_ENOMEM;
}

/* Unlinks *pp (a held block) and returns it. */
static sc_inbox_block *unlink_held(sc_host_inbox *in, sc_inbox_block **pp) {
  sc_inbox_block *b = *pp;
  *pp = b->next;
  in->held_blocks--;
  in->held_bytes -= zmq_msg_size(&b->payload);
  return b;
}

void sc_inbox_drop(sc_inbox_block *b) {
  zmq_msg_close(&b->payload);
  free(b);
}

void sc_inbox_free(sc_host_inbox *in) {
  while (in->held) sc_inbox_drop(unlink_held(in, &in->held));
  for (int g = 0; g < SC_GROUP_COUNT; g++) free(in->plan[g].bytes);
  free(in->limits);
  in->limits = NULL;
}

/* ---- sources ---- */

/* The frame whose properties (User-Id) to read: the first after the identity. (libzmq
 * 4.3 gives the identity frame none when a poll found the message first.) */
static zmq_msg_t *property_frame(zmq_msg_t f[3], int32_t num_frames) {
  return num_frames > 1 ? &f[1] : &f[0];
}

/* The source rank of a message (frames as sc_inbox_offer has them), or -1. With CURVE
 * the ZAP handler's User-Id, which the peer cannot choose: its identity is then ignored;
 * else the DEALER identity, exactly "r<rank>". */
static int32_t source_of(const sc_host_inbox *in, zmq_msg_t f[3], int32_t num_frames) {
  return in->curve ? sc_zap_user_rank(zmq_msg_gets(property_frame(f, num_frames), "User-Id"),
                                      in->world)
                   : sc_zap_routing_rank(zmq_msg_data(&f[0]), zmq_msg_size(&f[0]), 'r',
                                         in->world, 0);
}

/* Up to 24 bytes as log text: printable ASCII as is, anything else as \xNN. */
static void escape(const char *p, size_t n, char *out, size_t cap) {
  size_t o = 0;
  for (size_t i = 0; i < n && i < 24 && o + 5 < cap; i++) {
    const unsigned char c = (unsigned char)p[i];
    o += (size_t)snprintf(out + o, cap - o, c >= 0x20 && c < 0x7f && c != '"' && c != '\\'
                                                ? "%c" : "\\x%02x", c);
  }
  snprintf(out + o, cap - o, "%s", n > 24 ? "..." : "");
}

static void describe_source(const sc_host_inbox *in, int32_t src, zmq_msg_t f[3],
                            int32_t num_frames, char *out, size_t cap) {
  char text[128];
  if (src >= 0) {
    snprintf(out, cap, "rank %d%s", src, src == in->rank ? " (this rank itself)" : "");
  } else if (!in->curve) {
    escape(zmq_msg_data(&f[0]), zmq_msg_size(&f[0]), text, sizeof text);
    snprintf(out, cap, "a peer with identity \"%s\"", text);
  } else {
    const char *uid = zmq_msg_gets(property_frame(f, num_frames), "User-Id");
    escape(uid ? uid : "", uid ? strlen(uid) : 0, text, sizeof text);
    snprintf(out, cap, "a peer with %s \"%s\"", uid ? "User-Id" : "no User-Id, identity", text);
  }
}

/* Counts a refused block and logs it, at most one line per source per interval. The
 * caller frees it. f: the message's frames (num_frames), read only to name an unknown
 * source; h: its header, or NULL when it has none to show. */
static void refuse(sc_host_inbox *in, sc_host_refusal why, int32_t src, zmq_msg_t f[3],
                   int32_t num_frames, const sc_inbox_header *h, size_t bytes) {
  in->refused_by[why]++;
  unsigned long long held = 0;
  if (!sc_log_limit_pass(&in->limits[src >= 0 ? src : in->world], sc_now_ns(), &held))
    return;
  char who[192], what[128] = "";
  describe_source(in, src, f, num_frames, who, sizeof who);
  if (h)
    snprintf(what, sizeof what, " (step %llu, %s group, collective %u, %zu bytes)",
             (unsigned long long)h->epoch, sc_group_name((int)h->group), h->seq, bytes);
  SC_WARN(LOG, "rank %d: refused a block from %s%s: %s; %llu more from that source held "
          "back since the last such line", in->rank, who, what, sc_host_refusal_name(why),
          held);
}

/* ---- the rules ---- */

static bool is_member(const sc_host_inbox *in, uint32_t g, int32_t src) {
  for (int32_t k = 0; g < SC_GROUP_COUNT && k < in->size[g]; k++)
    if (in->members[g][k] == src) return true;
  return false;
}

static bool holds(const sc_host_inbox *in, const sc_inbox_header *h, int32_t src) {
  for (const sc_inbox_block *b = in->held; b; b = b->next)
    if (b->h.epoch == h->epoch && b->h.group == h->group && b->h.seq == h->seq &&
        b->src == src)
      return true;
  return false;
}

/* The block of src for group g of a step after the current one held already, or NULL. */
static sc_inbox_block **early_of(sc_host_inbox *in, uint32_t g, int32_t src) {
  for (sc_inbox_block **pp = &in->held; *pp; pp = &(*pp)->next)
    if ((*pp)->h.epoch > in->epoch && (*pp)->h.group == g && (*pp)->src == src) return pp;
  return NULL;
}

/* The size rule: the plan of the block's step when it is known, else max_block_bytes. */
static int fits(const sc_host_inbox *in, const sc_inbox_header *h, size_t bytes) {
  if (!in->planned || in->plan_epoch != h->epoch)
    return in->max_block_bytes == 0 || bytes <= in->max_block_bytes ? ADMIT
                                                                      : SC_HOST_REFUSED_SIZE;
  const sc_inbox_sizes *p = &in->plan[h->group];
  if (h->seq >= (uint32_t)p->num) return SC_HOST_REFUSED_SEQ;
  return p->bytes[h->seq] == bytes ? ADMIT : SC_HOST_REFUSED_SIZE;
}

/* Whether the block of src (header h, bytes of payload) may be held: ADMIT, STALE, or
 * why not. */
static int judge(const sc_host_inbox *in, const sc_inbox_header *h, int32_t src,
                 size_t bytes) {
  /* a block of an earlier step (its sender was in a step aborted here): no offence */
  if (h->epoch < in->epoch) return STALE;
  /* A later step, usually the next one; not only: a step this rank never entered (its
   * executor learned of the step's abort before it ran it) leaves this rank's epoch
   * behind while its peers go on to the step after. */
  const bool next = h->epoch > in->epoch;
  if (!is_member(in, h->group, src)) return SC_HOST_REFUSED_GROUP;
  /* Where the sender can be. It ends a collective of a group only with this rank's block
   * for it, which this rank sends on entering that collective: so it is at most one
   * collective ahead of this rank's position in the group (seq: the collective running
   * or, between two, the next), and in the next step, whose plan this rank may not have
   * yet, at the first collective of the group; and in one later step at a time: it
   * leaves that collective only with this rank's block, or by failing that step, and
   * then its block for it will never be taken (make_room_early drops it). That is also
   * what bounds the memory of blocks held early: one per (source, group) for later
   * steps, two for this one. A
   * block of a collective this rank has left came too late for it (it failed): stale. */
  const uint32_t first = next ? 0 : in->seq[h->group], last = next ? 0 : first + 1;
  if (h->seq < first) return STALE;
  if (h->seq > last) return SC_HOST_REFUSED_SEQ;
  if (holds(in, h, src)) return SC_HOST_REFUSED_DUPLICATE;
  return fits(in, h, bytes);
}

/* A later step's block of src for group g is about to be held: one held already for an
 * earlier later step is stale (src failed that step and went on) and goes, unsaid; one
 * for a still later step means this block is the stale one (false: do not hold it). */
static bool make_room_early(sc_host_inbox *in, const sc_inbox_header *h, int32_t src) {
  if (h->epoch <= in->epoch) return true;
  sc_inbox_block **pp = early_of(in, h->group, src);
  if (pp == NULL) return true;
  if ((*pp)->h.epoch > h->epoch) return false;
  sc_inbox_drop(unlink_held(in, pp));
  return true;
}

static int hold(sc_host_inbox *in, const sc_inbox_header *h, int32_t src, zmq_msg_t *payload) {
  sc_inbox_block *b = malloc(sizeof *b);
  if (b == NULL) return SC_ENOMEM;
  *b = (sc_inbox_block){.h = *h, .src = src, .next = in->held};
  zmq_msg_init(&b->payload);
  zmq_msg_move(&b->payload, payload);
  in->held = b;
  in->held_blocks++;
  in->held_bytes += zmq_msg_size(&b->payload);
  return 0;
}

void sc_inbox_offer(sc_host_inbox *in, zmq_msg_t f[3], int32_t num_frames) {
  const int32_t src = source_of(in, f, num_frames);
  sc_inbox_header h = {0};
  size_t bytes = 0;
  bool framed = false;
  int why;
  if (src < 0 || src == in->rank) {
    why = SC_HOST_REFUSED_SOURCE;
  } else if (num_frames != 3 || zmq_msg_size(&f[1]) != sizeof h) {
    why = SC_HOST_REFUSED_MALFORMED;
  } else {
    framed = true;
    memcpy(&h, zmq_msg_data(&f[1]), sizeof h);
    bytes = zmq_msg_size(&f[2]);
    why = judge(in, &h, src, bytes);
  }
  if (why == ADMIT && !make_room_early(in, &h, src)) why = STALE;
  if (why == ADMIT) {
    if (hold(in, &h, src, &f[2]) != 0)
      SC_ERROR(LOG, "rank %d: out of memory: dropped the block of rank %d for collective "
               "%u of the %s group", in->rank, src, h.seq, sc_group_name((int)h.group));
  } else if (why != STALE) {
    refuse(in, (sc_host_refusal)why, src, f, num_frames, framed ? &h : NULL, bytes);
  }
  for (int32_t i = 0; i < num_frames && i < 3; i++) zmq_msg_close(&f[i]);
}

/* ---- what the collectives do ---- */

sc_inbox_block *sc_inbox_take(sc_host_inbox *in, sc_group g, int32_t src) {
  for (sc_inbox_block **pp = &in->held; *pp; pp = &(*pp)->next) {
    const sc_inbox_block *b = *pp;
    if (b->h.epoch == in->epoch && b->h.group == (uint32_t)g && b->h.seq == in->seq[g] &&
        b->src == src)
      return unlink_held(in, pp);
  }
  return NULL;
}

static bool of_an_earlier_step(const sc_host_inbox *in, const sc_inbox_block *b) {
  return b->h.epoch < in->epoch;
}

/* (of a collective that failed before it took the block) */
static bool of_a_past_collective(const sc_host_inbox *in, const sc_inbox_block *b) {
  return b->h.epoch == in->epoch && b->h.seq < in->seq[b->h.group];
}

static bool outside_the_plan(const sc_host_inbox *in, const sc_inbox_block *b) {
  return b->h.epoch == in->plan_epoch && fits(in, &b->h, zmq_msg_size(&b->payload)) != ADMIT;
}

/* Drops the held blocks for which gone() holds; counted as refused when refused. */
static void drop_held(sc_host_inbox *in,
                      bool (*gone)(const sc_host_inbox *, const sc_inbox_block *),
                      bool refused) {
  for (sc_inbox_block **pp = &in->held; *pp;) {
    if (!gone(in, *pp)) {
      pp = &(*pp)->next;
      continue;
    }
    sc_inbox_block *b = unlink_held(in, pp);
    if (refused)
      refuse(in, SC_HOST_REFUSED_PLAN, b->src, NULL, 0, &b->h, zmq_msg_size(&b->payload));
    sc_inbox_drop(b);
  }
}

void sc_inbox_advance(sc_host_inbox *in, sc_group g) {
  in->seq[g]++;
  drop_held(in, of_a_past_collective, false);
}

void sc_inbox_reset(sc_host_inbox *in, uint64_t epoch) {
  in->epoch = epoch;
  memset(in->seq, 0, sizeof in->seq);
  /* a plan that came before this reset (its step) stays; an earlier step's goes */
  in->planned = in->planned && in->plan_epoch == epoch;
  drop_held(in, of_an_earlier_step, false);
}

static int append(sc_inbox_sizes *s, size_t bytes) {
  if (s->num == s->cap) {
    const int32_t cap = s->cap ? 2 * s->cap : 64;
    size_t *p = realloc(s->bytes, sizeof *p * (size_t)cap);
    if (p == NULL) return SC_ENOMEM;
    s->bytes = p;
    s->cap = cap;
  }
  s->bytes[s->num++] = bytes;
  return 0;
}

void sc_inbox_expect(sc_host_inbox *in, uint64_t epoch, const sc_coll *plan, int32_t num) {
  if (epoch < in->epoch) return; /* a step already left */
  in->planned = false;
  for (int g = 0; g < SC_GROUP_COUNT; g++) in->plan[g].num = 0;
  /* every rank is a member of one group of each kind, and the entries name the kind: an
   * entry of a group of one (no peer) is kept all the same, for the seq of the next */
  for (int32_t i = 0; i < num; i++) {
    const sc_coll *c = &plan[i];
    if (c->group >= SC_GROUP_COUNT) continue; /* (the session refuses it when it comes) */
    if (append(&in->plan[c->group], sc_coll_block_bytes(c, in->size[c->group])) != 0) {
      SC_ERROR(LOG, "rank %d: out of memory for the plan of step %llu: its blocks are "
               "checked without it", in->rank, (unsigned long long)epoch);
      return;
    }
  }
  in->planned = true;
  in->plan_epoch = epoch;
  drop_held(in, outside_the_plan, true);
}

void sc_inbox_stats(const sc_host_inbox *in, sc_host_comm_stats *out) {
  *out = (sc_host_comm_stats){.held_blocks = in->held_blocks, .held_bytes = in->held_bytes};
  for (int r = 0; r < SC_HOST_REFUSED_COUNT; r++) {
    out->refused_by[r] = in->refused_by[r];
    out->refused += in->refused_by[r];
  }
}
