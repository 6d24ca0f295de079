// scripts/test-totals.mjs: ./build.sh test's closing table adds up every runner's summary.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { suiteTable, totals } from '../../scripts/test-totals.mjs';

const CARGO = [
  'test result: ok. 171 passed; 0 failed; 2 ignored; 0 measured; 0 filtered out; finished in 9.04s',
  'test tensor::matmul::tests::x ... ok',
  'test result: FAILED. 4 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out; finished in 1s',
].join('\n');
const NODE = [
  'ℹ tests 20',
  'ℹ pass 19',
  'ℹ fail 1',
  'ℹ skipped 3',
  'ℹ todo 0',
  '  ℹ pass 7 (indented: a subtest line, not a total)',
  'the 12 passed; 3 failed of another tool',
].join('\n');

test('cargo and node --test summaries are added up, nothing else', () => {
  assert.deepEqual(totals(`${CARGO}\n${NODE}`), { passed: 171 + 4 + 19, failed: 2 + 1, skipped: 2 + 3 });
});

test('the table has a row per suite with its time, and a total line the CI reads', () => {
  const table = suiteTable([
    { name: 'native', seconds: 754, log: CARGO },
    { name: 'page', seconds: 61, log: NODE },
  ]).split('\n');
  assert.match(table[1], /^native\s+12:34\s+175\s+2\s+2$/);
  assert.match(table[2], /^page\s+1:01\s+19\s+1\s+3$/);
  assert.match(table[3], /^all suites\s+13:35\s+194\s+3\s+5$/);
  assert.equal(table.at(-1), 'total: 194 passed, 3 failed, 5 skipped');
});
