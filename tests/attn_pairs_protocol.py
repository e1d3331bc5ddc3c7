#!/usr/bin/env python3
"""attn_pairs_protocol.py - the synchronization of k_attn_pairs (kernels/cuda/cuda_attn_pairs.cu)
as a model, run under many random interleavings on the CPU.

The kernel cannot run where CI runs (no GPU), and a protocol bug there shows up as a
hang or, worse, as a rare wrong result. So its three roles are transcribed here, step
for step, into the operations that order them: mbarriers (arrivals and parity waits),
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
  - the 256-thread named barrier left half-passed at the end.
Two of the kernel's waits turn out implied by others here, and stay in the kernel as
cheap insurance: WG1's wait for p1 to be read (WG0 waits for all its groups before it
arrives at the next M0, which WG1 passes before writing P1), and WG1's wait for slot 0 R
to be full before P0 V0_R (WG0 waited for it before writing P0 there, and WG1 passed P0).
Cases: tile counts 1-6, each tile with or without valid rows, 300 random schedules
each. The model follows the code; when the code changes, this file changes with it.
Run: python3 tests/attn_pairs_protocol.py [--self-test] (exit 0 when every schedule
passes; --self-test first checks that each of a few broken variants is caught).
"""
import itertools
import random
import sys

L, R = 0, 1


class Fail(Exception):
    pass


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
}


class Block:
    def __init__(self, valid):
        self.n_tiles = len(valid)
        self.valid = valid
        # mbarriers: completed phases and arrivals in the current phase
        self.mb = {}
        for s in (0, 1):
            for h in (L, R):
                self.mb[('full', s, h)] = [0, 0, 128]
                self.mb[('empty', s, h)] = [0, 0, 128]
        self.half = {(s, h): None for s in (0, 1) for h in (L, R)}  # tile held, or None
        self.half_full = {(s, h): False for s in (0, 1) for h in (L, R)}
        self.half_free = {(s, h): True for s in (0, 1) for h in (L, R)}
        self.p1 = None   # pair whose P1 p1 holds
        self.p0 = None   # pair whose P0 slot 0 R holds
        self.bar = {}    # named barrier id -> warpgroups arrived in its current turn
        self.gen = {}    # named barrier id -> turns completed
        self.groups = {0: [], 1: []}  # committed groups: lists of (region, check) read
        self.open = {0: [], 1: []}    # reads issued since the last commit

    # -- mbarriers --
    def arrive(self, key, n=128):
        st = self.mb[key]
        st[1] += n
        if st[1] > st[2]:
            raise Fail('%s over-arrived' % (key,))
        if st[1] == st[2]:
            st[0] += 1
            st[1] = 0
            if key[0] == 'full':
                self.half_full[key[1:]] = True

    def can_wait(self, key, parity):
        return (self.mb[key][0] & 1) != parity

    # -- regions read by a group --
    def pending_reads(self, region):
        return [wg for wg in (0, 1) for g in self.groups[wg] + [self.open[wg]] for r in g
                if r == region]


def producer(b):
    """pair_produce: halves 0L, 1R, 0R, 1L of each pair."""
    n_pairs = (b.n_tiles + 1) // 2
    for i in range(n_pairs):
        has1 = 2 * i + 1 < b.n_tiles
        order = [(0, L), (1, R), (0, R), (1, L)]
        if MUTANT == 'order-1l-first':
            order = [(1, L), (0, L), (1, R), (0, R)]
        for s, h in order:
            if s == 1 and not has1:
                continue
            if i > 0:
                yield ('wait', ('empty', s, h), (i - 1) & 1)
            # the copies: the half must be free of readers
            if b.pending_reads(('half', s, h)):
                raise Fail('producer writes half %s while a group reads it' % ((s, h),))
            if not b.half_free[(s, h)]:
                raise Fail('producer writes half %s before it was released' % ((s, h),))
            if s == 0 and h == R and b.pending_reads(('p0',)):
                raise Fail('producer overwrites P0 while it is read')
            b.half[(s, h)] = 2 * i + s
            b.half_full[(s, h)] = False
            b.half_free[(s, h)] = False
            yield ('step',)
            b.arrive(('full', s, h))
            yield ('step',)


def consumer(b, wg):
    """pair_consume, for warpgroup wg."""
    n_pairs = (b.n_tiles + 1) // 2
    owe1 = False
    h_mine = R if wg else L
    h_first = h_mine

    def wait_full(s, h, ph):
        yield ('wait', ('full', s, h), ph)

    def read(s, h, tile):
        if b.half[(s, h)] != tile or not b.half_full[(s, h)]:
            raise Fail('wg%d reads half %s expecting tile %d: holds %s (full %s)' %
                       (wg, (s, h), tile, b.half[(s, h)], b.half_full[(s, h)]))
        b.open[wg].append(('half', s, h))

    def commit():
        b.groups[wg].append(b.open[wg])
        b.open[wg] = []

    def release(s, h):
        if ('half', s, h) in [r for g in b.groups[wg] + [b.open[wg]] for r in g]:
            raise Fail('wg%d releases half %s with a group still reading it' % (wg, (s, h)))
        if s == 0 and h == R and ('p0',) in [r for g in b.groups[wg] for r in g]:
            raise Fail('wg%d releases slot 0 R while reading P0' % wg)
        if s == 1 and h == L and ('p1',) in [r for g in b.groups[wg] for r in g]:
            raise Fail('wg%d releases slot 1 L while reading p1' % wg)
        b.half_free[(s, h)] = True  # (the last reader: the barrier counts only it)
        b.arrive(('empty', s, h))

    def wait_group(n):
        yield ('wait_group', wg, n)

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
            read(mine, h_first, tile_mine)
            commit()
        yield from wait_group(1)
        if owe1 and vm:
            release(1, L)
            owe1 = False
        if (wg == 0 or has1) and not (wg and MUTANT == 'own-no-full-wait'):
            yield from wait_full(mine, h_first ^ 1, ph)
        if vm:
            read(mine, h_first ^ 1, tile_mine)
            commit()
        yield from wait_group(0)
        if owe1:
            release(1, L)
            owe1 = False
        if not v0 and not v1:
            if wg == 0:
                release(0, L)
                if has1:
                    yield from wait_full(1, L, ph)
                    release(1, L)
            else:
                if has1:
                    release(1, R)
                yield from wait_full(0, R, ph)
                release(0, R)
            continue
        if wg:
            yield ('bar_sync', 'M0', wg)
        yield ('bar_arrive', 'M1' if wg else 'M0', wg)
        if wg:
            if vm:
                if i > 0:
                    yield ('wait', ('empty', 1, L), (i - 1) & 1)
                if b.pending_reads(('p1',)):
                    raise Fail('wg1 writes p1 while it is read')
                b.p1 = i
            yield ('bar_arrive', 'P1', wg)
        if vm:  # O += P V of my tile: V is my half of my slot
            read(mine, h_mine, tile_mine)
            commit()
        if wg == 0:
            yield from wait_group(0)
            release(0, L)
            if MUTANT != 'no-m1-sync':
                yield ('bar_sync', 'M1', wg)
            if vm:
                if b.pending_reads(('p0',)):
                    raise Fail('wg0 writes P0 while it is read')
                if b.half[(0, R)] != 2 * i or not b.half_full[(0, R)]:
                    raise Fail('wg0 writes P0 into slot 0 R not holding its tile')
                b.p0 = i
            yield ('bar_arrive', 'P0', wg)
        yield ('bar_sync', 'P0' if wg else 'P1', wg)
        h_other = R if wg else L
        if wg or has1:
            yield from wait_full(wg ^ 1, h_other, ph)
        if vo:  # O += P V of the other's tile, P from shared memory
            read(wg ^ 1, h_other, 2 * i + (wg ^ 1))
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
                release(1, h_mine)
            yield from wait_group(0)
            if has1 and not vo and MUTANT != 'release-after-wait1':
                release(1, h_mine)
            release(0, h_other)
        elif vo and MUTANT == 'owe-early':
            release(1, h_other)
        elif vo:
            owe1 = True
        elif has1:
            release(1, h_other)
    yield from wait_group(0)
    if owe1:
        release(1, L)
    yield ('bar_sync', 'L', wg)


def run(valid, rng):
    b = Block(valid)
    roles = {'p': producer(b), 0: consumer(b, 0), 1: consumer(b, 1)}
    pending = {k: None for k in roles}  # the operation a role is blocked on
    done = set()

    def ready(op):
        kind = op[0]
        if kind == 'step':
            return True
        if kind == 'wait':
            return b.can_wait(op[1], op[2])
        if kind == 'wait_group':
            return len(b.groups[op[1]]) <= op[2]
        if kind == 'bar_arrive':
            return True
        if kind == 'bar_sync':
            return True
        raise AssertionError(op)

    def perform(k, op):
        """Does op; returns (barrier, generation) when a bar_sync must wait."""
        if op[0] in ('bar_arrive', 'bar_sync'):
            bid, wg = op[1], op[2]
            arr = b.bar.setdefault(bid, [])
            if wg in arr:
                raise Fail('barrier %s: warpgroup %d arrives twice in one turn' % (bid, wg))
            arr.append(wg)
            gen = b.gen.get(bid, 0)
            if len(arr) == 2:
                b.bar[bid] = []
                b.gen[bid] = gen + 1
                return None
            if op[0] == 'bar_sync':
                return (bid, gen)
        return None

    blocked_bar = {}
    for k in roles:
        try:
            pending[k] = next(roles[k])
        except StopIteration:
            done.add(k)
    steps = 0
    while len(done) < 3:
        steps += 1
        if steps > 100000:
            raise Fail('no progress')
        cands = []
        for k in roles:
            if k in done:
                continue
            if k in blocked_bar:
                bid, gen = blocked_bar[k]
                if b.gen.get(bid, 0) > gen:
                    cands.append(('unbar', k))
                continue
            if ready(pending[k]):
                cands.append(('go', k))
        for wg in (0, 1):
            if b.groups[wg]:
                cands.append(('complete', wg))
        if not cands:
            raise Fail('deadlock: %s' % {k: (blocked_bar.get(k) or pending[k]) for k in roles
                                          if k not in done})
        what, k = rng.choice(cands)
        if what == 'complete':
            b.groups[k].pop(0)
            continue
        if what == 'unbar':
            del blocked_bar[k]
        else:
            w = perform(k, pending[k])
            if w is not None:
                blocked_bar[k] = w
                continue
        try:
            pending[k] = next(roles[k])
        except StopIteration:
            done.add(k)
    for bid, arr in b.bar.items():
        if arr:
            raise Fail('barrier %s left with %s arrived' % (bid, arr))


def check_all(rng, reps):
    """Runs every case; returns (schedules run, the first failure or None)."""
    n = 0
    for n_tiles in range(1, 7):
        for valid in itertools.product((True, False), repeat=n_tiles):
            for _ in range(reps):
                try:
                    run(list(valid), rng)
                except Fail as e:
                    return n, 'tiles %s: %s' % (''.join('v' if v else '-' for v in valid), e)
                n += 1
    return n, None


def main():
    global MUTANT
    if '--self-test' in sys.argv:
        missed = []
        for m, what in MUTANTS.items():
            MUTANT = m
            _, err = check_all(random.Random(2), 40)
            print('mutant %-20s %s' % (m, 'caught: ' + err if err else 'MISSED (%s)' % what))
            if err is None:
                missed.append(m)
        MUTANT = None
        if missed:
            return 1
    n, err = check_all(random.Random(1), 300)
    if err:
        print('FAIL', err)
        return 1
    print('attn_pairs_protocol: %d schedules over 1-6 tiles, no deadlock, race or misread' % n)
    return 0


if __name__ == '__main__':
    sys.exit(main())
