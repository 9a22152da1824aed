// Node's own HTTP server and client (libuv: every descriptor closed with
// syscall(SYS_close)), for raw_syscalls_test.sh.
//   node node_http.js server PORT
//   node node_http.js keepalive|close PORT N
// The client posts N bodies of varying sizes, 8 at a time, each answered by
// a body of another size whose bytes it checks, and prints
// "ok=<intact> bad=<not>", plus a line per error.
'use strict';
const http = require('http');
const crypto = require('crypto');
const [mode, portArg, countArg] = process.argv.slice(2);
const port = Number(portArg);
const byteAt = (i) => (i * 7 + 3) & 255;

if (mode === 'server') {
  http.createServer((req, res) => {
    const hash = crypto.createHash('sha256');
    let got = 0;
    req.on('data', (d) => { hash.update(d); got += d.length; });
    req.on('end', () => {
      const size = Number(req.headers['x-size'] || 0);
      const body = Buffer.alloc(size);
      for (let i = 0; i < size; i++) body[i] = byteAt(i);
      res.setHeader('x-got', got + ':' + hash.digest('hex'));
      res.end(body);
    });
  }).listen(port, '127.0.0.1');
  process.on('SIGTERM', () => process.exit(0));
} else {
  const agent = new http.Agent({ keepAlive: mode === 'keepalive', maxSockets: 8 });
  const total = Number(countArg);
  let ok = 0, bad = 0, next = 0;
  const one = (i) => new Promise((resolve) => {
    const size = (i * 7919) % 300000;
    const up = crypto.randomBytes((i * 104729) % 200000);
    const want = up.length + ':' + crypto.createHash('sha256').update(up).digest('hex');
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/', agent,
                               headers: { 'x-size': size } }, (res) => {
      const chunks = [];
      res.on('data', (d) => chunks.push(d));
      res.on('end', () => {
        const b = Buffer.concat(chunks);
        let good = b.length === size && res.headers['x-got'] === want;
        for (let k = 0; good && k < size; k++) good = b[k] === byteAt(k);
        if (good) ok++; else bad++;
        resolve();
      });
    });
    req.on('error', (e) => { console.log('error ' + e.code); bad++; resolve(); });
    req.end(up);
  });
  const worker = async () => { while (next < total) await one(next++); };
  Promise.all(Array.from({ length: 8 }, worker)).then(() => {
    console.log(`ok=${ok} bad=${bad}`);
    agent.destroy();
  });
}
