#!/usr/bin/python3
"""pty_run.py PATTERN DELAY LIMIT CMD...: runs CMD as the foreground job of
a new pseudo-terminal, types Ctrl-C (the terminal's interrupt character,
so the kernel sends SIGINT to the terminal's foreground process group, as
at a keyboard) DELAY seconds after PATTERN first appears in its output,
copies the output to stdout and exits with CMD's status (128 + signal when
a signal ended it). CMD is killed after LIMIT seconds (status 124)."""
import os
import pty
import select
import signal
import sys
import time

pattern, delay, limit = sys.argv[1].encode(), float(sys.argv[2]), float(sys.argv[3])
pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[4], sys.argv[4:])
t0 = time.time()
seen = None
sent = False
out = b""
killed = False
while True:
    now = time.time()
    if seen is None and pattern in out:
        seen = now
    if seen is not None and not sent and now - seen >= delay:
        os.write(fd, b"\x03")
        sent = True
    if now - t0 > limit and not killed:
        os.killpg(pid, signal.SIGKILL)
        killed = True
    r, _, _ = select.select([fd], [], [], 0.05)
    if r:
        try:
            b = os.read(fd, 65536)
        except OSError:  # EIO: every writer closed the terminal
            b = b""
        if not b:
            break
        out += b
        sys.stdout.buffer.write(b)
        sys.stdout.flush()
_, st = os.waitpid(pid, 0)
if killed:
    sys.exit(124)
if not sent:
    print("pty_run: the pattern %r never appeared" % pattern.decode(), file=sys.stderr)
sys.exit(os.WEXITSTATUS(st) if os.WIFEXITED(st) else 128 + os.WTERMSIG(st))
