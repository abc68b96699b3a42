"""A TCP proxy that holds every chunk it forwards, each way, for a fixed delay: a store on
loopback answering as one across a network does (a round trip of twice the delay), for benches
of what latency costs (benches/catch_up.sh). Order is kept per connection.

Usage: python3 benches/latency_proxy.py LISTEN_PORT TARGET_HOST TARGET_PORT DELAY_MS
Prints "ready" once listening; serves until killed.
"""
import asyncio
import sys


async def pipe(reader, writer, delay):
    # Each chunk is released `delay` after it arrived, not after the one before: a stream of
    # chunks is delayed, not slowed.
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()

    async def release():
        while True:
            due, data = await queue.get()
            if data is None:
                break
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        writer.close()

    sender = asyncio.ensure_future(release())
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            queue.put_nowait((loop.time() + delay, data))
    finally:
        queue.put_nowait((0, None))
        await sender


async def main():
    listen, host, port, delay = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4]) / 1000

    async def handle(client_r, client_w):
        try:
            server_r, server_w = await asyncio.open_connection(host, port)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(pipe(client_r, server_w, delay), pipe(server_r, client_w, delay), return_exceptions=True)

    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


asyncio.run(main())
