#!/usr/bin/env python3
"""Damages copies of a ledger and runs commands on each: no command may die of a signal.

Each round copies LEDGER, overwrites one value (or key) of one database with a cut, a flipped
bit, random bytes, extra bytes or nothing, then runs ledger's read and write commands on the
copy. A command that exits with a message is fine; one killed by a signal (a trap) is a bug.
Needs python-lmdb (`python3 -m venv /tmp/v && /tmp/v/bin/pip install lmdb`):

    /tmp/v/bin/python Tools/damage-fuzz.py --ledger L.db --binary .build/release/ledger \
        [--tables p.daily,p.buckets,...] [--rounds 10] [--seed 1]

Used on 2026-11-30 for the README's "Opening … damaged" paragraph: 9 projection tables and
meta, 10 rounds each, on a 3,000-event ledger from `ledger-gen`; clients, samples, sync and
ids, 12 rounds each, on a ledger with clients, corrections and sync ids.
"""
import argparse, collections, os, random, shutil, subprocess, tempfile
import lmdb

parser = argparse.ArgumentParser()
parser.add_argument("--ledger", required=True)
parser.add_argument("--binary", required=True)
parser.add_argument("--tables", default="p.daily,p.perSource,p.lastKnown,p.grants,p.buckets,p.samples,p.users,p.userNames,meta")
parser.add_argument("--rounds", type=int, default=10)
parser.add_argument("--seed", type=int, default=1)
options = parser.parse_args()
commands = [["verify"], ["project", "daily"], ["project", "per-source"], ["project", "last-known"],
            ["project", "grants"], ["replay", "--to-seq", "1"], ["stats"], ["client", "list"], ["rebuild"]]
rng = random.Random(options.seed)
outcomes, traps = collections.Counter(), []
work = tempfile.mkdtemp(prefix="damage-")
for table in options.tables.split(","):
    for _ in range(options.rounds):
        copy = os.path.join(work, "copy.db")
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(options.ledger, copy)
        env = lmdb.open(copy, max_dbs=64, map_size=1 << 34)
        with env.begin(write=True) as txn:
            db = env.open_db(table.encode(), txn=txn, create=False)
            keys = [key for key, _ in txn.cursor(db)]
            key = rng.choice(keys)
            value = bytearray(txn.get(key, db=db))
            how = rng.choice(["cut", "flip", "random", "extend", "empty", "cut key"])
            if how == "cut" and len(value) > 1:
                value = value[:rng.randrange(1, len(value))]
            elif how == "flip" and value:
                value[rng.randrange(len(value))] ^= 1 << rng.randrange(8)
            elif how == "random":
                value = bytearray(os.urandom(rng.randrange(1, 64)))
            elif how == "extend":
                value += os.urandom(rng.randrange(1, 9))
            elif how == "empty":
                value = bytearray()
            if how == "cut key" and len(key) > 1:
                txn.delete(key, db=db)
                key = key[:rng.randrange(1, len(key))]
            txn.put(key, bytes(value), db=db)
        env.close()
        for command in commands:
            run = subprocess.run([options.binary, *command, "--db", copy], capture_output=True, timeout=120)
            outcomes["signal" if run.returncode < 0 else run.returncode] += 1
            if run.returncode < 0:
                traps.append((table, how, " ".join(command), run.returncode))
shutil.rmtree(work, ignore_errors=True)
print("exit codes:", dict(outcomes))
for trap in traps:
    print("TRAP:", *trap)
raise SystemExit(1 if traps else 0)
