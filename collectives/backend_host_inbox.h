/* backend_host_inbox.h - the blocks a rank of the host backend holds, and the rules for
 * letting one in (backend_host.h states them, and the bound on their memory).
 *
 * Internal to the host backend: backend_host.c reads each message from its ROUTER and
 * offers it here, where it is admitted (held until its collective takes it) or refused
 * (freed at once, counted, logged at a bounded rate); its collectives take their blocks
 * from here, and the inbox keeps the position they have reached (step and, per group,
 * the collective running or next) and the step's plan that the rules need.
 *
 * Ownership: the inbox owns the blocks it holds; a block taken belongs to the caller
 * (sc_inbox_drop). It borrows the backend's group members. Threads: the backend's
 * collective thread only.
 */
#ifndef SC_BACKEND_HOST_INBOX_H
#define SC_BACKEND_HOST_INBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "base/log.h"
#include "collectives/backend_host.h"

/* The header frame of a block on the wire (backend_host.h). */
typedef struct sc_inbox_header {
  uint64_t epoch;
  uint32_t group, seq;
} sc_inbox_header;

typedef struct sc_inbox_block {
  sc_inbox_header h;
  int32_t src; /* global rank */
  zmq_msg_t payload;
  struct sc_inbox_block *next;
} sc_inbox_block;

/* The block sizes of one group's collectives in a step's plan, in seq order. */
typedef struct sc_inbox_sizes {
  size_t *bytes;
  int32_t num, cap;
} sc_inbox_sizes;

typedef struct sc_host_inbox {
  int32_t world, rank;
  bool curve;             /* sources are User-Ids (else DEALER identities) */
  size_t max_block_bytes; /* 0: no limit */
  const int32_t *members[SC_GROUP_COUNT]; /* borrowed: global ranks, group-rank order */
  int32_t size[SC_GROUP_COUNT];
  uint64_t epoch;                /* the current step */
  uint32_t seq[SC_GROUP_COUNT];  /* per group: the collective running, or the next */
  bool planned;                  /* `plan` holds the plan of step plan_epoch */
  uint64_t plan_epoch;
  sc_inbox_sizes plan[SC_GROUP_COUNT];
  sc_inbox_block *held;
  uint64_t held_blocks, held_bytes;
  uint64_t refused_by[SC_HOST_REFUSED_COUNT];
  sc_log_limit *limits; /* [world + 1]: per source rank, then one for unknown sources */
} sc_host_inbox;

/* members[g] (size[g] entries) stay the caller's and must outlive the inbox. 0 or
 * SC_ENOMEM. */
int sc_inbox_init(sc_host_inbox *in, int32_t world, int32_t rank, bool curve,
                  size_t max_block_bytes, int32_t *const members[SC_GROUP_COUNT],
                  const int32_t size[SC_GROUP_COUNT]);
void sc_inbox_free(sc_host_inbox *in);

/* Moves to step `epoch`: restarts the per-group positions and drops the blocks of
 * earlier steps; the blocks held for this one meet its plan if it came first. */
void sc_inbox_reset(sc_host_inbox *in, uint64_t epoch);
/* The plan of step `epoch` (the current one, or one to come: kept for its reset; an
 * earlier step's is ignored). Held blocks of that step that do not fit it are dropped. */
void sc_inbox_expect(sc_host_inbox *in, uint64_t epoch, const sc_coll *plan, int32_t num);

/* Offers one message received from the ROUTER: num_frames frames in all, of which the
 * first min(num_frames, 3) are in frames (identity, header, payload). Consumes them. */
void sc_inbox_offer(sc_host_inbox *in, zmq_msg_t frames[3], int32_t num_frames);

/* The block of global rank src for the collective of group g now running, or NULL. */
sc_inbox_block *sc_inbox_take(sc_host_inbox *in, sc_group g, int32_t src);
void sc_inbox_drop(sc_inbox_block *b);

/* The collective of group g has ended (done or failed): moves to the next one and drops
 * what is still held for it. */
void sc_inbox_advance(sc_host_inbox *in, sc_group g);

void sc_inbox_stats(const sc_host_inbox *in, sc_host_comm_stats *out);

#endif
