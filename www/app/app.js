// @ts-check
// Page controller: the Chat / Inspect tabs, file picker, full-page drag and drop, the
// engine worker, and the inspector's status / error / report states. A chosen file is both
// inspected (header only, in a moment) and loaded for chat (the whole file, with progress).

import { Inferno } from '../lib/inferno.js';
import { renderReport } from './inspector.js';
import { createChat } from './chat.js';
import { errorBanner } from './dom.js';
import { splitModelName } from './format.js';
import { loadChatState } from '../lib/storage.js';
import { isPicture } from './chat-pictures.js';

// ?relaxed=0 in the page's address forces the plain SIMD128 build (what Safari gets).
const pageParams = new URLSearchParams(location.search);
// The engine starts with the thread count the chat settings saved, so that a file dropped
// right away is inspected and loaded by the same worker (a different count restarts it).
const savedThreads = Number(loadChatState()?.settings?.threads);
const engine = Inferno.create({
  threads: Number.isInteger(savedThreads) && savedThreads > 0 ? savedThreads : null,
  relaxed: pageParams.get('relaxed') !== '0',
});

const ui = {
  fileInput: /** @type {HTMLInputElement} */ (document.getElementById('file-input')),
  openButton: document.getElementById('open-file'),
  welcomeButton: document.getElementById('welcome-drop'),
  dropZone: document.getElementById('drop-zone'),
  welcome: document.getElementById('welcome'),
  report: document.getElementById('report'),
  status: document.getElementById('status'),
  statusText: document.getElementById('status-text'),
  engineInfo: document.getElementById('engine-info'),
  tabs: { chat: document.getElementById('tab-chat'), inspect: document.getElementById('tab-inspect') },
  views: { chat: document.getElementById('chat-view'), inspect: document.getElementById('inspect-view') },
};

function showView(name) {
  for (const [view, tab] of Object.entries(ui.tabs)) {
    const active = view === name;
    tab.setAttribute('aria-selected', String(active));
    tab.tabIndex = active ? 0 : -1;
    ui.views[view].hidden = !active;
  }
  document.body.dataset.view = name;
  if (location.hash !== `#${name}`) history.replaceState(null, '', `#${name}`);
}

const chat = createChat(engine, {
  pickFile: () => openPicker(),
  // A model streamed from a URL or opened from the browser's storage has no File here to
  // read a header from: inspect the loaded bytes.
  onModelLoaded: (model) => {
    showEngineInfo(); // The engine may have been restarted with another thread count.
    if (model.source !== 'file') inspectFile({ name: model.name, size: model.size });
  },
});

// Only the newest request may update the page: a slow large file must not overwrite
// the report of a file chosen after it.
let latestTicket = 0;

// The File (or shards) the report is of, inspected again when the Device setting changes: the
// verdict on a file too large for memory here follows the device a load would ask for.
/** @type {Blob | Blob[] | null} */
let inspectedFile = null;
document.getElementById('set-device')?.addEventListener('change', () => {
  if (inspectedFile) inspectFile(inspectedFile);
});

function setStatus(text) {
  ui.statusText.textContent = text ?? '';
  ui.status.hidden = !text;
}

const { show: showError, hide: hideError } = errorBanner('error');

function showReport(visible) {
  ui.report.hidden = !visible;
  ui.welcome.hidden = visible;
}

/** Inspects a File (its header only), or the loaded model when no file is given. */
async function inspectFile(source) {
  const ticket = ++latestTicket;
  // A split model's shards are reported as one model, named without the shard number.
  const shards = Array.isArray(source) ? source : null;
  inspectedFile = shards || source instanceof Blob ? source : null;
  const file = shards
    ? { name: splitModelName(shards[0].name), size: shards.reduce((n, f) => n + f.size, 0) }
    : source;
  setStatus(`Inspecting ${file.name}…`);
  document.title = `${file.name} · Inferno`;
  try {
    // The device the chat's settings would load it on decides whether a file too large for
    // memory here could run on the GPU.
    const chosen = /** @type {HTMLSelectElement | null} */ (document.getElementById('set-device'))?.value;
    const device = /** @type {'auto' | 'gpu' | 'cpu' | undefined} */ (
      ['auto', 'gpu', 'cpu'].includes(chosen ?? '') ? chosen : undefined
    );
    const options = device ? { device } : {};
    const reply =
      shards || source instanceof Blob ? await engine.inspectFile(source, options) : await engine.inspect();
    if (ticket !== latestTicket) return;
    renderReport(reply.report, {
      fileName: shards ? `${file.name} (${shards.length} files)` : file.name,
      fileSize: file.size,
      bytesRead: reply.bytesRead,
      ms: reply.ms,
    });
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
    const info = await engine.engineInfo();
    const threads = `${info.threads} ${info.threads === 1 ? 'thread' : 'threads'}`;
    ui.engineInfo.textContent = `engine ${info.version}${info.simd128 ? ' · SIMD128' : ''}${info.relaxed_simd ? ' · relaxed SIMD' : ''} · ${threads}`;
    ui.engineInfo.title = info.threads_note ?? '';
    showFallbacks();
    ui.engineInfo.classList.remove('failed');
    ui.engineInfo.classList.add('ok');
  } catch (error) {
    ui.engineInfo.textContent = 'engine unavailable';
    ui.engineInfo.classList.add('failed');
    ui.engineInfo.title = error.message;
    showError('The Inferno engine could not start', error);
  }
}

/** What this browser lacks and what runs instead, in the settings (and the badge's tooltip). */
function showFallbacks() {
  const { missing } = Inferno.capabilities();
  const note = document.getElementById('browser-fallbacks');
  note.hidden = missing.length === 0;
  note.textContent = missing.length
    ? 'This browser lacks ' +
      missing.map(({ feature, fallback }) => `${feature} (so: ${fallback})`).join('; ') +
      '.'
    : '';
  if (missing.length) ui.engineInfo.title += `${ui.engineInfo.title ? '\n' : ''}${note.textContent}`;
}

function openPicker() {
  ui.fileInput.click();
}

/** Whether a GGUF file is a vision projector (mmproj), from its header. @param {File} file */
async function isProjector(file) {
  try {
    return Boolean((await engine.inspectFile(file)).report.vision);
  } catch {
    return false; // Not readable as a projector: the model's load says what is wrong with it.
  }
}

/**
 * What the person chose or dropped: pictures go to the chat's composer; a vision projector
 * (mmproj) goes beside the model loaded with it, or beside the model already loaded; the rest
 * is a model (or the shards of a split one), inspected and loaded for chat.
 */
async function openFiles(fileList) {
  const files = [...fileList];
  const pictures = files.filter(isPicture);
  const ggufs = files.filter((file) => !isPicture(file));
  if (pictures.length > 0) chat.addPictures(pictures);
  if (ggufs.length === 0) return;
  // A projector is told apart by its header; a lone file with a model loaded may be one.
  const mayHoldProjector = ggufs.length === 2 || (ggufs.length === 1 && chat.model);
  const projectors = mayHoldProjector ? await Promise.all(ggufs.map(isProjector)) : ggufs.map(() => false);
  const projector = ggufs.find((_, i) => projectors[i]) ?? null;
  const models = ggufs.filter((_, i) => !projectors[i]);
  if (projector && models.length === 0) {
    inspectFile(projector);
    chat.attachProjector(projector);
    return;
  }
  const source = models.length === 1 ? models[0] : models;
  inspectFile(source);
  chat.loadFile(source, projector);
}

function onFileChosen() {
  openFiles(ui.fileInput.files);
  ui.fileInput.value = ''; // Choosing the same file again should open it again.
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
    openFiles(event.dataTransfer.files);
  });
}

function wireTabs() {
  ui.tabs.chat.addEventListener('click', () => showView('chat'));
  ui.tabs.inspect.addEventListener('click', () => showView('inspect'));
  for (const tab of Object.values(ui.tabs)) {
    tab.addEventListener('keydown', (event) => {
      if (event.key !== 'ArrowLeft' && event.key !== 'ArrowRight') return;
      const next = tab === ui.tabs.chat ? 'inspect' : 'chat';
      showView(next);
      ui.tabs[next].focus();
    });
  }
  showView(location.hash === '#inspect' ? 'inspect' : 'chat');
}

/** The service worker keeps the app shell for offline visits (not on file:// or plain http). */
function registerServiceWorker() {
  if (!('serviceWorker' in navigator) || !window.isSecureContext) return;
  navigator.serviceWorker
    .register('./sw.js')
    .catch((error) => console.warn('no offline support:', error.message));
}

function main() {
  wireTabs();
  ui.openButton.addEventListener('click', openPicker);
  ui.welcomeButton.addEventListener('click', openPicker);
  ui.fileInput.addEventListener('change', onFileChosen);
  wireDragAndDrop();
  showEngineInfo();
  chat.restore().catch((error) => console.error(error));
  registerServiceWorker();
}

main();
