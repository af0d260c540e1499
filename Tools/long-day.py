#!/usr/bin/env python3
"""A watch's day over HTTP: POSTs one-minute step samples for one user and one day, one per
request (each its own durable commit), alternating an iPhone and a Watch, and prints the
server's CPU time, the wall time and the bytes the server wrote to disk per POST, every 240.

    python3 Tools/long-day.py [COUNT] [LEDGER-BINARY]     # defaults: 1440, .build/release/ledger

What it shows is how an append's cost grows as its day fills (README, Performance). It makes a
fresh ledger in a temporary directory and listens on a free loopback port."""
import http.client, json, os, subprocess, sys, tempfile, time
from ledger_server import serve

count = int(sys.argv[1]) if len(sys.argv) > 1 else 1440
binary = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), '..', '.build', 'release', 'ledger')
work = tempfile.mkdtemp(prefix='long-day-')
db = os.path.join(work, 'ledger.db')
server, port, token = serve(binary, db, client='day')

def cpu():
    fields = open(f'/proc/{server.pid}/stat').read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')

def written():
    for line in open(f'/proc/{server.pid}/io'):
        if line.startswith('write_bytes'):
            return int(line.split()[1])

connection = http.client.HTTPConnection('127.0.0.1', port)
step = 240
last = (cpu(), time.time(), written())
try:
    for minute in range(count):
        covered = minute % 1440
        event = {"kind": "sample", "user": "ann", "type": "steps", "value": 40 + minute % 70,
                 "start": "2026-01-01T%02d:%02d:00Z" % (covered // 60, covered % 60),
                 "end": "2026-01-01T%02d:%02d:59Z" % (covered // 60, covered % 60),
                 "source": "Watch" if minute % 2 else "iPhone"}
        connection.request('POST', '/v1/events', body=json.dumps(event),
                           headers={'Authorization': 'Bearer ' + token})
        response = connection.getresponse()
        response.read()
        if response.status != 200:
            sys.exit(f'POST {minute + 1}: HTTP {response.status}')
        if (minute + 1) % step == 0:
            now = (cpu(), time.time(), written())
            print('samples %5d: server CPU %.2f ms, wall %.2f ms, written %.0f KiB per POST'
                  % (minute + 1, (now[0] - last[0]) / step * 1e3, (now[1] - last[1]) / step * 1e3,
                     (now[2] - last[2]) / step / 1024))
            last = now
finally:
    server.terminate()
    server.wait()
    subprocess.run(['rm', '-rf', work])
