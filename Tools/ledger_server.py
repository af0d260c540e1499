"""Shared by the Tools/ scripts: a fresh ledger with an admin client, served on a free
loopback port."""
import os, socket, subprocess


def serve(binary, db, client='bench', before_serving=None):
    """Makes the ledger at `db` and an admin client, runs `before_serving(db)` if given, and
    starts `ledger serve` on a free loopback port. Returns (process, port, token)."""
    subprocess.run([binary, 'init', '--db', db], check=True, capture_output=True)
    if before_serving:
        before_serving(db)
    token = subprocess.run([binary, 'client', 'add', client, '--admin', '--db', db], check=True,
                           capture_output=True, text=True).stdout.strip()
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([binary, 'serve', '--db', db, '--listen', f'127.0.0.1:{port}'],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    server.stdout.readline()  # "listening on …"
    return server, port, token
