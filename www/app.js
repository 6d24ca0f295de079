// Page controller: file picker, full-page drag and drop, the engine worker, and the
// status / error / report states of the page.

import { EngineClient } from './worker-client.js';
import { renderReport } from './inspector.js';

const engine = new EngineClient(new URL('./worker.js', import.meta.url));

const ui = {
  fileInput: document.getElementById('file-input'),
  openButton: document.getElementById('open-file'),
  welcomeButton: document.getElementById('welcome-drop'),
  dropZone: document.getElementById('drop-zone'),
  welcome: document.getElementById('welcome'),
  report: document.getElementById('report'),
  status: document.getElementById('status'),
  statusText: document.getElementById('status-text'),
  error: document.getElementById('error'),
  errorTitle: document.getElementById('error-title'),
  errorKind: document.getElementById('error-kind'),
  errorMessage: document.getElementById('error-message'),
  errorDismiss: document.getElementById('error-dismiss'),
  engineInfo: document.getElementById('engine-info'),
};

// Only the newest request may update the page: a slow large file must not overwrite
// the report of a file chosen after it.
let latestTicket = 0;

function setStatus(text) {
  ui.statusText.textContent = text ?? '';
  ui.status.hidden = !text;
}

function showError(title, error) {
  ui.errorTitle.textContent = title;
  ui.errorKind.textContent = error?.kind ?? 'internal';
  ui.errorMessage.textContent = error?.message || String(error);
  ui.error.dataset.kind = error?.kind ?? 'internal';
  ui.error.hidden = false;
}

function hideError() {
  ui.error.hidden = true;
  delete ui.error.dataset.kind;
}

function showReport(visible) {
  ui.report.hidden = !visible;
  ui.welcome.hidden = visible;
}

async function inspectFile(file) {
  const ticket = ++latestTicket;
  setStatus(`Inspecting ${file.name}…`);
  document.title = `${file.name} · Inferno`;
  try {
    const reply = await engine.request('inspect', { file });
    if (ticket !== latestTicket) return;
    renderReport(reply.report, { fileName: file.name, fileSize: file.size, bytesRead: reply.bytesRead, ms: reply.ms });
    hideError();
    showReport(true);
    window.scrollTo({ top: 0 });
  } catch (error) {
    if (ticket !== latestTicket) return;
    // The old report belongs to another file; leaving it up would mislabel it.
    showReport(false);
    showError(`Could not inspect ${file.name}`, error);
    if (!error?.kind) console.error(error); // Not a file problem: a bug worth seeing.
  } finally {
    if (ticket === latestTicket) {
      setStatus(null);
      // A completion counter lets tests (and scripts) wait for "this file is done".
      document.body.dataset.inspections = String(Number(document.body.dataset.inspections ?? 0) + 1);
    }
  }
}

async function showEngineInfo() {
  try {
    const { info } = await engine.request('info');
    ui.engineInfo.textContent = `engine ${info.version}${info.simd128 ? ' · SIMD128' : ''}`;
    ui.engineInfo.classList.add('ok');
  } catch (error) {
    ui.engineInfo.textContent = 'engine unavailable';
    ui.engineInfo.classList.add('failed');
    ui.engineInfo.title = error.message;
    showError('The Inferno engine could not start', error);
  }
}

function openPicker() {
  ui.fileInput.click();
}

function onFileChosen() {
  const [file] = ui.fileInput.files;
  if (file) inspectFile(file);
  ui.fileInput.value = ''; // Choosing the same file again should inspect it again.
}

function carriesFiles(event) {
  return [...(event.dataTransfer?.types ?? [])].includes('Files');
}

/** Full-page drop target: the overlay shows while files are dragged over the window. */
function wireDragAndDrop() {
  let depth = 0; // dragenter/dragleave fire for every child element crossed.
  const hideOverlay = () => {
    depth = 0;
    ui.dropZone.hidden = true;
  };
  window.addEventListener('dragenter', (event) => {
    if (!carriesFiles(event)) return;
    event.preventDefault();
    depth += 1;
    ui.dropZone.hidden = false;
  });
  window.addEventListener('dragover', (event) => {
    if (!carriesFiles(event)) return;
    event.preventDefault(); // Required for the drop event to fire at all.
    event.dataTransfer.dropEffect = 'copy';
  });
  window.addEventListener('dragleave', (event) => {
    if (!carriesFiles(event)) return;
    depth = Math.max(0, depth - 1);
    if (depth === 0 || event.relatedTarget === null) hideOverlay();
  });
  window.addEventListener('drop', (event) => {
    if (!carriesFiles(event)) return;
    event.preventDefault(); // Otherwise the browser navigates to the dropped file.
    hideOverlay();
    const [file] = event.dataTransfer.files;
    if (file) inspectFile(file);
  });
}

function main() {
  ui.openButton.addEventListener('click', openPicker);
  ui.welcomeButton.addEventListener('click', openPicker);
  ui.fileInput.addEventListener('change', onFileChosen);
  ui.errorDismiss.addEventListener('click', hideError);
  wireDragAndDrop();
  showEngineInfo();
}

main();
