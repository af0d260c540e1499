#!/usr/bin/env python3
"""Subscribers catching up, beside the POSTs of other clients: how long a POST's answer takes
while STREAMS clients read the whole log from seq 0 over `/v1/subscribe/events?from=0` (and
never read their sockets, so the server keeps formatting what the kernel's buffers take), side
by side with the same POSTs and no streams, for each binary given.

    python3 Tools/catch-up.py [--streams N] [--events N] [--posts N] [BINARY ...]
        # defaults: 50 streams, about 35,000 events, 200 POSTs, .build/release/ledger

SPEC §8: a slow subscriber never slows appends. Each binary gets a fresh ledger of the same
generated events (`ledger-gen` beside the binary) in a temporary directory, and a free
loopback port."""
import argparse, http.client, json, os, socket, statistics, subprocess, sys, tempfile, time
from ledger_server import serve

parser = argparse.ArgumentParser()
parser.add_argument('--streams', type=int, default=50)
parser.add_argument('--events', type=int, default=35_000)
parser.add_argument('--posts', type=int, default=200)
parser.add_argument('binaries', nargs='*')
arguments = parser.parse_args()
binaries = arguments.binaries or [os.path.join(os.path.dirname(__file__), '..', '.build', 'release', 'ledger')]


def generated(binary, events):
    generator = os.path.join(os.path.dirname(binary), 'ledger-gen')
    days = max(1, events // 100)
    return subprocess.run([generator, '--users', '1', '--days', str(days), '--seed', '3'],
                          check=True, capture_output=True).stdout


def run(binary, streams, data):
    work = tempfile.mkdtemp(prefix='catch-up-')
    db = os.path.join(work, 'ledger.db')
    server = None
    try:
        server, port, token = serve(binary, db, before_serving=lambda db: subprocess.run(
            [binary, 'append', '--db', db, '-'], input=data, check=True, capture_output=True))
        sockets = []
        for _ in range(streams):
            stream = socket.create_connection(('127.0.0.1', port))
            stream.sendall(('GET /v1/subscribe/events?from=0 HTTP/1.1\r\nHost: x\r\n'
                            f'Authorization: Bearer {token}\r\n\r\n').encode())
            sockets.append(stream)
        time.sleep(0.2)
        connection = http.client.HTTPConnection('127.0.0.1', port)
        latencies = []
        for n in range(arguments.posts):
            event = {"kind": "sample", "user": "poster", "type": "steps", "value": 10 + n,
                     "start": "2026-06-01T%02d:%02d:00Z" % (n // 60 % 24, n % 60),
                     "end": "2026-06-01T%02d:%02d:30Z" % (n // 60 % 24, n % 60), "source": "iPhone"}
            began = time.perf_counter()
            connection.request('POST', '/v1/events', body=json.dumps(event),
                               headers={'Authorization': 'Bearer ' + token})
            response = connection.getresponse()
            response.read()
            latencies.append((time.perf_counter() - began) * 1e3)
            if response.status != 200:
                sys.exit(f'POST {n + 1}: HTTP {response.status}')
        for stream in sockets:
            stream.close()
        return latencies
    finally:
        if server:
            server.terminate()
            server.wait()
        subprocess.run(['rm', '-rf', work])


print(f'| binary | streams | POST mean | p50 | p99 | worst |')
print(f'|---|---|---|---|---|---|')
data = generated(binaries[0], arguments.events)
for binary in binaries:
    for streams in (0, arguments.streams):
        latencies = sorted(run(binary, streams, data))
        p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
        print(f'| {binary} | {streams} | {statistics.mean(latencies):.1f} ms | {statistics.median(latencies):.1f} ms '
              f'| {p99:.1f} ms | {latencies[-1]:.1f} ms |', flush=True)
