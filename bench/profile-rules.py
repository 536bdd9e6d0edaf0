#!/usr/bin/env python3
# Shares of a perf recording by rules given on the command line, LABEL=key1,key2: each
# sample goes to the first rule one of whose keys is in its thread name or frames.
#   python3 bench/profile-rules.py DIR/sled-campaign.perf.data "DKIM signing=aws_lc" ...
import sys, subprocess, collections
data=sys.argv[1]; rules=[r.split("=",1) for r in sys.argv[2:]]
out = subprocess.run(["perf","script","-i",data,"-F","comm,ip,sym"],capture_output=True,text=True).stdout
samples=[];cur=None
for line in out.splitlines():
    if not line.strip():
        if cur: samples.append(cur); cur=None
        continue
    if not line.startswith((" ","\t")):
        if cur: samples.append(cur)
        cur=(line.strip(),[])
    else:
        p=line.strip().split(None,1); cur[1].append(p[1] if len(p)>1 else p[0])
if cur: samples.append(cur)
c=collections.Counter()
for comm,fr in samples:
    j=comm+" || "+" | ".join(fr)
    for label,keys in rules:
        if any(k in j for k in keys.split(",")):
            c[label]+=1; break
    else: c["other"]+=1
tot=sum(c.values())
for k,v in c.most_common(): print(f"| {100*v/tot:.1f}% | {k} |")
print("samples",tot)
