"""protocol_model.py - the machinery of attn_ws_protocol.py's model of the attention
kernel's synchronization, apart from the kernel's roles: a block's barriers and wgmma
groups, a scheduler that runs the roles of one block or a cluster of two under random
interleavings, and the driver that runs every case and the broken variants.

A role is a generator that yields the operation it waits on next:
  ('step',)                     nothing to wait for (lets another role run between two
                                halves of one action, such as stores and their arrival),
  ('wait', block, key, parity)  an mbarrier parity wait,
  ('wait_group', block, wg, n)  wgmma.wait_group n of warpgroup wg,
  ('bar_arrive', block, id, wg) / ('bar_sync', block, id, wg)  a named barrier of the two
                                consumer warpgroups (one arrival per warpgroup a turn).
The scheduler completes committed wgmma groups in order at random times, and fails on a
deadlock, on a named barrier arrived twice by one side in a turn, and on one left
half-passed at the end. What a role may read or write is the model's own business: it
raises Fail where the kernel would race or misread.
"""
import itertools


class Fail(Exception):
    pass


class Shared:
    """A block's mbarriers ([completed phases, arrivals in this phase, arrivals a phase]
    by key), named barriers, and the two consumers' wgmma groups (committed groups, each
    the list of regions it reads, and the reads issued since the last commit)."""

    def __init__(self, rank):
        self.rank = rank
        self.peer = None
        self.mb = {}
        self.bar = {}    # named barrier id -> warpgroups arrived in its current turn
        self.gen = {}    # named barrier id -> turns completed
        self.groups = {0: [], 1: []}
        self.open = {0: [], 1: []}

    def arrive(self, key):
        st = self.mb[key]
        st[1] += 1
        if st[1] > st[2]:
            raise Fail('block %d: %s over-arrived' % (self.rank, key))
        if st[1] == st[2]:
            st[0] += 1
            st[1] = 0

    def can_wait(self, key, parity):
        return (self.mb[key][0] & 1) != parity

    def pending_reads(self, region):
        return [wg for wg in (0, 1) for g in self.groups[wg] + [self.open[wg]] for r in g
                if r == region]

    def reading(self, wg, region):
        """Whether warpgroup wg has a read of region issued and not yet complete."""
        return region in [r for g in self.groups[wg] + [self.open[wg]] for r in g]

    def commit(self, wg):
        self.groups[wg].append(self.open[wg])
        self.open[wg] = []


def schedule(blocks, roles, rng):
    """Runs the roles (a dict of generators) to the end under one random interleaving."""
    pending = {}
    done = set()
    blocked_bar = {}

    def ready(op):
        kind = op[0]
        if kind == 'step' or kind in ('bar_arrive', 'bar_sync'):
            return True
        if kind == 'wait':
            return op[1].can_wait(op[2], op[3])
        if kind == 'wait_group':
            return len(op[1].groups[op[2]]) <= op[3]
        raise AssertionError(op)

    def perform(op):
        """Does op; returns (block, barrier, turn) when a bar_sync must wait."""
        if op[0] in ('bar_arrive', 'bar_sync'):
            b, bid, wg = op[1], op[2], op[3]
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
                return (b, bid, gen)
        return None

    for k in roles:
        try:
            pending[k] = next(roles[k])
        except StopIteration:
            done.add(k)
    steps = 0
    while len(done) < len(roles):
        steps += 1
        if steps > 200000:
            raise Fail('no progress')
        cands = []
        for k in roles:
            if k in done:
                continue
            if k in blocked_bar:
                b, bid, gen = blocked_bar[k]
                if b.gen.get(bid, 0) > gen:
                    cands.append(('unbar', k))
                continue
            if ready(pending[k]):
                cands.append(('go', k))
        for b in blocks:
            for wg in (0, 1):
                if b.groups[wg]:
                    cands.append(('complete', (b, wg)))
        if not cands:
            raise Fail('deadlock: %s' % {k: (blocked_bar.get(k) or pending[k][::2])
                                          for k in roles if k not in done})
        what, k = rng.choice(cands)
        if what == 'complete':
            k[0].groups[k[1]].pop(0)
            continue
        if what == 'unbar':
            del blocked_bar[k]
        else:
            w = perform(pending[k])
            if w is not None:
                blocked_bar[k] = w
                continue
        try:
            pending[k] = next(roles[k])
        except StopIteration:
            done.add(k)
    for b in blocks:
        for bid, arr in b.bar.items():
            if arr:
                raise Fail('barrier %s left with %s arrived' % (bid, arr))


def run_block_roles(block, producer, consumer, valid, rng, cross):
    """One schedule of one block (block(valid)) or a cluster of two (block(valid, rank,
    True), peers of each other), each with its producer and two consumers."""
    if cross:
        blocks = [block(valid, 0, True), block(valid, 1, True)]
        blocks[0].peer, blocks[1].peer = blocks[1], blocks[0]
    else:
        blocks = [block(valid)]
    roles = {}
    for b in blocks:
        roles[(b.rank, 'p')] = producer(b)
        roles[(b.rank, 0)] = consumer(b, 0)
        roles[(b.rank, 1)] = consumer(b, 1)
    schedule(blocks, roles, rng)


def check_all(run, rng, reps):
    """Runs run(valid, rng, cross) for one block and a cluster of two, 1-6 tiles, every
    pattern of tiles with and without a valid row, reps schedules each; returns
    (schedules run, the first failure or None)."""
    n = 0
    for cross in (False, True):
        for n_tiles in range(1, 7):
            for valid in itertools.product((True, False), repeat=n_tiles):
                for _ in range(reps):
                    try:
                        run(list(valid), rng, cross)
                    except Fail as e:
                        return n, '%s tiles %s: %s' % ('cluster' if cross else 'block', ''.join(
                            'v' if v else '-' for v in valid), e)
                    n += 1
    return n, None


def main(argv, model):
    """Runs the model module `model` (its Block, producer, consumer, MUTANTS and MUTANT):
    with --self-test first each broken variant in MUTANTS, which must be caught; then
    every case, which must pass. Returns the exit status."""
    import random

    def run(valid, rng, cross):
        run_block_roles(model.Block, model.producer, model.consumer, valid, rng, cross)

    name = model.__file__.rsplit('/', 1)[-1].rsplit('.', 1)[0]
    if '--self-test' in argv:
        missed = []
        for m, what in model.MUTANTS.items():
            model.MUTANT = m
            _, err = check_all(run, random.Random(2), 30)
            print('mutant %-20s %s' % (m, 'caught: ' + err if err else 'MISSED (%s)' % what))
            if err is None:
                missed.append(m)
        model.MUTANT = None
        if missed:
            return 1
    n, err = check_all(run, random.Random(1), 150)
    if err:
        print('FAIL', err)
        return 1
    print('%s: %d schedules over 1-6 tiles, one block and a cluster of two: no deadlock, '
          'race or misread' % (name, n))
    return 0
