#!/usr/bin/env python3
"""attn_pairs_protocol.py - the synchronization of k_attn_pairs (kernels/cuda/cuda_attn_pairs.cu)
as a model, run under many random interleavings on the CPU.

The kernel cannot run where CI runs (no GPU), and a protocol bug there shows up as a
hang or, worse, as a rare wrong result. So its three roles (six in a cluster of two
blocks) are transcribed here, step for step, into the operations that order them: mbarriers (arrivals and parity waits),
named barriers of the two consumers (one arrival per warpgroup), wgmma groups (issued
reads of shared memory, committed in groups that complete in order at any later time,
waited for with wait_group N), and the data each role writes or reads: the halves of
the two slots (which tile they hold), P0 (in slot 0's right half) and p1. The checker
fails on:
  - a deadlock (no role can move and no group is pending),
  - a read of a half that does not hold the tile expected, or not yet announced full,
  - a write to a half, or to p1, while a group that reads it is pending, or before the
    half was released by its reader,
  - a release (empty arrival) while the releasing warpgroup still has a group reading
    that half,
  - a named barrier that sees two arrivals of one side before the other side's,
  - a named barrier left half-passed at the end.
Two of the kernel's waits turn out implied by others here, and stay in the kernel as
cheap insurance: WG1's wait for p1 to be read (WG0 waits for all its groups before it
arrives at the next M0, which WG1 passes before writing P1), and WG1's wait for slot 0 R
to be full before P0 V0_R (WG0 waited for it before writing P0 there, and WG1 passed P0).
Cases: one block and a cluster of two; tile counts 1-6, each tile with or without valid
rows; 150 random schedules each. The model follows the code; when the code changes,
this file changes with it. Not modelled: the data itself (the GPU tests compare with the
CPU), the max and l exchange's arithmetic, and memory-model details below a barrier
(fences for the async proxy, release/acquire scopes), which the kernel's comments argue.
Run: python3 tests/attn_pairs_protocol.py [--self-test] (exit 0 when every schedule
passes; --self-test first checks that each of a few broken variants is caught).
"""
import sys

from protocol_model import Fail, Shared, main

L, R = 0, 1


# Mutations (--self-test): each breaks one rule of the protocol the way a plausible edit
# of the kernel would; the checker must catch every one, or it proves nothing.
MUTANT = None
MUTANTS = {
    'release-after-wait1': "WG1 releases its slot 1 half after wait_group 1 even when only "
                           "its own P V was committed",
    'owe-early': "WG0 releases slot 1 L right after issuing P1 V1_L",
    'own-no-full-wait': "WG1 scores its tile's second half without waiting for it",
    'order-1l-first': "the producer fills slot 1 L first",
    'no-m1-sync': "WG0 does not wait for m1 before writing P0",
    'no-peer-release': "in a cluster, consumers release their own block's halves only (and "
                       "the empty barriers count them only)",
}


class Block(Shared):
    """One block's shared memory and barriers; in a cluster (peer set) the two blocks of a
    token, whose producers each fill one part (half the rows) of every half of both."""

    def __init__(self, valid, rank=0, cross=False):
        super().__init__(rank)
        self.n_tiles = len(valid)
        self.valid = valid
        self.cross = cross
        units = 2 if cross else 1  # arrivals a phase: warpgroups (and the peer's bytes)
        e_units = 1 if MUTANT == 'no-peer-release' else units
        for s in (0, 1):
            for h in (L, R):
                self.mb[('full', s, h)] = [0, 0, units]
                self.mb[('empty', s, h)] = [0, 0, e_units]
        # a half's rows, by part (the producer of that rank's rows): the tile they hold
        self.half = {(s, h): {0: None, 1: None} for s in (0, 1) for h in (L, R)}
        self.released = {(s, h): -1 for s in (0, 1) for h in (L, R)}  # last pair released
        self.p1 = None   # pair whose P1 p1 holds
        self.p0 = None   # pair whose P0 slot 0 R holds


def producer(b):
    """pair_produce: halves 0L, 1R, 0R, 1L of each pair; in a cluster this block's part
    of each half goes into both blocks (st.async into the peer's, counted on its full)."""
    n_pairs = (b.n_tiles + 1) // 2
    targets = [b, b.peer] if b.cross else [b]
    parts = [b.rank] if b.cross else [0, 1]
    for i in range(n_pairs):
        has1 = 2 * i + 1 < b.n_tiles
        order = [(0, L), (1, R), (0, R), (1, L)]
        if MUTANT == 'order-1l-first':
            order = [(1, L), (0, L), (1, R), (0, R)]
        for s, h in order:
            if s == 1 and not has1:
                continue
            if i > 0:
                yield ('wait', b, ('empty', s, h), (i - 1) & 1)
            for t in targets:  # the copies: each target's half free of readers
                if t.pending_reads(('half', s, h)):
                    raise Fail('producer %d writes block %d half %s while a group reads it'
                               % (b.rank, t.rank, (s, h)))
                if t.released[(s, h)] < i - 1:
                    raise Fail('producer %d writes block %d half %s before it was released'
                               % (b.rank, t.rank, (s, h)))
                if s == 0 and h == R and t.pending_reads(('p0',)):
                    raise Fail('producer overwrites P0 while it is read')
                for part in parts:
                    t.half[(s, h)][part] = 2 * i + s
            yield ('step',)
            for t in targets:  # own stores announced; the peer's bytes land on its full
                t.arrive(('full', s, h))
            yield ('step',)


def consumer(b, wg):
    """pair_consume, for warpgroup wg."""
    n_pairs = (b.n_tiles + 1) // 2
    owe1 = False
    h_mine = R if wg else L
    h_first = h_mine

    def wait_full(s, h, ph):
        yield ('wait', b, ('full', s, h), ph)

    def read(s, h, tile, pair):
        got = b.half[(s, h)]
        if got[0] != tile or got[1] != tile or b.mb[('full', s, h)][0] != pair + 1:
            raise Fail('block %d wg%d reads half %s expecting tile %d: holds %s (%d phases full)'
                       % (b.rank, wg, (s, h), tile, got, b.mb[('full', s, h)][0]))
        b.open[wg].append(('half', s, h))

    def commit():
        b.groups[wg].append(b.open[wg])
        b.open[wg] = []

    def release(s, h, pair):
        if ('half', s, h) in [r for g in b.groups[wg] + [b.open[wg]] for r in g]:
            raise Fail('wg%d releases half %s with a group still reading it' % (wg, (s, h)))
        if s == 0 and h == R and ('p0',) in [r for g in b.groups[wg] for r in g]:
            raise Fail('wg%d releases slot 0 R while reading P0' % wg)
        if s == 1 and h == L and ('p1',) in [r for g in b.groups[wg] for r in g]:
            raise Fail('wg%d releases slot 1 L while reading p1' % wg)
        b.released[(s, h)] = pair
        for t in ([b, b.peer] if b.cross and MUTANT != 'no-peer-release' else [b]):
            t.arrive(('empty', s, h))

    def wait_group(n):
        yield ('wait_group', b, wg, n)

    for i in range(n_pairs):
        ph = i & 1
        has1 = 2 * i + 1 < b.n_tiles
        v0 = b.valid[2 * i]
        v1 = b.valid[2 * i + 1] if has1 else False
        vm, vo = (v1, v0) if wg else (v0, v1)
        mine = wg
        tile_mine = 2 * i + wg
        if wg == 0 or has1:
            yield from wait_full(mine, h_first, ph)
        if vm:
            read(mine, h_first, tile_mine, i)
            commit()
        yield from wait_group(1)
        if owe1 and vm:
            release(1, L, i - 1)
            owe1 = False
        if (wg == 0 or has1) and not (wg and MUTANT == 'own-no-full-wait'):
            yield from wait_full(mine, h_first ^ 1, ph)
        if vm:
            read(mine, h_first ^ 1, tile_mine, i)
            commit()
        yield from wait_group(0)
        if owe1:
            release(1, L, i - 1)
            owe1 = False
        if not v0 and not v1:
            if wg == 0:
                release(0, L, i)
                if has1:
                    yield from wait_full(1, L, ph)
                    release(1, L, i)
            else:
                if has1:
                    release(1, R, i)
                yield from wait_full(0, R, ph)
                release(0, R, i)
            continue
        if wg:
            yield ('bar_sync', b, 'M0', wg)
        yield ('bar_arrive', b, 'M1' if wg else 'M0', wg)
        if vm:  # O += P V of my tile: V is my half of my slot
            read(mine, h_mine, tile_mine, i)
            commit()
        if wg:  # P1 stored while its P1 V1_R runs
            if vm:
                if i > 0:
                    yield ('wait', b, ('empty', 1, L), (i - 1) & 1)
                if b.pending_reads(('p1',)):
                    raise Fail('wg1 writes p1 while it is read')
                b.p1 = i
            yield ('bar_arrive', b, 'P1', wg)
        if wg == 0:
            yield from wait_group(0)
            release(0, L, i)
            if MUTANT != 'no-m1-sync':
                yield ('bar_sync', b, 'M1', wg)
            if vm:
                if b.pending_reads(('p0',)):
                    raise Fail('wg0 writes P0 while it is read')
                if b.half[(0, R)] != {0: 2 * i, 1: 2 * i} or b.mb[('full', 0, R)][0] != i + 1:
                    raise Fail('wg0 writes P0 into slot 0 R not holding its tile')
                b.p0 = i
            yield ('bar_arrive', b, 'P0', wg)
        yield ('bar_sync', b, 'P0' if wg else 'P1', wg)
        h_other = R if wg else L
        if wg or has1:
            yield from wait_full(wg ^ 1, h_other, ph)
        if vo:  # O += P V of the other's tile, P from shared memory
            read(wg ^ 1, h_other, 2 * i + (wg ^ 1), i)
            if wg:
                if b.p0 != i:
                    raise Fail('wg1 reads P0 of pair %s in pair %d' % (b.p0, i))
                b.open[wg].append(('p0',))
            else:
                if b.p1 != i:
                    raise Fail('wg0 reads p1 of pair %s in pair %d' % (b.p1, i))
                b.open[wg].append(('p1',))
            commit()
        if wg:
            yield from wait_group(1)
            if has1 and (vo or MUTANT == 'release-after-wait1'):
                release(1, h_mine, i)
            yield from wait_group(0)
            if has1 and not vo and MUTANT != 'release-after-wait1':
                release(1, h_mine, i)
            release(0, h_other, i)
        elif vo and MUTANT == 'owe-early':
            release(1, h_other, i)
        elif vo:
            owe1 = True
        elif has1:
            release(1, h_other, i)
    yield from wait_group(0)
    if owe1:
        release(1, L, n_pairs - 1)
    yield ('bar_sync', b, 'L', wg)


if __name__ == '__main__':
    sys.exit(main(sys.argv, sys.modules[__name__]))
