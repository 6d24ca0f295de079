// Adds up the tests that passed, failed and were skipped in the logs of several runners, for
// ./build.sh test's closing table and last line: cargo's "test result: ok. 12 passed; 0 failed;
// 1 ignored; ..." and node --test's spec reporter totals "ℹ pass 3" / "ℹ fail 0" / "ℹ skipped 0".
//
//   node scripts/test-totals.mjs LOG             -> "P passed, F failed, S skipped"
//   node scripts/test-totals.mjs --suites TSV    -> a table of the suites (TSV lines:
//                                                   seconds, log file, name), then "total: ..."

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** {passed, failed, skipped} over every runner's summary lines in `log`. */
export function totals(log) {
  const sum = { passed: 0, failed: 0, skipped: 0 };
  for (const line of log.split('\n')) {
    const cargo = /^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored;/.exec(line);
    if (cargo) {
      sum.passed += Number(cargo[1]);
      sum.failed += Number(cargo[2]);
      sum.skipped += Number(cargo[3]);
    }
    const node = /^ℹ (pass|fail|skipped|todo) (\d+)$/.exec(line.trimEnd());
    if (node)
      sum[{ pass: 'passed', fail: 'failed', skipped: 'skipped', todo: 'skipped' }[node[1]]] += Number(
        node[2],
      );
  }
  return sum;
}

const counts = ({ passed, failed, skipped }) => `${passed} passed, ${failed} failed, ${skipped} skipped`;

/** The closing table: one row per suite (time, counts), then the total of every column. */
export function suiteTable(suites) {
  const minutes = (seconds) => `${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, '0')}`;
  const rows = suites.map(({ seconds, log, name }) => ({ name, seconds, ...totals(log) }));
  const all = rows.reduce(
    (sum, row) => ({
      seconds: sum.seconds + row.seconds,
      passed: sum.passed + row.passed,
      failed: sum.failed + row.failed,
      skipped: sum.skipped + row.skipped,
    }),
    { seconds: 0, passed: 0, failed: 0, skipped: 0 },
  );
  const width = Math.max(...rows.map((row) => row.name.length), 'suite'.length);
  const line = (name, time, passed, failed, skipped) =>
    `${name.padEnd(width)}  ${time.padStart(6)}  ${passed.padStart(6)}  ${failed.padStart(6)}  ${skipped.padStart(7)}`;
  return [
    line('suite', 'm:ss', 'passed', 'failed', 'skipped'),
    ...rows.map((r) => line(r.name, minutes(r.seconds), `${r.passed}`, `${r.failed}`, `${r.skipped}`)),
    line('all suites', minutes(all.seconds), `${all.passed}`, `${all.failed}`, `${all.skipped}`),
    '',
    `total: ${counts(all)}`,
  ].join('\n');
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  if (process.argv[2] === '--suites') {
    const suites = readFileSync(process.argv[3], 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => {
        const [seconds, log, name] = line.split('\t');
        return { seconds: Number(seconds), log: readFileSync(log, 'utf8'), name };
      });
    console.log(suiteTable(suites));
  } else {
    console.log(counts(totals(readFileSync(process.argv[2], 'utf8'))));
  }
}
