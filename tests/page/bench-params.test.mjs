// The benchmark page's URL parameters: a link cannot make the page fetch another site's file
// or run unbounded work.
//
//   node --test tests/page/bench-params.test.mjs   (no browser needed)

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PARAM_LIMITS, readParams } from '../../www/bench/bench-common.js';

const PAGE = 'http://127.0.0.1:8080/bench/bench.html';

test('the model comes from the page origin only', () => {
  const params = readParams('?model=/models/x.gguf&pp=8&tg=4', PAGE);
  assert.equal(params.model, 'http://127.0.0.1:8080/models/x.gguf');
  assert.deepEqual([params.pp, params.tg, params.ctx], [8, 4, 256]);
  assert.throws(() => readParams('?model=https://evil.example/x.gguf', PAGE), /origin/);
  assert.throws(() => readParams('?model=//evil.example/x.gguf', PAGE), /origin/);
  assert.throws(() => readParams('?model=http://[', PAGE), /not a URL/);
  assert.throws(() => readParams('', PAGE), /missing/);
});

test('every number is bounded', () => {
  for (const [name, max] of Object.entries(PARAM_LIMITS)) {
    assert.throws(() => readParams(`?model=x.gguf&${name}=${max + 1}`, PAGE), new RegExp(`${name} must be`));
  }
  assert.throws(() => readParams('?model=x.gguf&pp=1e9', PAGE), /pp must be/);
  assert.throws(() => readParams('?model=x.gguf&tg=-1', PAGE), /tg must be/);
  assert.equal(
    readParams(`?model=x.gguf&pp=${PARAM_LIMITS.pp}&tg=1&ctx=${PARAM_LIMITS.ctx}`, PAGE).pp,
    PARAM_LIMITS.pp,
  );
});

test("attention's precision is fast unless exact is asked for, and nothing else", () => {
  assert.equal(readParams('?model=x.gguf', PAGE).precision, 'fast');
  assert.equal(readParams('?model=x.gguf&precision=exact', PAGE).precision, 'exact');
  assert.throws(() => readParams('?model=x.gguf&precision=half', PAGE), /precision must be/);
});

test('the KV cache types are f16 unless f16, q8_0 or f32 is asked for, and nothing else', () => {
  const params = readParams('?model=x.gguf', PAGE);
  assert.deepEqual([params.cacheTypeK, params.cacheTypeV], ['f16', 'f16']);
  const asked = readParams('?model=x.gguf&cache_type_k=q8_0&cache_type_v=f32', PAGE);
  assert.deepEqual([asked.cacheTypeK, asked.cacheTypeV], ['q8_0', 'f32']);
  assert.throws(() => readParams('?model=x.gguf&cache_type_k=q4_0', PAGE), /cache_type_k must be/);
});

test('a depth makes room for itself in the cache', () => {
  const params = readParams('?model=x.gguf&pp=64&tg=32&depth=448', PAGE);
  assert.deepEqual([params.depth, params.ctx], [448, 768]);
  assert.equal(readParams('?model=x.gguf', PAGE).depth, 0);
  assert.throws(() => readParams('?model=x.gguf&depth=448&ctx=256', PAGE), /ctx must be/);
  assert.throws(() => readParams('?model=x.gguf&depth=-1', PAGE), /depth must be/);
});

test('a projector and a picture come together, from the page origin only', () => {
  const params = readParams('?model=x.gguf&mmproj=p.gguf&image=/models/a.png', PAGE);
  assert.equal(params.mmproj, 'http://127.0.0.1:8080/bench/p.gguf');
  assert.equal(params.image, 'http://127.0.0.1:8080/models/a.png');
  assert.deepEqual(
    [readParams('?model=x.gguf', PAGE).mmproj, readParams('?model=x.gguf', PAGE).image],
    [null, null],
  );
  assert.throws(() => readParams('?model=x.gguf&mmproj=p.gguf', PAGE), /go together/);
  assert.throws(() => readParams('?model=x.gguf&image=a.png', PAGE), /go together/);
  assert.throws(
    () => readParams('?model=x.gguf&mmproj=p.gguf&image=https://evil.example/a.png', PAGE),
    /image must be served/,
  );
  assert.throws(
    () => readParams('?model=x.gguf&mmproj=//evil.example/p&image=a.png', PAGE),
    /mmproj must be served/,
  );
});
