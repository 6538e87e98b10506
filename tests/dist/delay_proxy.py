#!/usr/bin/env python3
"""delay_proxy.py LISTEN_HOST:PORT TARGET_HOST:PORT DELAY_MS JITTER_MS [SEED]

A TCP relay that delays the client-to-target direction like `tc netem delay
DELAY JITTER` under TCP: every chunk that arrives is forwarded DELAY +-
JITTER ms later (uniform), never before the chunk ahead of it (a TCP stream
stays in order, so a late segment holds back the ones behind it). The other
direction is relayed at once. One connection, then it exits. The jitter
test uses it where the kernel has no netem qdisc.
"""
import asyncio
import random
import sys


async def main():
    lhost, lport = sys.argv[1].rsplit(":", 1)
    thost, tport = sys.argv[2].rsplit(":", 1)
    delay, jitter = float(sys.argv[3]) / 1000, float(sys.argv[4]) / 1000
    rng = random.Random(int(sys.argv[5]) if len(sys.argv) > 5 else 7)
    done = asyncio.Event()

    async def handle(cr, cw):
        for _ in range(600):
            try:
                tr, tw = await asyncio.open_connection(thost, int(tport))
                break
            except OSError:
                await asyncio.sleep(0.05)
        else:
            cw.close()
            done.set()
            return
        loop = asyncio.get_running_loop()
        queue = asyncio.Queue()

        async def pump_in():
            while True:
                data = await cr.read(65536)
                t = loop.time() + max(0.0, delay + rng.uniform(-jitter, jitter))
                await queue.put((t, data))
                if not data:
                    return

        async def pump_out():
            last = 0.0
            while True:
                t, data = await queue.get()
                t = max(t, last)
                last = t
                wait = t - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:
                    tw.write_eof() if tw.can_write_eof() else None
                    return
                tw.write(data)
                await tw.drain()

        async def pump_back():
            while True:
                data = await tr.read(65536)
                if not data:
                    cw.close()
                    return
                cw.write(data)
                await cw.drain()

        await asyncio.gather(pump_in(), pump_out(), pump_back(), return_exceptions=True)
        tw.close()
        done.set()

    server = await asyncio.start_server(handle, lhost, int(lport))
    async with server:
        await done.wait()


if __name__ == "__main__":
    asyncio.run(main())
