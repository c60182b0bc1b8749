# Who won each W3 handoff, from the holds a LOCKS_DUMP=DIR run of the bench writes (one file per W3 run):
# python3 handoffs.py DIR/w3-ours-*.txt. Self / same process, other task / the other process; the
# longest waits and who held the lock during the longest; runs of handoffs inside one process.
import sys,collections
for f in sys.argv[1:]:
    H=[]
    for l in open(f):
        p=l.split()
        if p[0]=='H': H.append(tuple(map(int,p[1:])))
    H.sort(key=lambda h:h[4])
    start=min(h[3] for h in H)
    same_task=same_proc=other=0
    runs=[];cur=0
    for a,b in zip(H,H[1:]):
        if (a[0],a[1])==(b[0],b[1]): same_task+=1; cur+=1
        elif a[0]==b[0]: same_proc+=1; cur+=1
        else: other+=1; runs.append(cur); cur=0
    n=len(H)-1
    waits=sorted(((h[4]-h[3])/1e6,h) for h in H)
    top=waits[-5:]
    # for longest wait: how many handoffs during it, and in which process
    w,h=waits[-1]
    during=[x for x in H if h[3]<x[4]<h[4]]
    dp=collections.Counter(x[0] for x in during)
    runs.sort()
    print(f.split('/')[-1], f"holds {len(H)} self {same_task/n:.1%} sameproc-other-task {same_proc/n:.1%} crossproc {other/n:.1%}")
    print("  top waits ms", [(round(w,1),hh[0]) for w,hh in top], "longest waiter proc",h[0],"holds during it by proc",dict(dp))
    print("  in-process run lengths: p50",runs[len(runs)//2],"p99",runs[int(len(runs)*.99)],"max",runs[-1])
    # longest run of holds by the other process while a given waiter waits
