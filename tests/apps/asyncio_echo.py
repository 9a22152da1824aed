# A Python asyncio echo server and client (tests/apps/apps_test.sh).
import asyncio, os, signal, sys
async def handle(r, w):
    while True:
        d = await r.read(65536)
        if not d: break
        w.write(d); await w.drain()
    w.close()
async def server(port):
    # SIGTERM ends the server normally (so the shim writes its stats at exit).
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    s = await asyncio.start_server(handle, '127.0.0.1', port)
    async with s:
        await stop.wait()
async def client(port, n, conns):
    async def one(i):
        r, w = await asyncio.open_connection('127.0.0.1', port)
        data = os.urandom(n)
        async def rd():
            got = bytearray()
            while len(got) < n:
                b = await r.read(65536)
                if not b: break
                got += b
            return bytes(got)
        t = asyncio.create_task(rd())
        for k in range(0, n, 32768):
            w.write(data[k:k+32768]); await w.drain()
        got = await t
        w.close()
        return got == data
    res = await asyncio.gather(*[one(i) for i in range(conns)])
    print("ok=%d conns=%d" % (sum(res), conns))
if sys.argv[1] == 'server': asyncio.run(server(int(sys.argv[2])))
else: asyncio.run(client(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])))
