// The chat view: loading a model into the worker (file, URL or OPFS) with a progress bar,
// the conversation with streamed answers, stop / new chat / system prompt / sampling
// settings, per-answer speed, and the visualizer of how each token was chosen. The
// conversation and settings survive a reload (localStorage); a model kept in the browser
// (OPFS) reopens by itself.

import { el, errorBanner, replaceChildren } from './dom.js';
import { formatBytes, formatDuration } from './format.js';
import { createVisualizer } from './visualizer.js';
import { defaultThreads, hardwareThreads, threadsSupported } from './engine-loader.js';
import * as storage from './storage.js';

const DEMO_MODEL_URL = 'models/SmolLM2-135M-Instruct.Q4_1.gguf';
const TRACE_TOP = 20;
const DEFAULT_MAX_TOKENS = 512;
const DEFAULT_CONTEXT = 4096;

const $ = (id) => document.getElementById(id);

const ui = {
  modelBar: $('model-bar'),
  modelName: $('model-name'),
  modelDetails: $('model-details'),
  keepModel: $('keep-model'),
  unloadModel: $('unload-model'),
  progress: $('load-progress'),
  progressPhase: $('load-phase'),
  progressBytes: $('load-bytes'),
  progressBar: $('load-bar'),
  welcome: $('chat-welcome'),
  dropButton: $('chat-drop'),
  demoOffer: $('demo-offer'),
  demoButton: $('demo-model'),
  demoSize: $('demo-size'),
  stored: $('stored-models'),
  storedList: $('stored-list'),
  storageEstimate: $('storage-estimate'),
  messages: $('messages'),
  composer: $('composer'),
  prompt: $('prompt'),
  send: $('send'),
  stop: $('stop'),
  newChat: $('new-chat'),
  regenerate: $('regenerate'),
  thinkingLabel: $('thinking-toggle-label'),
  thinking: $('thinking-toggle'),
  stats: $('chat-stats'),
  systemPrompt: $('system-prompt'),
  settingsDefaults: $('settings-defaults'),
  settings: {
    temperature: $('set-temperature'),
    top_k: $('set-top-k'),
    top_p: $('set-top-p'),
    min_p: $('set-min-p'),
    repeat_penalty: $('set-repeat-penalty'),
    max_tokens: $('set-max-tokens'),
    seed: $('set-seed'),
    context: $('set-context'),
    threads: $('set-threads'),
  },
  threadsNote: $('threads-note'),
};

const LLAMA_CPP_DEFAULTS = { temperature: 0.8, top_k: 40, top_p: 0.95, min_p: 0.05, repeat_penalty: 1 };

/**
 * createChat(engine, {onModelLoaded, pickFile}): engine is the EngineClient of worker.js.
 * Returns {loadFile, loadUrl, restore}.
 */
export function createChat(engine, { onModelLoaded, onModelUnloaded, pickFile }) {
  const state = {
    model: null, // the worker's describeModel()
    loadTicket: 0,
    loadSource: null, // the File or URL the model came from, for "keep in browser"
    messages: [], // {role, content, stats?, error?, steps? (last answer only, not saved)}
    generating: null, // {assistant, requestDone}
    defaults: { ...LLAMA_CPP_DEFAULTS },
  };

  const visualizer = createVisualizer(
    {
      root: $('visualizer'),
      empty: $('viz-empty'),
      body: $('viz-body'),
      facts: $('viz-facts'),
      bars: $('viz-bars'),
      strip: $('viz-strip'),
      label: $('viz-step-label'),
    },
    { onBranch: (step, token) => branchFrom(step, token) },
  );

  // --- errors and progress -------------------------------------------------------------

  const banner = errorBanner('chat-error');
  const hideError = banner.hide;

  function showError(title, error) {
    banner.show(title, error);
    if (!error?.kind) console.error(error); // Not a file problem: a bug worth seeing.
  }

  const PHASES = { reading: 'Reading', validating: 'Validating', ready: 'Ready', storing: 'Keeping in this browser' };

  function showProgress(phase, bytes, total) {
    ui.progress.hidden = false;
    ui.progress.dataset.phase = phase;
    ui.progressPhase.textContent = PHASES[phase] ?? phase;
    ui.progressBytes.textContent = total ? `${formatBytes(bytes)} of ${formatBytes(total)} · ${Math.floor((100 * bytes) / total)}%` : formatBytes(bytes);
    ui.progressBar.value = total ? bytes / total : 0;
  }

  function hideProgress() {
    ui.progress.hidden = true;
  }

  // --- loading --------------------------------------------------------------------------

  async function load(fields, { name, source }) {
    const ticket = ++state.loadTicket;
    if (state.generating) await stopGenerating();
    hideError();
    setModel(null);
    showProgress('reading', 0, fields.file?.size ?? 0);
    try {
      engine.useThreads(selectedThreads());
      const reply = await engine.request('load', fields, (event) => {
        if (ticket === state.loadTicket && event.type === 'progress') showProgress(event.phase, event.bytes, event.total);
      });
      if (ticket !== state.loadTicket) return null;
      state.loadSource = source;
      setModel(reply.model, reply.ms);
      return reply.model;
    } catch (error) {
      if (ticket === state.loadTicket) {
        setModel(null);
        showError(`Could not load ${name}`, error);
      }
      return null;
    } finally {
      if (ticket === state.loadTicket) {
        hideProgress();
        document.body.dataset.loads = String(Number(document.body.dataset.loads ?? 0) + 1);
      }
    }
  }

  function loadFile(file, source = file) {
    return load({ file }, { name: file.name, source });
  }

  function loadUrl(url) {
    return load({ url }, { name: url.split('/').pop(), source: url });
  }

  function setModel(model, ms) {
    const sameModel = model && state.model === null && savedModelMatches(model);
    state.model = model;
    document.body.dataset.model = model ? model.name : '';
    ui.modelBar.hidden = !model;
    ui.composer.hidden = !model;
    ui.welcome.hidden = Boolean(model);
    if (!model) {
      updateButtons();
      return;
    }
    ui.modelName.textContent = model.name;
    const template = model.template?.kind === 'builtin' ? `built-in ${model.template.name} template` : 'template from the file';
    ui.modelDetails.textContent = [
      model.architecture,
      formatBytes(model.size),
      `${model.vocab_size.toLocaleString('en-US')} tokens`,
      `trained context ${model.context_length.toLocaleString('en-US')}`,
      template,
      `${model.threads} ${model.threads === 1 ? 'thread' : 'threads'}`,
      model.memory64 ? '64-bit memory' : null,
      ms !== undefined ? `loaded in ${formatDuration(ms)}` : null,
    ]
      .filter(Boolean)
      .join(' · ');
    state.defaults = { ...LLAMA_CPP_DEFAULTS, ...pickSampling(model.recommended_sampling) };
    ui.thinkingLabel.hidden = model.architecture !== 'qwen3';
    if (!sameModel) applySettings(state.defaults, { maxTokens: DEFAULT_MAX_TOKENS, context: Math.min(DEFAULT_CONTEXT, model.context_length) });
    updateKeepButton();
    updateButtons();
    save();
    onModelLoaded?.(model);
    ui.prompt.focus();
  }

  function pickSampling(recommended) {
    if (!recommended) return {};
    const { temperature, top_k, top_p, min_p, repeat_penalty } = recommended;
    return { temperature, top_k, top_p, min_p, repeat_penalty };
  }

  async function unload() {
    if (state.generating) await stopGenerating();
    await engine.request('unload').catch(() => {});
    setModel(null);
    onModelUnloaded?.();
  }

  // --- keeping models in the browser (OPFS) ------------------------------------------------

  async function updateKeepButton() {
    const model = state.model;
    if (!model || !storage.opfsAvailable()) {
      ui.keepModel.hidden = true;
      return;
    }
    ui.keepModel.hidden = false;
    const stored = model.source === 'opfs' || (await storage.isStored(model.name, model.size));
    ui.keepModel.textContent = stored ? 'Kept in browser ✓' : 'Keep in browser';
    ui.keepModel.disabled = stored;
    ui.keepModel.dataset.stored = String(stored);
  }

  async function keepModel() {
    const model = state.model;
    if (!model || !state.loadSource) return;
    ui.keepModel.disabled = true;
    try {
      await storage.storeModel(model.name, state.loadSource, (bytes, total) => showProgress('storing', bytes, total));
    } catch (error) {
      showError(`Could not keep ${model.name} in this browser`, { kind: 'storage', message: error.message || String(error) });
    } finally {
      hideProgress();
      await updateKeepButton();
      await renderStoredModels();
      save();
    }
  }

  async function renderStoredModels() {
    let models = [];
    try {
      models = await storage.listStoredModels();
    } catch (error) {
      console.warn('could not list stored models', error);
    }
    ui.stored.hidden = models.length === 0;
    replaceChildren(
      ui.storedList,
      models.map((stored) =>
        el(
          'li',
          { dataset: { name: stored.name } },
          el('span', { className: 'stored-name' }, stored.name),
          el('span', { className: 'muted small' }, formatBytes(stored.size)),
          el('button', { type: 'button', className: 'button subtle', onclick: () => openStored(stored.name) }, 'Open'),
          el('button', { type: 'button', className: 'button subtle danger', onclick: () => deleteStored(stored.name) }, 'Delete'),
        ),
      ),
    );
    const estimate = await storage.storageEstimate();
    ui.storageEstimate.textContent = estimate
      ? `This site uses ${formatBytes(estimate.usage)} of ${formatBytes(estimate.quota)} the browser allows it.`
      : '';
  }

  async function openStored(name) {
    let file;
    try {
      file = await storage.openStoredModel(name);
    } catch (error) {
      showError(`Could not open ${name} from this browser's storage`, { kind: 'storage', message: error.message });
      return null;
    }
    // A File backed by OPFS: the worker reads it from disk in slices.
    const named = file.name === name ? file : new File([file], name);
    const model = await load({ file: named, source: 'opfs' }, { name, source: named });
    if (model) onFileOpened?.(named);
    return model;
  }

  let onFileOpened = null;

  async function deleteStored(name) {
    try {
      await storage.deleteStoredModel(name);
    } catch (error) {
      showError(`Could not delete ${name}`, { kind: 'storage', message: error.message });
    }
    await renderStoredModels();
    await updateKeepButton();
  }

  // --- settings -----------------------------------------------------------------------------

  /** The Threads choices: "auto" (the worker's default) and 1..cores; one thread only where the
   *  page cannot share memory with workers. */
  function setUpThreads() {
    const select = ui.settings.threads;
    const supported = threadsSupported();
    const cores = hardwareThreads();
    const options = [el('option', { value: '' }, `Auto (${defaultThreads()})`)];
    if (supported) for (let n = 1; n <= Math.min(cores, 64); n++) options.push(el('option', { value: String(n) }, String(n)));
    replaceChildren(select, options);
    select.disabled = !supported;
    ui.threadsNote.textContent = supported
      ? `Threads: this machine offers ${cores}. Changing it reloads the model into a new engine; the conversation stays.`
      : 'One thread: this page is not cross-origin isolated, so WebAssembly threads are unavailable (serve it with COOP/COEP headers).';
  }

  /** The thread count chosen, or null for the engine's default. */
  function selectedThreads() {
    return Number(ui.settings.threads.value) || null;
  }

  /** Loads the current model again (after the thread count changed), keeping the conversation. */
  async function reloadModel() {
    const source = state.loadSource;
    if (!state.model || !source) return;
    const storedIn = state.model.source;
    if (typeof source === 'string') await loadUrl(source);
    else await load({ file: source, source: storedIn }, { name: state.model.name, source });
  }

  function applySettings(sampling, { maxTokens, context } = {}) {
    for (const key of Object.keys(LLAMA_CPP_DEFAULTS)) {
      if (sampling[key] !== undefined) ui.settings[key].value = String(Number(sampling[key].toFixed?.(4) ?? sampling[key]));
    }
    if (maxTokens !== undefined) ui.settings.max_tokens.value = String(maxTokens);
    if (context !== undefined) ui.settings.context.value = String(context);
  }

  function readNumber(input, { integer = false, min = -Infinity, max = Infinity, name }) {
    const value = Number(input.value);
    if (input.value.trim() === '' || !Number.isFinite(value) || (integer && !Number.isInteger(value)) || value < min || value > max) {
      input.setCustomValidity(`${name} must be ${integer ? 'a whole number' : 'a number'} in ${min}..${max}`);
      input.reportValidity();
      throw Object.assign(new Error(`${name} must be ${integer ? 'a whole number' : 'a number'} between ${min} and ${max}`), { kind: 'bad_setting' });
    }
    input.setCustomValidity('');
    return value;
  }

  function readSettings() {
    const s = ui.settings;
    const sampling = {
      temperature: readNumber(s.temperature, { min: 0, max: 10, name: 'Temperature' }),
      top_k: readNumber(s.top_k, { integer: true, min: 0, max: 1e6, name: 'Top-k' }),
      top_p: readNumber(s.top_p, { min: 0.0001, max: 1, name: 'Top-p' }),
      min_p: readNumber(s.min_p, { min: 0, max: 1, name: 'Min-p' }),
      repeat_penalty: readNumber(s.repeat_penalty, { min: 0.01, max: 10, name: 'Repeat penalty' }),
    };
    const seedText = s.seed.value.trim();
    // An empty seed means a fresh random one per answer, shown with the answer's stats.
    sampling.seed = seedText === '' ? crypto.getRandomValues(new Uint32Array(1))[0] : readNumber(s.seed, { integer: true, min: 0, max: 2 ** 53 - 1, name: 'Seed' });
    const maxTokens = readNumber(s.max_tokens, { integer: true, min: 1, max: 1 << 20, name: 'Max tokens' });
    const context = readNumber(s.context, { integer: true, min: 16, max: state.model?.context_length ?? 1 << 20, name: 'Context' });
    return { sampling, maxTokens, context };
  }

  // --- the conversation ----------------------------------------------------------------------

  function apiMessages() {
    return state.messages.filter((m) => !m.error && m.content !== undefined).map(({ role, content }) => ({ role, content }));
  }

  /** Splits "<think>…</think>answer" into its parts; `open` while the thinking is unfinished. */
  function splitThinking(content) {
    const match = /^\s*<think>([\s\S]*?)(<\/think>|$)([\s\S]*)$/.exec(content);
    if (!match) return { thinking: null, answer: content, open: false };
    return { thinking: match[1].trim(), answer: match[3].replace(/^\s+/, ''), open: match[2] === '' };
  }

  function renderMessageBody(message, node) {
    const body = node.querySelector('.bubble-body');
    const { thinking, answer, open } = message.role === 'assistant' ? splitThinking(message.content) : { thinking: null, answer: message.content };
    const parts = [];
    if (thinking !== null) {
      const details = node.querySelector('details.think') ?? el('details', { className: 'think' }, el('summary'), el('div', { className: 'think-body' }));
      details.querySelector('summary').textContent = open ? 'Thinking…' : `Thought for ${thinking.split(/\s+/).filter(Boolean).length} words`;
      details.querySelector('.think-body').textContent = thinking;
      parts.push(details);
    }
    parts.push(el('div', { className: 'answer-text' }, answer));
    replaceChildren(body, parts);
    const meta = node.querySelector('.bubble-meta');
    meta.textContent = message.error ? `${message.error.kind}: ${message.error.message}` : describeStats(message.stats);
    node.classList.toggle('failed', Boolean(message.error));
  }

  function messageNode(message) {
    const copy =
      message.role === 'assistant'
        ? el('button', { type: 'button', className: 'bubble-copy', title: 'Copy the answer (without the thinking)', onclick: (event) => copyAnswer(message, event.currentTarget) }, 'Copy')
        : null;
    const node = el(
      'li',
      { className: `message ${message.role}`, dataset: { role: message.role } },
      el('div', { className: 'bubble' }, el('div', { className: 'bubble-body' }), el('div', { className: 'bubble-meta muted small' }), copy),
    );
    renderMessageBody(message, node);
    return node;
  }

  async function copyAnswer(message, button) {
    try {
      await navigator.clipboard.writeText(splitThinking(message.content).answer.trim());
      button.textContent = 'Copied';
    } catch {
      button.textContent = 'Copy failed'; // No clipboard permission (e.g. an insecure origin).
    }
    setTimeout(() => (button.textContent = 'Copy'), 1500);
  }

  function renderMessages() {
    replaceChildren(ui.messages, state.messages.map(messageNode));
    scrollToEnd();
  }

  function lastNode() {
    return ui.messages.lastElementChild;
  }

  function scrollToEnd() {
    const last = lastNode();
    last?.scrollIntoView({ block: 'end' });
  }

  function describeStats(stats) {
    if (!stats) return '';
    const parts = [];
    if (stats.prefilling) {
      const { evaluated, total } = stats.prefilling;
      parts.push(`reading the prompt: ${evaluated.toLocaleString('en')} of ${total.toLocaleString('en')} tokens`);
    }
    if (stats.evaluated !== undefined) {
      parts.push(`prefill ${stats.evaluated} tok${stats.reused ? ` (+${stats.reused} reused)` : ''}${stats.prefillTokS ? ` at ${stats.prefillTokS.toFixed(1)} tok/s` : ''}`);
    }
    if (stats.ttftMs !== undefined) parts.push(`first token ${formatDuration(stats.ttftMs)}`);
    if (stats.generated !== undefined) parts.push(`${stats.generated} tokens${stats.decodeTokS ? ` at ${stats.decodeTokS.toFixed(1)} tok/s` : ''}`);
    if (stats.contextUsed !== undefined && stats.contextSize) parts.push(`context ${stats.contextUsed} / ${stats.contextSize}`);
    if (stats.seed !== undefined) parts.push(`seed ${stats.seed}`);
    if (stats.threads !== undefined) parts.push(`${stats.threads} ${stats.threads === 1 ? 'thread' : 'threads'}`);
    if (stats.branchedAt !== undefined) parts.push(`regenerated from token ${stats.branchedAt + 1}`);
    const reasons = { stopped: 'stopped', max_tokens: 'hit max tokens', context_full: 'context full' };
    if (reasons[stats.reason]) parts.push(reasons[stats.reason]);
    return parts.join(' · ');
  }

  function updateButtons() {
    const generating = Boolean(state.generating);
    ui.send.hidden = generating;
    ui.stop.hidden = !generating;
    ui.send.disabled = !state.model;
    ui.newChat.disabled = generating;
    ui.regenerate.hidden = generating || state.messages.at(-1)?.role !== 'assistant';
    document.body.dataset.generating = String(generating);
    visualizer.setBranching(!generating && Boolean(state.model));
  }

  function showLiveStats(stats) {
    ui.stats.textContent = describeStats(stats);
  }

  /** Between answers the composer shows how full the context is. */
  function showContextUse(stats) {
    const parts = [];
    if (stats?.contextUsed !== undefined && stats.contextSize) parts.push(`context ${stats.contextUsed} / ${stats.contextSize} tokens`);
    if (stats?.memoryBytes) {
      parts.push(`engine memory ${formatBytes(stats.memoryBytes)}`);
      document.body.dataset.engineMemory = String(stats.memoryBytes);
    }
    ui.stats.textContent = parts.join(' · ');
  }

  /**
   * Runs one request that streams tokens into the last (assistant) message, and settles its
   * stats. `request` is 'chat' or 'branch'.
   */
  /** Failures that take the model with them, and how the page names them. */
  const ENGINE_LOST = {
    wasm_trap: 'The engine crashed while generating',
    stalled: 'The engine stopped responding',
    worker_failed: 'The engine worker failed',
  };

  async function streamAnswer(type, fields, assistant, baseStats = {}) {
    const node = lastNode();
    const live = { ...baseStats, threads: state.model?.threads };
    let done;
    state.generating = { assistant, requestDone: null };
    updateButtons();
    const requestDone = engine.request(type, fields, (event) => {
      if (event.type === 'prefill') {
        live.prefilling = { evaluated: event.evaluated, total: event.total };
        showLiveStats(live);
      } else if (event.type === 'prepared') {
        delete live.prefilling;
        Object.assign(live, {
          evaluated: event.prepared.evaluated,
          reused: event.prepared.reused,
          contextSize: event.prepared.context_size,
          contextUsed: event.prepared.context_used,
          prefillTokS: event.prepared.evaluated > 0 ? (1000 * event.prepared.evaluated) / event.ms : undefined,
        });
        document.body.dataset.lastPrefill = String(event.prepared.evaluated);
        document.body.dataset.lastReused = String(event.prepared.reused);
      } else if (event.type === 'token') {
        const { step } = event;
        assistant.steps[step.index] = step;
        assistant.steps.length = step.index + 1;
        assistant.content = assistant.steps.map((s) => s.text).join('');
        live.generated = assistant.steps.length;
        live.contextUsed = (live.contextUsed ?? 0) + 1;
        visualizer.add(step);
        renderMessageBody(assistant, node);
        showLiveStats(live);
        if (assistant.steps.length % 8 === 1) scrollToEnd();
      }
    });
    state.generating.requestDone = requestDone;
    try {
      done = await requestDone;
      assistant.stats = { ...live, ...done.stats, reason: done.reason, seed: baseStats.seed };
      document.body.dataset.lastReason = done.reason;
    } catch (error) {
      assistant.error = { kind: error.kind ?? 'internal', message: error.message };
      const lost = ENGINE_LOST[error.kind];
      if (lost) {
        // The worker (and the model in it) is gone; a new one is already starting.
        setModel(null);
        showError(lost, error);
      }
    } finally {
      state.generating = null;
      renderMessageBody(assistant, node);
      showContextUse(assistant.stats);
      updateButtons();
      save();
      document.body.dataset.answers = String(Number(document.body.dataset.answers ?? 0) + 1);
      scrollToEnd();
    }
    return done;
  }

  async function send() {
    const text = ui.prompt.value.trim();
    if (!text || !state.model || state.generating) return;
    await answer({ role: 'user', content: text });
  }

  /** Answers the conversation again: the last answer is replaced (a new random seed unless one is set). */
  async function regenerate() {
    if (!state.model || state.generating || state.messages.at(-1)?.role !== 'assistant') return;
    state.messages.pop();
    await answer(null);
  }

  /**
   * Appends `userMessage` (if any) and streams a new answer to the conversation. Returns
   * false when the settings are invalid (nothing changes then).
   */
  async function answer(userMessage) {
    let settings;
    try {
      settings = readSettings();
    } catch (error) {
      showError('Check the settings', error);
      return false;
    }
    hideError();
    if (userMessage) {
      ui.prompt.value = '';
      state.messages.push(userMessage);
    }
    for (const message of state.messages) delete message.steps; // Only the newest answer can branch.
    const assistant = { role: 'assistant', content: '', steps: [] };
    state.messages.push(assistant);
    renderMessages();
    visualizer.reset(settings.sampling);
    await engine.request('system', { prompt: ui.systemPrompt.value });
    const messages = apiMessages().slice(0, -1); // Everything but the empty answer.
    await streamAnswer(
      'chat',
      {
        messages,
        settings: settings.sampling,
        enableThinking: ui.thinkingLabel.hidden ? undefined : ui.thinking.checked,
        maxTokens: settings.maxTokens,
        traceTop: TRACE_TOP,
        context: settings.context,
      },
      assistant,
      { seed: settings.sampling.seed },
    );
    return true;
  }

  /** Regenerates the last answer from `stepIndex`, with `token` forced there. */
  async function branchFrom(stepIndex, token) {
    const assistant = state.messages.at(-1);
    if (!assistant?.steps || state.generating || !state.model || stepIndex >= assistant.steps.length) return;
    let settings;
    try {
      settings = readSettings();
    } catch (error) {
      showError('Check the settings', error);
      return;
    }
    delete assistant.error;
    assistant.steps.length = stepIndex;
    assistant.content = assistant.steps.map((s) => s.text).join('');
    visualizer.truncate(stepIndex);
    const node = lastNode();
    renderMessageBody(assistant, node);
    const previous = assistant.stats ?? {};
    await streamAnswer(
      'branch',
      { step: stepIndex, token, maxTokens: Math.max(1, settings.maxTokens - stepIndex), traceTop: TRACE_TOP },
      assistant,
      { contextSize: previous.contextSize, contextUsed: (previous.contextUsed ?? 0) - (previous.generated ?? 0) + stepIndex, seed: previous.seed, branchedAt: stepIndex },
    );
  }

  async function stopGenerating() {
    const running = state.generating?.requestDone;
    await engine.request('stop').catch(() => {});
    await running?.catch(() => {});
  }

  async function newChat() {
    if (state.generating) await stopGenerating();
    state.messages = [];
    renderMessages();
    visualizer.reset();
    ui.stats.textContent = '';
    updateButtons();
    await engine.request('reset').catch(() => {});
    save();
    ui.prompt.focus();
  }

  // --- persistence ----------------------------------------------------------------------------

  function savedModelMatches(model) {
    const saved = storage.loadChatState();
    return saved?.model?.name === model.name && saved?.model?.size === model.size;
  }

  function save() {
    const settingsValues = Object.fromEntries(Object.entries(ui.settings).map(([key, input]) => [key, input.value]));
    storage.saveChatState({
      messages: state.messages.map(({ role, content, stats, error }) => ({ role, content, stats, error })),
      system: ui.systemPrompt.value,
      thinking: ui.thinking.checked,
      settings: settingsValues,
      model: state.model ? { name: state.model.name, size: state.model.size } : storage.loadChatState()?.model ?? null,
    });
  }

  /** Restores the saved conversation and settings, and reopens a model kept in OPFS. */
  async function restore() {
    const saved = storage.loadChatState();
    if (saved) {
      state.messages = saved.messages
        .filter((m) => m && (m.role === 'user' || m.role === 'assistant') && typeof m.content === 'string')
        .map(({ role, content, stats, error }) => ({ role, content, stats, error }));
      ui.systemPrompt.value = typeof saved.system === 'string' ? saved.system : '';
      ui.thinking.checked = saved.thinking !== false;
      for (const [key, input] of Object.entries(ui.settings)) {
        if (typeof saved.settings?.[key] === 'string') input.value = saved.settings[key];
      }
      renderMessages();
    } else {
      applySettings(LLAMA_CPP_DEFAULTS, { maxTokens: DEFAULT_MAX_TOKENS, context: DEFAULT_CONTEXT });
    }
    await renderStoredModels();
    offerDemoModel();
    const last = saved?.model;
    if (last && (await storage.isStored(last.name, last.size))) await openStored(last.name);
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

  // --- wiring ---------------------------------------------------------------------------------

  ui.composer.addEventListener('submit', (event) => {
    event.preventDefault();
    send();
  });
  ui.prompt.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    }
  });
  ui.stop.addEventListener('click', () => stopGenerating());
  ui.newChat.addEventListener('click', () => newChat());
  ui.regenerate.addEventListener('click', () => regenerate());
  ui.keepModel.addEventListener('click', () => keepModel());
  ui.unloadModel.addEventListener('click', () => unload());
  ui.dropButton.addEventListener('click', () => pickFile());
  ui.demoButton.addEventListener('click', () => loadUrl(DEMO_MODEL_URL));
  ui.settingsDefaults.addEventListener('click', () => {
    applySettings(state.defaults, { maxTokens: DEFAULT_MAX_TOKENS, context: Math.min(DEFAULT_CONTEXT, state.model?.context_length ?? DEFAULT_CONTEXT) });
    ui.settings.seed.value = '';
    save();
  });
  for (const input of [...Object.values(ui.settings), ui.systemPrompt, ui.thinking]) input.addEventListener('change', save);
  ui.settings.threads.addEventListener('change', () => reloadModel());
  setUpThreads();
  updateButtons();

  return {
    loadFile,
    loadUrl,
    restore,
    set onFileOpened(callback) {
      onFileOpened = callback;
    },
    get model() {
      return state.model;
    },
  };
}
