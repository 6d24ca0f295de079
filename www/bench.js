// bench.html: Inferno's side of the browser benchmark. The work runs in bench-worker.js (a module
// Web Worker, as in the app); this page passes the URL parameters and publishes the result.

import { errorMessage, publish, readParams, showParams, showStatus, tidy } from './bench-common.js';

function main() {
  let params;
  try {
    params = readParams();
  } catch (error) {
    publish({ error: errorMessage(error) });
    return;
  }
  showParams(params);
  const worker = new Worker(new URL('./bench-worker.js', import.meta.url), { type: 'module' });
  worker.onmessage = ({ data }) => {
    if (data.type === 'progress') {
      showStatus(data.text);
      return;
    }
    worker.terminate();
    publish(data.type === 'result' ? tidy(data.result) : { error: data.error });
  };
  worker.onerror = (event) => {
    event.preventDefault();
    worker.terminate();
    publish({ error: `worker failed: ${event.message || 'could not start (is www/pkg built?)'}` });
  };
  worker.postMessage({ params });
}

main();
