#!/usr/bin/env python3
"""ncu_lines.py - where a kernel's warps wait, by source line, from ncu's source page.

Input: the CSV of `ncu -i REPORT --page source --csv --print-source cuda,sass` (plain or
gzipped; device_common.sh's ncu_attn writes one), from a binary built with -lineinfo.
The page holds one section a source file ("File Path", then a header row "Line No", ...,
then a row a line, each followed by rows of its SASS instructions); this prints the N
lines with the most warp stall samples, each with its share of the kernel's samples, its
three largest stall reasons and the line's source, then the totals by reason. An
instruction inlined from a function belongs to a line in each file of the chain (the
line of the call and the line in the callee), so lines of different files may count the
same samples: shares are of the kernel's samples counted once an instruction (by
address), and do not add up to 100%.

With --sass, the N instructions with the most samples instead, each after the 4 before it
(offsets from the kernel's first instruction): a wait's samples fall on the instruction
after it (a try-wait's branch, the one that reads a loaded register), so the lines
before say what was waited for, e.g. which mbarrier (its shared-memory offset) or named
barrier. A source line inlined into several roles of a kernel (an mbarrier wait) sums
the roles' samples; this view keeps them apart.

Run: python3 bench/ncu_lines.py [--sass] FILE.csv[.gz] [N]   (N: 20 unless given)
"""
import collections
import csv
import gzip
import io
import sys


def read_rows(path):
    raw = gzip.open(path) if path.endswith('.gz') else open(path, 'rb')
    return csv.reader(io.TextIOWrapper(raw, errors='replace'))


def stalls(header, row):
    """A row's stall samples: 'all' and each reason's (issued or not)."""
    out = collections.Counter()
    for name, value in zip(header, row):
        try:
            v = float(value or 0)
        except ValueError:
            continue
        if name == 'Warp Stall Sampling (All Samples)':
            out['all'] += v
        elif name.startswith('stall_') and not name.endswith('(Not Issued)'):
            out[name[6:]] += v
    return out


def print_sass(by_address, sass, whole, top):
    """The `top` instructions with the most samples, each after the 4 before it."""
    order = sorted(by_address, key=lambda a: int(a, 16))
    base = int(order[0], 16)
    index = {a: i for i, a in enumerate(order)}
    print('%d stall samples; the %d instructions with the most, each after the 4 before '
          'it (samples, offset, instruction):' % (whole, top))
    ranked = sorted(order, key=lambda a: -by_address[a]['all'])[:top]
    for a in ranked:
        inst = by_address[a]
        why = ', '.join('%s %d' % r for r in
                        sorted(((k, v) for k, v in inst.items() if k != 'all' and v > 0),
                               key=lambda kv: -kv[1])[:3])
        print('%5.1f%% [%s]' % (100 * inst['all'] / whole, why))
        for b in order[max(0, index[a] - 4):index[a] + 1]:
            print('   %6d +0x%05x %s' % (by_address[b]['all'], int(b, 16) - base,
                                       sass[b][:90]))


def main(argv):
    sass_view = '--sass' in argv
    argv = [a for a in argv if a != '--sass']
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    top = int(argv[2]) if len(argv) > 2 else 20
    samples = collections.Counter()
    reasons = collections.defaultdict(collections.Counter)
    text = {}
    totals = collections.Counter()
    by_address, sass = {}, {}
    where, header = None, None
    for row in read_rows(argv[1]):
        if not row:
            continue
        if row[0] == 'File Path':
            where = row[1].rsplit('/', 1)[-1]
            continue
        if row[0] == 'Line No':
            header = row
            continue
        if header is None:
            continue
        if not row[0] and len(row) > 3 and row[2].startswith('0x'):  # an instruction
            by_address[row[2]] = stalls(header, row)
            sass[row[2]] = row[3].strip()
            continue
        if not row[0].isdigit():
            continue
        key = (where, int(row[0]))
        text[key] = row[1].strip()
        line = stalls(header, row)
        samples[key] += line.pop('all', 0)
        reasons[key].update(line)
    for inst in by_address.values():
        totals.update(inst)
    whole = totals.pop('all', 0)
    if whole == 0:
        print('no stall samples in %s (a binary without -lineinfo, or a page printed '
              'without its SASS rows: --print-source cuda,sass)' % argv[1])
        return 1
    if sass_view:
        print_sass(by_address, sass, whole, top)
        return 0
    print('%d stall samples (each instruction once); the %d lines with the most:'
          % (whole, top))
    for key, v in samples.most_common(top):
        why = ', '.join('%s %d' % r for r in reasons[key].most_common(3) if r[1] > 0)
        print('%5.1f%% %s:%d  [%s]  %s' % (100 * v / whole, key[0], key[1], why,
                                          text[key][:80]))
    print('by reason: ' + ', '.join('%s %.1f%%' % (k, 100 * v / whole)
                                   for k, v in totals.most_common(8)))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
