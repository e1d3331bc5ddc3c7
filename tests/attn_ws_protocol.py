#!/usr/bin/env python3
"""attn_ws_protocol.py - the synchronization of k_attn_ws (kernels/cuda/cuda_attn_ws.cu,
its producer ws_produce in cuda_attn_ws.cuh) as a model, run under many random
interleavings on the CPU, for one block and for a cluster of two (fp8_ds_mla rows of a
128-head model: a token's two head groups, whose producers each fill their 32 rows of
every tile into both blocks' slots).

Transcribed step for step (the scheduler and checks are protocol_model.py's): the slots'
full mbarriers (two a slot: its column blocks 0-3 and 4-8, each announced as it lands)
and empty mbarriers, the consumers' named barriers (PREADY: WG0 wrote P and alpha;
PFREE: WG1 is done with them; L: WG0 wrote 1 / l), the wgmma groups, and what each role
reads and writes: the slots (which tile each block's rows of a slot hold) and P. The
checker fails on a deadlock, a read of a slot not holding the tile expected or not yet
announced full, a write to a slot or to P while a group reads it or before the slot was
released by every consumer it feeds, a release while the releasing warpgroup still reads
the slot, and the named-barrier faults of protocol_model.py. In a cluster a full barrier
completes only when the other block's bytes have landed too (ws_produce arms it with
them: expect_tx), and an empty barrier counts both blocks' consumers.
Not modelled: the data, the softmax arithmetic, and memory-model details below a barrier
(fences for the async proxy, cluster-scope release and acquire), which the kernel's
comments argue. The model follows the code; when the code changes, this file changes
with it. Run: python3 tests/attn_ws_protocol.py [--self-test].
"""
import sys

from protocol_model import Fail, Shared, main

MUTANT = None
MUTANTS = {
    'no-peer-release': "in a cluster, consumers release their own block's slot only (and "
                       "the empty barriers count them only)",
    'no-peer-bytes': "in a cluster, a full barrier waits for its own producer only (no "
                     "expect_tx for the other block's bytes)",
    'no-empty-wait': "the producer refills a slot without waiting for its release",
    'release-before-wait': "WG1 releases its slot before its P V completes",
    'p-before-pfree': "WG0 writes the next P before it waits for WG1 to be done with the "
                      "last",
    'no-half-wait': "WG0 issues S's second half without waiting for that half to land",
}


class Block(Shared):
    """One block's slots and barriers; in a cluster (cross) rows part 0 of every tile are
    block 0's producer's, part 1 block 1's."""

    def __init__(self, valid, rank=0, cross=False):
        super().__init__(rank)
        self.n_tiles = len(valid)
        self.valid = valid
        self.cross = cross
        # (units: a warpgroup's arrivals, as many as it makes in the kernel, 128 on its
        # own block's barrier and one a warp, 4, on the other's; a block's producer's)
        full_units = 2 if cross and MUTANT != 'no-peer-bytes' else 1
        empty_units = 4 if cross and MUTANT != 'no-peer-release' else 2
        for s in (0, 1):
            for h in (0, 1):  # a slot's two halves, column blocks 0-3 and 4-8
                self.mb[('full', s, h)] = [0, 0, full_units]
            self.mb[('empty', s)] = [0, 0, empty_units]
        # the tile each (part, half) of a slot holds
        self.slot = {s: {(part, h): None for part in (0, 1) for h in (0, 1)} for s in (0, 1)}
        self.released = {(s, wg): -1 for s in (0, 1) for wg in (0, 1)}  # last tile
        self.p = None  # tile whose P (and alpha) sm.p holds


def producer(b):
    """ws_produce: tile j into slot j % 2 once slot j % 2 was released (tile j - 2)."""
    targets = [b, b.peer] if b.cross else [b]
    parts = [b.rank] if b.cross else [0, 1]
    for j in range(b.n_tiles):
        s = j & 1
        if j >= 2 and MUTANT != 'no-empty-wait':
            yield ('wait', b, ('empty', s), ((j >> 1) - 1) & 1)
        for h in (0, 1):  # the first half's stores, announced, then the second's
            for t in targets:
                if t.pending_reads(('slot', s, h)):
                    raise Fail('producer %d writes block %d slot %d half %d while a group '
                               'reads it' % (b.rank, t.rank, s, h))
                if min(t.released[(s, wg)] for wg in (0, 1)) < j - 2:
                    raise Fail('producer %d writes block %d slot %d before it was released'
                               % (b.rank, t.rank, s))
                for part in parts:
                    t.slot[s][(part, h)] = j
            yield ('step',)
            b.arrive(('full', s, h))  # own stores, fenced, announced
            if b.cross and MUTANT != 'no-peer-bytes':
                b.peer.arrive(('full', s, h))  # the st.async bytes on the peer's barrier
            yield ('step',)


def consumer(b, wg):
    """ws_consume0 (wg 0) and ws_consume1 (wg 1)."""

    def read_slot(s, j, halves=(0, 1)):
        for h in halves:
            got = [b.slot[s][(part, h)] for part in (0, 1)]
            if got[0] != j or got[1] != j or b.mb[('full', s, h)][0] < (j >> 1) + 1:
                raise Fail('block %d wg%d reads slot %d half %d expecting tile %d: holds %s '
                           '(%d phases full)' % (b.rank, wg, s, h, j, got,
                                                 b.mb[('full', s, h)][0]))
            b.open[wg].append(('slot', s, h))

    def release(s, j, check=True):
        if check and (b.reading(wg, ('slot', s, 0)) or b.reading(wg, ('slot', s, 1))):
            raise Fail('block %d wg%d releases slot %d with a group still reading it'
                       % (b.rank, wg, s))
        b.released[(s, wg)] = j
        b.arrive(('empty', s))
        if b.cross and MUTANT != 'no-peer-release':
            b.peer.arrive(('empty', s))  # mbar_arrive_remote

    def write_p(j):
        if b.pending_reads(('p',)):
            raise Fail('block %d wg0 writes P while it is read' % b.rank)
        b.p = j

    n = b.n_tiles
    for j in range(n):
        s = j & 1
        v = b.valid[j]
        if wg == 0:
            yield ('wait', b, ('full', s, 0), (j >> 1) & 1)
            if not v:  # no valid row: skipped, the barriers kept (both halves waited)
                yield ('wait', b, ('full', s, 1), (j >> 1) & 1)
                if j > 0:
                    yield ('bar_sync', b, 'PFREE', wg)
                yield ('bar_arrive', b, 'PREADY', wg)
                release(s, j)
                continue
            read_slot(s, j, (0,))  # S's first 16 k-steps, issued
            if MUTANT != 'no-half-wait':
                yield ('wait', b, ('full', s, 1), (j >> 1) & 1)  # while they run
            read_slot(s, j, (1,))  # the other 20
            b.commit(wg)
            yield ('wait_group', b, wg, 0)
            if MUTANT == 'p-before-pfree':
                write_p(j)
            if j > 0:
                yield ('bar_sync', b, 'PFREE', wg)
            if MUTANT != 'p-before-pfree':
                write_p(j)
            yield ('bar_arrive', b, 'PREADY', wg)
            read_slot(s, j)  # O[:, :256] += P V, P from registers
            b.commit(wg)
            yield ('wait_group', b, wg, 0)
            release(s, j)
        else:
            yield ('bar_sync', b, 'PREADY', wg)
            if not v:
                release(s, j)
                if j + 1 < n:
                    yield ('bar_sync', b, 'PFREE', wg)  # ws_pfree: both wait
                continue
            read_slot(s, j)  # O[:, 256:] += P V, P from shared memory
            if b.p != j:
                raise Fail('block %d wg1 reads P of tile %s at tile %d' % (b.rank, b.p, j))
            b.open[wg].append(('p',))
            b.commit(wg)
            if MUTANT == 'release-before-wait':  # (the producer must catch the race)
                release(s, j, check=False)
                yield ('wait_group', b, wg, 0)
            else:
                yield ('wait_group', b, wg, 0)
                release(s, j)
            if j + 1 < n:
                yield ('bar_sync', b, 'PFREE', wg)
    if wg == 0:
        yield ('bar_arrive', b, 'L', wg)
    else:
        yield ('bar_sync', b, 'L', wg)


if __name__ == '__main__':
    sys.exit(main(sys.argv, sys.modules[__name__]))
