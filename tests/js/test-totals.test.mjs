// scripts/test-totals.mjs: ./build.sh test's last line adds up every runner's summary.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { totals } from '../../scripts/test-totals.mjs';

test('cargo and node --test summaries are added up, nothing else', () => {
  const log = [
    'test result: ok. 171 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 9.04s',
    'test tensor::matmul::tests::x ... ok',
    'test result: FAILED. 4 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out; finished in 1s',
    'ℹ tests 20',
    'ℹ pass 19',
    'ℹ fail 1',
    'ℹ skipped 3',
    '  ℹ pass 7 (indented: a subtest line, not a total)',
    'the 12 passed; 3 failed of another tool',
  ].join('\n');
  assert.deepEqual(totals(log), { passed: 171 + 4 + 19, failed: 2 + 1 });
});
