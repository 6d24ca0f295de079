// @ts-check
// The chat's model panel: loading a model (file, URL, or one kept in this browser) with a
// progress bar, the model's details, keeping it in the browser (OPFS), the list of kept
// models, the demo model offer and unloading.

import { el, replaceChildren } from './dom.js';
import { formatBytes, formatDuration, splitModelName } from './format.js';
import { Inferno } from '../lib/inferno.js';
import { DEMO_MODEL_URL } from '../lib/defaults.js';

const PHASES = {
  downloading: 'Downloading',
  projector: 'Reading the vision projector',
  reading: 'Reading',
  validating: 'Validating',
  device: 'Placing on the device',
  ready: 'Ready',
  storing: 'Keeping in this browser',
};

/** ", R1 to R2 rows a picture" where the projector keeps a picture's aspect (the limits in
 *  force), else nothing. */
function pictureRows(vision) {
  const rows = vision.image_tokens;
  if (!Array.isArray(rows)) return '';
  const [least, most] = rows.map((n) => Number(n).toLocaleString('en-US'));
  return `, ${least} to ${most} rows a picture`;
}

/**
 * engine: an Inferno engine. ui: the panel's elements. hooks:
 *   beforeLoad()            awaited before a load starts (stops a running answer)
 *   threads()               the thread count to load with (null: the engine's default)
 *   device()                where to run: 'auto', 'gpu' or 'cpu'
 *   precision()             attention's precision: 'fast' or 'exact'
 *   cacheTypes()            the KV cache's key and value types: ['f16' | 'q8_0' | 'f32', ...]
 *   imageTokens()           the limits on a picture's rows ({image_min_tokens?, image_max_tokens?};
 *                           throws a bad_setting error on a field that is no whole number)
 *   onModel(model)          a model was loaded (or null: none is)
 *   showError(title, error), hideError()
 */
export function createModelPanel(engine, ui, hooks) {
  const stored = Inferno.storedModels;
  let loadTicket = 0;
  let loadSource = null; // the File or URL the model came from, for "keep in browser"
  let projectorSource = null; // the File of the vision projector attached, for the same
  /** Redo the load running now, and the one that gave the model loaded (reload() runs them). */
  let loading = null;
  let loadedBy = null;
  /** The model's own load, without a projector attached after it. */
  let modelLoadedBy = null;
  let model = null;

  /** The phase, bytes so far and their rate; a resumed download says from where it went on. */
  function showProgress(phase, bytes, total, { rate = 0, resumedFrom = 0 } = {}) {
    ui.progress.hidden = false;
    ui.progress.dataset.phase = phase;
    ui.progressPhase.textContent = PHASES[phase] ?? phase;
    const amount = total
      ? `${formatBytes(bytes)} of ${formatBytes(total)} · ${Math.floor((100 * bytes) / total)}%`
      : formatBytes(bytes);
    const speed = rate > 0 && bytes < total ? ` · ${formatBytes(rate)}/s` : '';
    const resumed = resumedFrom > 0 ? ` · resumed at ${formatBytes(resumedFrom)}` : '';
    ui.progressBytes.textContent = amount + speed + resumed;
    ui.progressBar.value = total ? bytes / total : 0;
  }

  function hideProgress() {
    ui.progress.hidden = true;
  }

  /** Loads `source` (a File, a URL, or {opfs: name}) with the vision projector `mmproj` if
   *  one is given; `keepable` is what "keep" copies from. */
  async function load(source, { name, keepable, size = 0, mmproj = null }) {
    const ticket = ++loadTicket;
    const again = () => load(source, { name, keepable, size, mmproj });
    loading = again;
    await hooks.beforeLoad();
    hooks.hideError();
    setModel(null);
    showProgress('reading', 0, size);
    try {
      const limits = mmproj ? hooks.imageTokens() : {};
      const loaded = await engine.load(source, {
        threads: hooks.threads(),
        device: hooks.device(),
        precision: hooks.precision(),
        cache_type_k: hooks.cacheTypes()[0],
        cache_type_v: hooks.cacheTypes()[1],
        ...(mmproj ? { mmproj, ...limits } : {}),
        onProgress: ({ phase, loaded: bytes, total, rate, resumedFrom }) => {
          if (ticket === loadTicket) showProgress(phase, bytes, total, { rate, resumedFrom });
        },
      });
      if (ticket !== loadTicket) return null;
      loadSource = keepable;
      projectorSource = mmproj instanceof Blob ? mmproj : null;
      loadedBy = again;
      // Without the projector it was given: attachProjector adds the one attached last.
      modelLoadedBy = mmproj ? () => load(source, { name, keepable, size }) : again;
      setModel(loaded, loaded.load_ms);
      return loaded;
    } catch (error) {
      if (ticket === loadTicket) {
        // A load that fails before reading the new file keeps the model loaded before it.
        const kept = engine.model;
        setModel(kept);
        hooks.showError(`Could not load ${name}${kept ? `; ${kept.name} is still loaded` : ''}`, error);
      }
      return null;
    } finally {
      if (ticket === loadTicket) {
        loading = null;
        hideProgress();
        document.body.dataset.loads = String(Number(document.body.dataset.loads ?? 0) + 1);
      }
    }
  }

  /** A File, or a split model's shards (an array of Files, in any order), with the File of
   *  its vision projector if one is given. */
  function loadFile(file, mmproj = null) {
    if (Array.isArray(file)) {
      const name = splitModelName(file[0].name);
      const size = file.reduce((sum, f) => sum + f.size, 0);
      return load(file.length === 1 ? file[0] : file, { name, keepable: file, size, mmproj });
    }
    return load(file, { name: file.name, keepable: file, size: file.size, mmproj });
  }

  /** A vision projector beside the loaded model; a reload (settings) loads it again with it. */
  async function attachProjector(file) {
    if (!model) return null;
    await hooks.beforeLoad();
    hooks.hideError();
    showProgress('projector', 0, file.size);
    try {
      await engine.attachProjector(file, hooks.imageTokens());
      projectorSource = file;
      const reload = modelLoadedBy;
      // The model's own load, now with the projector: what a settings change runs again.
      if (reload) loadedBy = () => reloadWith(reload, file);
      setModel(engine.model);
      updateKeepButton();
      return engine.model;
    } catch (error) {
      hooks.showError(`Could not attach ${file.name ?? 'the vision projector'} to ${model.name}`, error);
      return null;
    } finally {
      hideProgress();
      document.body.dataset.projectors = String(Number(document.body.dataset.projectors ?? 0) + 1);
    }
  }

  /** The limits on a picture's rows changed: a load running now runs again with them; else
   *  the projector attached is attached again under them (a refusal keeps the projector and
   *  the limits in force before, and shows why). Every projector the page attaches is a
   *  file or blob it keeps; one it does not have takes the limits at its next load. */
  async function applyImageTokens() {
    if (loading) return reload();
    // The engine attaches one projector at a time (a second request while one runs is refused
    // as busy): a change while an attach runs is applied once it is done, with the limits in
    // force then (two settings changed in quick succession make at most one more attach).
    if (applyingImageTokens) {
      imageTokensChanged = true;
      return applyingImageTokens;
    }
    applyingImageTokens = (async () => {
      do {
        imageTokensChanged = false;
        if (model?.vision && projectorSource) await attachProjector(projectorSource);
      } while (imageTokensChanged);
    })();
    try {
      await applyingImageTokens;
    } finally {
      applyingImageTokens = null;
    }
  }
  /** The attach that applyImageTokens runs, and whether the limits changed again meanwhile. */
  let applyingImageTokens = null;
  let imageTokensChanged = false;

  /** Runs `reload` (a load()) and then attaches `file` to what it loaded. */
  async function reloadWith(reload, file) {
    const loaded = await reload();
    if (loaded) await attachProjector(file);
  }

  function loadUrl(url) {
    return load(url, { name: url.split('/').pop(), keepable: url });
  }

  /** Opens a model kept in this browser: the engine reads it from disk in slices. */
  async function openStored(name) {
    const mmproj = await stored.projector(name).catch(() => null);
    return load({ opfs: name }, { name, keepable: null, mmproj });
  }

  /** Loads the current model again (the thread count or device changed), keeping the
   *  conversation. */
  async function reload() {
    // A setting changed while a load runs: that load again, with the new setting (it
    // supersedes the running one); else the model loaded.
    const again = loading ?? (model ? loadedBy : null);
    if (again) await again();
  }

  function setModel(next, ms) {
    model = next;
    document.body.dataset.model = next ? next.name : '';
    ui.modelBar.hidden = !next;
    if (next) {
      ui.modelName.textContent = next.name;
      const template =
        next.template?.kind === 'builtin'
          ? `built-in ${next.template.name} template`
          : 'template from the file';
      ui.modelDetails.textContent = [
        next.architecture,
        formatBytes(next.size),
        `${next.vocab_size.toLocaleString('en-US')} tokens`,
        `trained context ${next.context_length.toLocaleString('en-US')}`,
        template,
        next.vision ? `sees pictures (${next.vision.projector} projector${pictureRows(next.vision)})` : null,
        next.memory64 ? '64-bit memory' : null,
        ms !== undefined ? `loaded in ${formatDuration(ms)}` : null,
      ]
        .filter(Boolean)
        .join(' · ');
      showDevice(next.device, next.threads, next.precision, [next.cache_type_k, next.cache_type_v]);
      updateKeepButton();
    }
    hooks.onModel(next);
  }

  /** "GPU · adapter" or "CPU · 2 threads" (with "exact attention" and the cache's types where
   *  they are not the defaults), and why not the GPU where it is not. */
  function showDevice(device, threads, precision, [keys = 'f16', values = 'f16'] = []) {
    const exact = precision === 'exact' ? ' · exact attention' : '';
    const cache = keys === 'f16' && values === 'f16' ? '' : ` · KV cache ${keys}/${values}`;
    const onCpu = `CPU · ${threads} ${threads === 1 ? 'thread' : 'threads'}${exact}${cache}`;
    ui.modelDevice.dataset.precision = precision ?? 'fast';
    ui.modelDevice.dataset.cacheTypes = `${keys}/${values}`;
    ui.modelDevice.textContent = device?.type === 'gpu' ? `GPU · ${device.name}` : onCpu;
    ui.modelDevice.dataset.device = device?.type ?? 'cpu';
    const onGpu = device?.type === 'gpu';
    ui.modelDevice.title = device?.reason
      ? `${onGpu ? 'On the GPU' : 'Not on the GPU'}: ${device.reason}`
      : '';
    if (device?.reason && !onGpu) ui.modelDevice.textContent += ` (not on the GPU: ${device.reason})`;
  }

  async function unload() {
    await hooks.beforeLoad();
    await engine.unload().catch(() => {});
    setModel(null);
  }

  /** The engine lost its model (a crash): show none. */
  function forget() {
    setModel(null);
  }

  async function updateKeepButton() {
    // A split model's shards are not kept in the browser (yet): OPFS holds one file per model.
    if (!model || !stored.available() || Array.isArray(loadSource)) {
      ui.keepModel.hidden = true;
      return;
    }
    ui.keepModel.hidden = false;
    const modelKept = model.source === 'opfs' || (await stored.has(model.name, model.size));
    const projectorKept =
      !projectorSource ||
      (await stored.projector(model.name).catch(() => null))?.size === projectorSource.size;
    const kept = modelKept && projectorKept;
    ui.keepModel.textContent = kept ? 'Kept in browser ✓' : 'Keep in browser';
    ui.keepModel.disabled = kept;
    ui.keepModel.dataset.stored = String(kept);
  }

  async function keep() {
    if (!model || (!loadSource && !projectorSource)) return;
    const { name } = model;
    ui.keepModel.disabled = true;
    try {
      if (loadSource && !(model.source === 'opfs' || (await stored.has(name, model.size))))
        await stored.keep(name, loadSource, (bytes, total) => showProgress('storing', bytes, total));
      // The projector goes beside it, and opens with it.
      if (projectorSource)
        await stored.keepProjector(name, projectorSource, (bytes, total) =>
          showProgress('storing', bytes, total),
        );
    } catch (error) {
      hooks.showError(`Could not keep ${name} in this browser`, {
        kind: 'storage',
        message: error.message || String(error),
      });
    } finally {
      hideProgress();
      await updateKeepButton();
      await renderStored();
    }
  }

  async function renderStored() {
    let models = [];
    try {
      models = await stored.list();
    } catch (error) {
      console.warn('could not list stored models', error);
    }
    ui.stored.hidden = models.length === 0;
    replaceChildren(
      ui.storedList,
      models.map((kept) =>
        el(
          'li',
          { dataset: { name: kept.name } },
          el('span', { className: 'stored-name' }, kept.name),
          el(
            'span',
            { className: 'muted small' },
            formatBytes(kept.size) +
              (kept.projector ? ` + vision projector ${formatBytes(kept.projector)}` : ''),
          ),
          el(
            'button',
            { type: 'button', className: 'button subtle', onclick: () => openStored(kept.name) },
            'Open',
          ),
          el(
            'button',
            { type: 'button', className: 'button subtle danger', onclick: () => removeStored(kept.name) },
            'Delete',
          ),
        ),
      ),
    );
    const estimate = await stored.estimate();
    ui.storageEstimate.textContent = estimate
      ? `This site uses ${formatBytes(estimate.usage)} of ${formatBytes(estimate.quota)} the browser allows it.`
      : '';
  }

  async function removeStored(name) {
    try {
      await stored.remove(name);
    } catch (error) {
      hooks.showError(`Could not delete ${name}`, { kind: 'storage', message: error.message });
    }
    await renderStored();
    await updateKeepButton();
  }

  async function offerDemoModel() {
    try {
      const response = await fetch(DEMO_MODEL_URL, { method: 'HEAD' });
      const size = Number(response.headers.get('Content-Length'));
      if (!response.ok || !(size > 0)) return;
      ui.demoSize.textContent = `${formatBytes(size)}, served by this page's own server`;
      ui.demoOffer.hidden = false;
    } catch {
      // No demo model here (offline, or served without one): the drop zone is enough.
    }
  }

  ui.keepModel.addEventListener('click', () => keep());
  ui.unloadModel.addEventListener('click', () => unload());
  ui.demoButton.addEventListener('click', () => loadUrl(DEMO_MODEL_URL));

  return {
    loadFile,
    loadUrl,
    attachProjector,
    applyImageTokens,
    openStored,
    reload,
    forget,
    renderStored,
    offerDemoModel,
    isStored: (name, size) => stored.has(name, size),
    get model() {
      return model;
    },
  };
}
