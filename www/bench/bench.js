// @ts-check
// bench.html: Inferno's side of the browser benchmark. The work runs in bench-worker.js (a module
// Web Worker, as in the app); this page passes the URL parameters and publishes the result.

import { errorMessage, publish, readParams, runWorker } from './bench-common.js';

function main() {
  let params;
  try {
    params = readParams();
  } catch (error) {
    publish({ error: errorMessage(error) });
    return;
  }
  runWorker(new URL('./bench-worker.js', import.meta.url), params);
}

main();
