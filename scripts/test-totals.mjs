// Adds up the tests that passed and failed in a log of several runners, for ./build.sh test's
// last line: cargo's "test result: ok. 12 passed; 0 failed; ..." and node --test's spec
// reporter totals "ℹ pass 3" / "ℹ fail 0".
//
//   node scripts/test-totals.mjs LOG   -> "P passed, F failed"

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** {passed, failed} over every runner's summary lines in `log`. */
export function totals(log) {
  let passed = 0;
  let failed = 0;
  for (const line of log.split('\n')) {
    const cargo = /^test result: \w+\. (\d+) passed; (\d+) failed;/.exec(line);
    if (cargo) {
      passed += Number(cargo[1]);
      failed += Number(cargo[2]);
    }
    const node = /^ℹ (pass|fail) (\d+)$/.exec(line.trimEnd());
    if (node) {
      if (node[1] === 'pass') passed += Number(node[2]);
      else failed += Number(node[2]);
    }
  }
  return { passed, failed };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { passed, failed } = totals(readFileSync(process.argv[2], 'utf8'));
  console.log(`${passed} passed, ${failed} failed`);
}
