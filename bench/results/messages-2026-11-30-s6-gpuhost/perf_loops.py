import collections,sys,re
def samples(path):
    comm=None; leaf=None; chain=[]
    for line in open(path):
        if not line.strip():
            if comm: yield comm, chain
            comm=None; chain=[]; continue
        if not line.startswith("\t") and not line.startswith(" "):
            comm=line.strip(); chain=[]; continue
        m=re.match(r"\s*([0-9a-f]+)\s+(.*)\s+\((.*)\)\s*$", line)
        if m: chain.append((m.group(2).strip(), m.group(3)))
    if comm: yield comm, chain
def cls(sym,dso):
    if "kernel" in dso: return "[kernel]"
    for k in ["jemalloc","libc.so","vdso","libuv","libzmq"]:
        if k in dso: return "["+k+"]"
    return sym
for d in sys.argv[1:]:
    per=collections.defaultdict(collections.Counter); incl=collections.defaultdict(collections.Counter)
    tot=collections.Counter()
    for comm,chain in samples(f"/tmp/ps-{d}.txt"):
        if comm not in ("sc0-loop0","sc0-loop1"): continue
        tot[comm]+=1
        if chain: per[comm][cls(*chain[0])]+=1
        seen=set()
        for s,dso in chain:
            c=cls(s,dso)
            if c not in seen: incl[comm][c]+=1; seen.add(c)
    for th in sorted(tot):
        n=tot[th]; print("==",d,th,n)
        for s,k in per[th].most_common(16): print(f"   self {100*k/n:5.1f}% {s}")
        for s,k in incl[th].most_common(30):
            if not s.startswith("["): print(f"   incl {100*k/n:5.1f}% {s}")
