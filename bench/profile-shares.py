#!/usr/bin/env python3
# Shares of a perf recording of the server (loadgen --profile), by thread and by the
# frames under each sample: python3 bench/profile-shares.py DIR/sled-contacts.perf.data
# Each sample counts once, in the first class that matches, so the shares add up to 100%.
import sys, subprocess, collections
data = sys.argv[1]
out = subprocess.run(["perf","script","-i",data,"-F","comm,ip,sym"],capture_output=True,text=True).stdout
samples=[]; cur=None
for line in out.splitlines():
    if not line.strip():
        if cur: samples.append(cur); cur=None
        continue
    if not line.startswith((" ","\t")):
        if cur: samples.append(cur)
        cur=(line.strip(),[])
    else:
        parts=line.strip().split(None,1)
        cur[1].append(parts[1] if len(parts)>1 else parts[0])
if cur: samples.append(cur)
def cls(comm, frames):
    j=" | ".join(frames)
    if comm.startswith("store-mover"): return "store mover: applying synced groups to sled"
    if comm.startswith("store-flusher"): return "store flusher: WAL write and fdatasync"
    if comm.startswith("sled-io"): return "sled IO threads"
    if "ProjectActor" in j or "mailroom_actors::contact" in j or "mailroom_actors::project" in j or "mailroom_actors::segment" in j:
        return "project actor: the upsert, segments, contact table, events"
    if "mailroom_actors::workflow" in j: return "workflow triggers"
    if "mailroom_actors::webhooks" in j: return "webhook fan-out"
    if "mailroom::http" in j or "mailroom_actors" in j or "serde" in j: return "the handler and middleware: parse, validate, key check, send to the actor"
    if any(k in j for k in ("entry_SYSCALL","do_syscall_64")) : return "system calls on the HTTP workers (sockets, epoll, futex)"
    if "actix_http" in j: return "actix-http: parsing requests, encoding answers"
    if "tokio" in j or "actix_rt" in j: return "tokio and actix scheduling"
    return "other"
c=collections.Counter(cls(comm,fr) for comm,fr in samples)
tot=sum(c.values())
for k,v in c.most_common(): print(f"| {100*v/tot:.1f}% | {k} |")
print("samples",tot)
