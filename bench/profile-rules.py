#!/usr/bin/env python3
# Shares of a perf recording of the server (loadgen --profile), by rules LABEL=key1,key2
# given on the command line: each sample goes to the first rule one of whose keys is in
# its thread name or frames, so the shares add up to 100%. With no rules, the classes of
# an HTTP write (the upsert, the track):
#   python3 bench/profile-rules.py DIR/sled-contacts.perf.data
#   python3 bench/profile-rules.py DIR/sled-campaign.perf.data "DKIM signing=aws_lc" ...
import sys, subprocess, collections

HTTP_WRITE = [
    "store mover: applying synced groups to sled=store-mover",
    "store flusher: WAL write and fdatasync=store-flusher",
    "sled IO threads=sled-io",
    "project actor: the upsert, segments, contact table, events=ProjectActor,mailroom_actors::contact,mailroom_actors::project,mailroom_actors::segment",
    "workflow triggers=mailroom_actors::workflow",
    "webhook fan-out=mailroom_actors::webhooks",
    "the handler and middleware: parse, validate, key check, send to the actor=mailroom::http,mailroom_actors,serde",
    "system calls on the HTTP workers (sockets, epoll, futex)=entry_SYSCALL,do_syscall_64",
    "actix-http: parsing requests, encoding answers=actix_http",
    "tokio and actix scheduling=tokio,actix_rt",
]

data = sys.argv[1]
rules = [r.split("=", 1) for r in (sys.argv[2:] or HTTP_WRITE)]
out = subprocess.run(["perf", "script", "-i", data, "-F", "comm,ip,sym"],
                     capture_output=True, text=True).stdout
samples = []
cur = None
for line in out.splitlines():
    if not line.strip():
        if cur:
            samples.append(cur)
            cur = None
        continue
    if not line.startswith((" ", "\t")):
        if cur:
            samples.append(cur)
        cur = (line.strip(), [])
    else:
        p = line.strip().split(None, 1)
        cur[1].append(p[1] if len(p) > 1 else p[0])
if cur:
    samples.append(cur)
c = collections.Counter()
for comm, fr in samples:
    j = comm + " || " + " | ".join(fr)
    for label, keys in rules:
        if any(k in j for k in keys.split(",")):
            c[label] += 1
            break
    else:
        c["other"] += 1
tot = sum(c.values())
for k, v in c.most_common():
    print(f"| {100*v/tot:.1f}% | {k} |")
print("samples", tot)
