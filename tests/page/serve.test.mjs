// The static server as an attacker would try it: Host names, redirects, symlinks out of the
// root, files that change while served, unparseable request targets.
//
//   node --test tests/page/serve.test.mjs   (no browser needed)

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { isLoopbackHost, startServer } from '../../scripts/serve.mjs';

/** GET `target` with the given headers; resolves to {status, headers, body}. */
function get(port, target, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: target, headers }, (res) => {
      const chunks = [];
      res.on('data', (chunk) => chunks.push(chunk));
      res.on('end', () =>
        resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/** Sends `text` as a raw request; resolves to the status line. */
function raw(port, text) {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(text));
    let reply = '';
    socket.on('data', (chunk) => {
      reply += chunk;
      if (reply.includes('\r\n')) {
        socket.destroy();
        resolve(reply.split('\r\n')[0]);
      }
    });
    socket.on('error', reject);
  });
}

describe('serve.mjs', () => {
  let dir;
  let root;
  let outside;
  let server;
  let open;
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'inferno-serve-'));
    root = path.join(dir, 'root');
    outside = path.join(dir, 'outside');
    mkdirSync(path.join(root, 'evil.com'), { recursive: true });
    mkdirSync(outside);
    writeFileSync(path.join(root, 'index.html'), 'hello');
    writeFileSync(path.join(root, 'evil.com', 'index.html'), 'a folder named like a host');
    writeFileSync(path.join(outside, 'secret.txt'), 'secret');
    symlinkSync(path.join(outside, 'secret.txt'), path.join(root, 'link.txt'));
    server = await startServer({ root, port: 0 });
    open = await startServer({ root, port: 0, allow: [outside] });
  });
  after(async () => {
    await server.close();
    await open.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('answers loopback Host names only (no DNS rebinding)', async () => {
    assert.equal((await get(server.port, '/')).status, 200);
    assert.equal((await get(server.port, '/', { Host: `localhost:${server.port}` })).status, 200);
    assert.equal((await get(server.port, '/', { Host: 'evil.example:8080' })).status, 421);
    assert.equal((await get(server.port, '/', { Host: '127.0.0.1.evil.example' })).status, 421);
    assert.ok(
      isLoopbackHost('[::1]:8080') && !isLoopbackHost(undefined) && !isLoopbackHost('localhost.evil'),
    );
  });

  test('a redirect to a folder never becomes a protocol-relative URL', async () => {
    const reply = await get(server.port, '/.//evil.com');
    assert.equal(reply.status, 301);
    assert.equal(reply.headers.location, '/evil.com/');
    assert.equal((await get(server.port, '/evil.com')).headers.location, '/evil.com/');
  });

  test('symlinks out of the root are refused unless their target directory is allowed', async () => {
    assert.equal((await get(server.port, '/link.txt')).status, 403);
    const allowed = await get(open.port, '/link.txt');
    assert.equal(allowed.status, 200);
    assert.equal(allowed.body.toString(), 'secret');
    assert.equal((await get(server.port, '/../outside/secret.txt')).status, 404); // the dots collapse first
  });

  test('an unparseable request target is a 400, not a 500', async () => {
    assert.match(
      await raw(server.port, `GET http://[ HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\n\r\n`),
      / 400 /,
    );
  });

  test('a file growing while it is served sends exactly the announced length', async () => {
    const file = path.join(root, 'growing.bin');
    writeFileSync(file, Buffer.alloc(8 << 20, 1));
    const reply = await new Promise((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port: server.port, path: '/growing.bin' }, (res) => {
        // The headers are out: the file grows before the body is read.
        appendFileSync(file, Buffer.alloc(1 << 20, 2));
        let length = 0;
        res.on('data', (chunk) => {
          length += chunk.length;
        });
        res.on('end', () => resolve({ announced: Number(res.headers['content-length']), length }));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end();
    });
    assert.equal(reply.announced, 8 << 20);
    assert.equal(reply.length, reply.announced);
  });

  test('ranges still work', async () => {
    const reply = await get(server.port, '/index.html', { Range: 'bytes=1-3' });
    assert.equal(reply.status, 206);
    assert.equal(reply.body.toString(), 'ell');
  });

  test('test faults: no Range support; a connection cut or hung once at a byte', async () => {
    writeFileSync(path.join(root, 'data.bin'), Buffer.from([...Array(256).keys()]));
    const noRanges = await startServer({ root, port: 0, ranges: false });
    const faulty = await startServer({
      root,
      port: 0,
      dropOnce: { '/data.bin': 100 },
      stallOnce: { '/data.bin?hang': 50 },
    });
    try {
      const whole = await get(noRanges.port, '/data.bin', { Range: 'bytes=10-19' });
      assert.equal(whole.status, 200);
      assert.equal(whole.headers['accept-ranges'], undefined);
      assert.equal(whole.body.length, 256);

      // A plain GET is never cut; the first Range response over byte 100 is, right before it.
      assert.equal((await get(faulty.port, '/data.bin')).body.length, 256);
      assert.equal((await get(faulty.port, '/data.bin', { Range: 'bytes=0-49' })).body.length, 50);
      const cut = await new Promise((resolve) => {
        const chunks = [];
        const req = request(
          { host: '127.0.0.1', port: faulty.port, path: '/data.bin', headers: { Range: 'bytes=60-199' } },
          (res) => {
            res.on('data', (chunk) => chunks.push(chunk));
            res.on('error', () => resolve(Buffer.concat(chunks)));
            res.on('aborted', () => resolve(Buffer.concat(chunks)));
            res.on('end', () => resolve(Buffer.concat(chunks)));
          },
        );
        req.on('error', () => resolve(Buffer.concat(chunks)));
        req.end();
      });
      assert.deepEqual(
        [...cut],
        [...Array(40).keys()].map((i) => 60 + i),
      );
      const again = await get(faulty.port, '/data.bin', { Range: 'bytes=60-199' });
      assert.equal(again.body.length, 140, 'once only');

      // The hang sends bytes up to 50, then nothing while the connection stays open.
      const hung = await new Promise((resolve) => {
        const req = request(
          { host: '127.0.0.1', port: faulty.port, path: '/data.bin?hang', headers: { Range: 'bytes=0-255' } },
          (res) => {
            let received = 0;
            res.on('data', (chunk) => (received += chunk.length));
            setTimeout(() => {
              resolve({ received, open: !res.complete });
              req.destroy();
            }, 300);
          },
        );
        req.on('error', () => {});
        req.end();
      });
      assert.deepEqual(hung, { received: 50, open: true });
    } finally {
      await noRanges.close();
      await faulty.close();
    }
  });
});
