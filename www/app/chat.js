// @ts-check
// The chat view: the conversation with streamed answers, stop / new chat / regenerate /
// system prompt, per-answer speed, and the visualizer of how each token was chosen, on top of
// the model panel (chat-model.js) and the settings (chat-settings.js). Everything goes
// through the public API (inferno.js). The conversation and settings survive a reload
// (localStorage); a model kept in the browser (OPFS) reopens by itself.

import { el, errorBanner, replaceChildren } from './dom.js';
import { formatBytes, formatDuration } from './format.js';
import { createVisualizer } from './visualizer.js';
import { createModelPanel } from './chat-model.js';
import { createSettings, pickSampling } from './chat-settings.js';
import { DEMO_TOOL, demoToolResult, toolCallNode, toolResultNode } from './chat-tools.js';
import { createPictureTray } from './chat-pictures.js';
import { MessageBuilder } from '../lib/inferno.js';
import { DEFAULT_TRACE_TOP } from '../lib/defaults.js';
import { loadChatState, saveChatState } from '../lib/storage.js';

/** @param {string} id */
const $ = (id) => document.getElementById(id);
/** The form control `id`, of the element type the page has there. @template {HTMLElement} T @param {string} id @param {new () => T} type @returns {T} */
const control = (id, type) => {
  const element = $(id);
  if (!(element instanceof type)) throw new Error(`#${id} is not a ${type.name}`);
  return element;
};

const ui = {
  modelPanel: {
    modelBar: $('model-bar'),
    modelName: $('model-name'),
    modelDetails: $('model-details'),
    modelDevice: $('model-device'),
    keepModel: $('keep-model'),
    unloadModel: $('unload-model'),
    progress: $('load-progress'),
    progressPhase: $('load-phase'),
    progressBytes: $('load-bytes'),
    progressBar: $('load-bar'),
    demoOffer: $('demo-offer'),
    demoButton: $('demo-model'),
    demoSize: $('demo-size'),
    stored: $('stored-models'),
    storedList: $('stored-list'),
    storageEstimate: $('storage-estimate'),
  },
  welcome: $('chat-welcome'),
  dropButton: $('chat-drop'),
  messages: $('messages'),
  composer: $('composer'),
  embeddingOnly: $('embedding-only'),
  prompt: control('prompt', HTMLTextAreaElement),
  pictureTray: $('picture-tray'),
  attachPicture: $('attach-picture'),
  pictureInput: control('picture-input', HTMLInputElement),
  send: control('send', HTMLButtonElement),
  stop: $('stop'),
  newChat: control('new-chat', HTMLButtonElement),
  regenerate: $('regenerate'),
  thinkingLabel: $('thinking-toggle-label'),
  thinking: control('thinking-toggle', HTMLInputElement),
  reasoningEffortLabel: $('reasoning-effort-label'),
  reasoningEffort: control('reasoning-effort', HTMLSelectElement),
  stats: $('chat-stats'),
  systemPrompt: control('system-prompt', HTMLTextAreaElement),
  settingsDefaults: $('settings-defaults'),
  settings: {
    temperature: $('set-temperature'),
    top_k: $('set-top-k'),
    top_p: $('set-top-p'),
    min_p: $('set-min-p'),
    repeat_penalty: $('set-repeat-penalty'),
    repeat_last_n: $('set-repeat-last-n'),
    max_tokens: $('set-max-tokens'),
    seed: $('set-seed'),
    context: $('set-context'),
    threads: $('set-threads'),
    device: control('set-device', HTMLSelectElement),
    precision: control('set-precision', HTMLSelectElement),
    cache_k: control('set-cache-k', HTMLSelectElement),
    cache_v: control('set-cache-v', HTMLSelectElement),
    image_min_tokens: control('set-image-min-tokens', HTMLInputElement),
    image_max_tokens: control('set-image-max-tokens', HTMLInputElement),
    json_schema: $('set-json-schema'),
    tools_demo: control('set-tools-demo', HTMLSelectElement),
  },
  threadsNote: $('threads-note'),
};

/** Rounds of tool calls one question may run before the page stops answering them. */
const MAX_TOOL_ROUNDS = 3;
/** What a saved message keeps. */
const SAVED_FIELDS = [
  'role',
  'content',
  'pictures',
  'reasoning',
  'tool_calls',
  'tool_call_id',
  'name',
  'stats',
  'error',
];

/** Failures that take the model with them, and how the page names them. */
const ENGINE_LOST = {
  wasm_trap: 'The engine crashed while generating',
  stalled: 'The engine stopped responding',
  worker_failed: 'The engine worker failed',
};

/**
 * createChat(engine, {onModelLoaded, pickFile}): engine is an Inferno engine (inferno.js).
 * Returns {loadFile, loadUrl, restore, model}.
 */
export function createChat(engine, { onModelLoaded, pickFile }) {
  const state = {
    // {role, content, reasoning?, tool_calls?, tool_call_id?, name?, stats?, error?, steps?
    // (last answer only, not saved)}
    messages: [],
    generating: null, // {assistant, controller, finished}
    engineSampling: null, // llama.cpp's defaults, from the engine
    defaults: {}, // the sampling defaults for the current model
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

  const banner = errorBanner('chat-error');
  const hideError = banner.hide;

  function showError(title, error) {
    banner.show(title, error);
    if (!error?.kind) console.error(error); // Not a file problem: a bug worth seeing.
  }

  const pictures = createPictureTray(
    { tray: ui.pictureTray, button: ui.attachPicture, input: ui.pictureInput, prompt: ui.prompt },
    {
      canAttach: () => {
        const model = panel.model;
        if (!model) return 'Load a model first: pictures go to a model with a vision projector.';
        if (!model.vision)
          return `${model.name} has no vision projector: drop its mmproj .gguf file onto the page (or load both files together) to give it one.`;
        return null;
      },
      showError,
      changed: () => updateButtons(),
    },
  );

  const settings = createSettings(ui.settings, ui.threadsNote);
  const panel = createModelPanel(engine, ui.modelPanel, {
    beforeLoad: () => (state.generating ? stopGenerating() : Promise.resolve()),
    threads: () => settings.threads(),
    device: () => ui.settings.device.value,
    precision: () => ui.settings.precision.value,
    cacheTypes: () => [ui.settings.cache_k.value, ui.settings.cache_v.value],
    imageTokens: () => settings.imageTokens(),
    onModel: (model) => modelChanged(model),
    showError,
    hideError,
  });

  /** llama.cpp's sampling defaults, as the engine has them. */
  async function engineSampling() {
    state.engineSampling ??= pickSampling((await engine.engineInfo()).defaults?.sampling);
    return state.engineSampling;
  }

  function modelChanged(model) {
    // An encoder (BERT) has no output layer: the page says so instead of offering a chat.
    const embedsOnly = Boolean(model) && model.generates === false;
    ui.composer.hidden = !model || embedsOnly;
    ui.embeddingOnly.hidden = !embedsOnly;
    ui.embeddingOnly.textContent = embedsOnly
      ? `${model.name ?? 'This model'} is an embedding model (${model.architecture}, pooling ${model.pooling}): ` +
        'it turns text into vectors (engine.embeddings.create) and has no output layer to chat with. ' +
        'The Inspect tab shows the file.'
      : '';
    ui.welcome.hidden = Boolean(model);
    if (model) {
      const sameModel = savedModelMatches(model);
      state.defaults = pickSampling(model.recommended_sampling);
      ui.thinkingLabel.hidden = model.architecture !== 'qwen3';
      ui.attachPicture.hidden = !model.vision;
      ui.attachPicture.title = model.vision
        ? `Add a picture (or paste or drop one): ${model.vision.projector} projector, ${model.vision.image_size} px`
        : '';
      ui.reasoningEffortLabel.hidden = !model.reads_reasoning_effort;
      if (!sameModel) settings.applyDefaults(state.defaults, model);
      save();
      onModelLoaded?.(model);
      // Ready to type into, unless the user is typing into another field (a projector attached
      // again after a settings change must not take the keys meant for the settings).
      const active = document.activeElement;
      const typing = active instanceof HTMLInputElement || active instanceof HTMLSelectElement;
      if (!typing) ui.prompt.focus();
    }
    updateButtons();
  }

  // --- the conversation ----------------------------------------------------------------------

  /** The conversation as completion messages: the system prompt, then every finished turn. */
  function apiMessages() {
    const turns = state.messages
      .filter((m) => !m.error && m.content !== undefined)
      .map(({ role, content, pictures: attached, reasoning, tool_calls, tool_call_id, name }) => ({
        role,
        content: attached?.length ? pictures.contentParts(attached, content) : content,
        ...(reasoning ? { reasoning_content: reasoning } : {}),
        ...(tool_calls ? { tool_calls } : {}),
        ...(tool_call_id ? { tool_call_id, name } : {}),
      }));
    const system = ui.systemPrompt.value.trim();
    return system ? [{ role: 'system', content: system }, ...turns] : turns;
  }

  /** Splits "<think>…</think>answer" into its parts; `open` while the thinking is unfinished. */
  function splitThinking(content) {
    const match = /^\s*<think>([\s\S]*?)(<\/think>|$)([\s\S]*)$/.exec(content);
    if (!match) return { thinking: null, answer: content, open: false };
    return { thinking: match[1].trim(), answer: match[3].replace(/^\s+/, ''), open: match[2] === '' };
  }

  /** The thinking and the answer of a message: kept apart by the engine (`reasoning`), or
   *  in a conversation saved before it did, split from the content. */
  function thinkingOf(message) {
    if (message.role !== 'assistant') return { thinking: null, answer: message.content };
    if (message.reasoning === undefined) return splitThinking(message.content);
    const streaming = state.generating?.assistant === message;
    const open = streaming && !message.content && !message.tool_calls;
    return { thinking: message.reasoning, answer: message.content, open };
  }

  function renderMessageBody(message, node) {
    const body = node.querySelector('.bubble-body');
    if (message.role === 'tool') {
      replaceChildren(body, toolResultNode(message));
      return;
    }
    const { thinking, answer, open } = thinkingOf(message);
    const parts = [];
    if (message.pictures?.length) parts.push(pictures.thumbnails(message.pictures));
    if (thinking !== null) {
      const details =
        node.querySelector('details.think') ??
        el('details', { className: 'think' }, el('summary'), el('div', { className: 'think-body' }));
      details.querySelector('summary').textContent = open
        ? 'Thinking…'
        : `Thought for ${thinking.split(/\s+/).filter(Boolean).length} words`;
      details.querySelector('.think-body').textContent = thinking;
      parts.push(details);
    }
    if (answer || !(message.tool_calls || message.pictures?.length))
      parts.push(el('div', { className: 'answer-text' }, answer));
    for (const call of message.tool_calls ?? []) parts.push(toolCallNode(call));
    replaceChildren(body, parts);
    const meta = node.querySelector('.bubble-meta');
    meta.textContent = message.error
      ? `${message.error.kind}: ${message.error.message}`
      : describeStats(message.stats);
    node.classList.toggle('failed', Boolean(message.error));
  }

  function messageNode(message) {
    const copy =
      message.role === 'assistant'
        ? el(
            'button',
            {
              type: 'button',
              className: 'bubble-copy',
              title: 'Copy the answer (without the thinking)',
              onclick: (event) => copyAnswer(message, event.currentTarget),
            },
            'Copy',
          )
        : null;
    const node = el(
      'li',
      { className: `message ${message.role}`, dataset: { role: message.role } },
      el(
        'div',
        { className: 'bubble' },
        el('div', { className: 'bubble-body' }),
        el('div', { className: 'bubble-meta muted small' }),
        copy,
      ),
    );
    renderMessageBody(message, node);
    return node;
  }

  async function copyAnswer(message, button) {
    try {
      await navigator.clipboard.writeText(thinkingOf(message).answer.trim());
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
      const { phase, evaluated, total, part, parts: pieces } = stats.prefilling;
      const within = pieces ? ` (the next: ${part} of its ${pieces} parts)` : '';
      parts.push(
        phase === 'image'
          ? `reading the pictures: ${evaluated} of ${total} encoded${within}`
          : `reading the prompt: ${evaluated.toLocaleString('en')} of ${total.toLocaleString('en')} tokens`,
      );
    }
    if (stats.evaluated !== undefined) {
      parts.push(
        `prefill ${stats.evaluated} tok${stats.reused ? ` (+${stats.reused} reused)` : ''}${stats.prefillTokS ? ` at ${stats.prefillTokS.toFixed(1)} tok/s` : ''}`,
      );
    }
    if (stats.replayed) parts.push(`${stats.replayed} replayed from a checkpoint`);
    if (stats.ttftMs !== undefined) parts.push(`first token ${formatDuration(stats.ttftMs)}`);
    if (stats.generated !== undefined)
      parts.push(
        `${stats.generated} tokens${stats.decodeTokS ? ` at ${stats.decodeTokS.toFixed(1)} tok/s` : ''}`,
      );
    if (stats.contextUsed !== undefined && stats.contextSize)
      parts.push(`context ${stats.contextUsed} / ${stats.contextSize}`);
    if (stats.seed !== undefined) parts.push(`seed ${stats.seed}`);
    if (stats.device) parts.push(`on the ${stats.device}`);
    if (stats.threads !== undefined)
      parts.push(
        `${stats.threads} ${stats.threads === 1 ? 'thread' : 'threads'}${stats.soloSteps ? ` (${stats.soloSteps} steps on one: faster while another program holds a core)` : ''}`,
      );
    if (stats.branchedAt !== undefined) parts.push(`regenerated from token ${stats.branchedAt + 1}`);
    // Keywords of the settings' JSON schema that the grammar engine could not enforce.
    if (stats.warnings?.length) parts.push(`schema not fully enforced (${stats.warnings.join('; ')})`);
    const reasons = { stopped: 'stopped', max_tokens: 'hit max tokens', context_full: 'context full' };
    if (reasons[stats.reason]) parts.push(reasons[stats.reason]);
    return parts.join(' · ');
  }

  function updateButtons() {
    const generating = Boolean(state.generating);
    ui.send.hidden = generating;
    ui.stop.hidden = !generating;
    ui.send.disabled = !panel.model;
    ui.newChat.disabled = generating;
    ui.regenerate.hidden = generating || state.messages.at(-1)?.role !== 'assistant';
    document.body.dataset.generating = String(generating);
    visualizer.setBranching(!generating && Boolean(panel.model));
  }

  function showLiveStats(stats) {
    ui.stats.textContent = describeStats(stats);
  }

  /** Between answers the composer shows how full the context is. */
  function showContextUse(stats) {
    const parts = [];
    if (stats?.contextUsed !== undefined && stats.contextSize)
      parts.push(`context ${stats.contextUsed} / ${stats.contextSize} tokens`);
    if (stats?.checkpoints)
      parts.push(
        `${stats.checkpoints.held} of ${stats.checkpoints.most} state checkpoints × ${formatBytes(stats.checkpoints.bytes_each)}`,
      );
    if (stats?.memoryBytes) {
      parts.push(`engine memory ${formatBytes(stats.memoryBytes)}`);
      document.body.dataset.engineMemory = String(stats.memoryBytes);
    }
    ui.stats.textContent = parts.join(' · ');
  }

  /**
   * @typedef {{device?: string, threads?: number, prefilling?: {phase?: string, evaluated: number, total: number, part?: number, parts?: number},
   *   generated?: number, contextUsed?: number, contextSize?: number, branchedAt?: number}} LiveStats
   */

  /**
   * Streams one completion into the last (assistant) message and settles its stats.
   * `start({signal, onPrefillProgress})` makes the request (a chat or a branch).
   * @param {LiveStats} [baseStats]
   */
  async function streamAnswer(start, assistant, baseStats = {}) {
    const node = lastNode();
    const onGpu = panel.model?.device?.type === 'gpu';
    /** @type {LiveStats} */
    const live = { ...baseStats, ...(onGpu ? { device: 'GPU' } : { threads: panel.model?.threads }) };
    const controller = new AbortController();
    /** @type {(value?: unknown) => void} */
    let finished;
    state.generating = { assistant, controller, finished: new Promise((resolve) => (finished = resolve)) };
    updateButtons();
    assistant.content = '';
    delete assistant.reasoning;
    delete assistant.tool_calls;
    const message = new MessageBuilder();
    try {
      const stream = await start({
        signal: controller.signal,
        onPrefillProgress: (progress) => {
          live.prefilling = progress;
          showLiveStats(live);
        },
      });
      for await (const chunk of stream) {
        const { delta, finish_reason: finishReason } = chunk.choices[0];
        const prompt = chunk.inferno?.prompt;
        const step = chunk.inferno?.step;
        if (prompt) {
          delete live.prefilling;
          Object.assign(live, {
            evaluated: prompt.evaluated,
            reused: prompt.reused,
            contextSize: prompt.context_size,
            contextUsed: prompt.context_used,
            prefillTokS: prompt.evaluated > 0 ? (1000 * prompt.evaluated) / prompt.prefill_ms : undefined,
          });
          document.body.dataset.lastPrefill = String(prompt.evaluated);
          document.body.dataset.lastReused = String(prompt.reused);
        }
        message.add(delta);
        assistant.content = message.content;
        if (message.reasoning) assistant.reasoning = message.reasoning;
        if (message.calls.length > 0) assistant.tool_calls = message.calls;
        if (step) {
          assistant.steps[step.index] = step;
          assistant.steps.length = step.index + 1;
          live.generated = assistant.steps.length;
          live.contextUsed = (live.contextUsed ?? 0) + 1;
          visualizer.add(step);
          showLiveStats(live);
          if (assistant.steps.length % 8 === 1) scrollToEnd();
        }
        renderMessageBody(assistant, node);
        if (finishReason) {
          const { stats, finish, warnings } = chunk.inferno;
          assistant.stats = { ...live, ...stats, reason: finish, ...(warnings?.length ? { warnings } : {}) };
          document.body.dataset.lastReason = finish;
          document.body.dataset.imagesEncoded = String(stats.imagesEncoded ?? 0);
        }
      }
    } catch (error) {
      assistant.error = { kind: error.kind ?? 'internal', message: error.message };
      const lost = ENGINE_LOST[error.kind];
      if (lost) {
        // The worker (and the model in it) is gone; a new one is already starting.
        panel.forget();
        showError(lost, error);
      }
    } finally {
      state.generating = null;
      visualizer.flush(); // Every token's chip is drawn before the answer counts as finished.
      renderMessageBody(assistant, node);
      showContextUse(assistant.stats);
      updateButtons();
      save();
      document.body.dataset.answers = String(Number(document.body.dataset.answers ?? 0) + 1);
      scrollToEnd();
      finished();
    }
  }

  async function send() {
    const text = ui.prompt.value.trim();
    if ((!text && pictures.pending.length === 0) || !panel.model || state.generating) return;
    const attached = pictures.take();
    await answer({ role: 'user', content: text, ...(attached.length ? { pictures: attached } : {}) });
  }

  /** Answers the conversation again: the last answer is replaced (a new random seed unless one is set). */
  async function regenerate() {
    if (!panel.model || state.generating || state.messages.at(-1)?.role !== 'assistant') return;
    state.messages.pop();
    await answer(null);
  }

  /** The settings as completion parameters, or null (with the reason shown) when one is invalid. */
  function readSettings() {
    try {
      return settings.read(panel.model);
    } catch (error) {
      showError('Check the settings', error);
      return null;
    }
  }

  /**
   * Appends `userMessage` (if any) and streams a new answer to the conversation. Returns
   * false when the settings are invalid (nothing changes then).
   */
  async function answer(userMessage, toolRound = 0) {
    const params = readSettings();
    if (!params) return false;
    hideError();
    if (userMessage) {
      ui.prompt.value = '';
      state.messages.push(userMessage);
    }
    for (const message of state.messages) delete message.steps; // Only the newest answer can branch.
    const messages = apiMessages();
    const assistant = { role: 'assistant', content: '', steps: [] };
    const demo = ui.settings.tools_demo.value;
    if (demo !== 'off') {
      params.tools = [DEMO_TOOL];
      // "Required": the question must be answered by a call, the result by text.
      params.tool_choice = demo === 'required' ? (toolRound === 0 ? 'required' : 'none') : 'auto';
      params.parallel_tool_calls = false; // One call a round keeps each result next to its call.
    }
    state.messages.push(assistant);
    renderMessages();
    visualizer.reset(params);
    await streamAnswer(
      (options) =>
        engine.chat.completions.create({
          ...params,
          ...options,
          messages,
          stream: true,
          trace_top: DEFAULT_TRACE_TOP,
          enable_thinking: ui.thinkingLabel.hidden ? undefined : ui.thinking.checked,
          reasoning_effort: ui.reasoningEffortLabel.hidden ? undefined : ui.reasoningEffort.value,
        }),
      assistant,
    );
    // The tools demo: the page answers the calls, then the model answers with their results.
    if (params.tools && assistant.tool_calls && !assistant.error && toolRound < MAX_TOOL_ROUNDS) {
      for (const call of assistant.tool_calls) {
        const result = { role: 'tool', tool_call_id: call.id, name: call.function.name };
        state.messages.push({ ...result, content: demoToolResult(call) });
      }
      return answer(null, toolRound + 1);
    }
    return true;
  }

  /** Regenerates the last answer from `stepIndex`, with `token` forced there. */
  async function branchFrom(stepIndex, token) {
    const assistant = state.messages.at(-1);
    if (!assistant?.steps || state.generating || !panel.model || stepIndex >= assistant.steps.length) return;
    const params = readSettings();
    if (!params) return;
    delete assistant.error;
    assistant.steps.length = stepIndex;
    visualizer.truncate(stepIndex);
    const previous = assistant.stats ?? {};
    await streamAnswer(
      (options) =>
        engine.branch({
          ...options,
          step: stepIndex,
          token,
          stream: true,
          max_tokens: params.max_tokens,
          trace_top: DEFAULT_TRACE_TOP,
        }),
      assistant,
      {
        contextSize: previous.contextSize,
        contextUsed: (previous.contextUsed ?? 0) - (previous.generated ?? 0) + stepIndex,
        branchedAt: stepIndex,
      },
    );
  }

  async function stopGenerating() {
    const running = state.generating;
    running?.controller.abort();
    await running?.finished;
  }

  async function newChat() {
    if (state.generating) await stopGenerating();
    state.messages = [];
    pictures.prune([]);
    renderMessages();
    visualizer.reset();
    ui.stats.textContent = '';
    updateButtons();
    await engine.reset().catch(() => {});
    save();
    ui.prompt.focus();
  }

  // --- persistence ----------------------------------------------------------------------------

  function savedModelMatches(model) {
    const saved = loadChatState();
    return saved?.model?.name === model.name && saved?.model?.size === model.size;
  }

  function save() {
    const model = panel.model;
    saveChatState({
      messages: state.messages.map((m) => Object.fromEntries(SAVED_FIELDS.map((key) => [key, m[key]]))),
      system: ui.systemPrompt.value,
      thinking: ui.thinking.checked,
      settings: settings.values(),
      model: model ? { name: model.name, size: model.size } : (loadChatState()?.model ?? null),
    });
  }

  /** Restores the saved conversation and settings, and reopens a model kept in OPFS. */
  async function restore() {
    const saved = loadChatState();
    if (saved) {
      state.messages = saved.messages
        .filter((m) => m && ['user', 'assistant', 'tool'].includes(m.role) && typeof m.content === 'string')
        .map((m) =>
          Object.fromEntries(SAVED_FIELDS.filter((key) => m[key] !== undefined).map((key) => [key, m[key]])),
        );
      for (const m of state.messages) {
        // Only well-formed references survive a hand-edited or older save.
        if (m.pictures !== undefined && !Array.isArray(m.pictures)) delete m.pictures;
        if (m.pictures)
          m.pictures = m.pictures.filter((p) => typeof p?.id === 'string' && typeof p?.name === 'string');
      }
      const held = state.messages.flatMap((m) => m.pictures ?? []);
      await pictures.restore(held);
      pictures.prune(held);
      ui.systemPrompt.value = typeof saved.system === 'string' ? saved.system : '';
      ui.thinking.checked = saved.thinking !== false;
      settings.restore(saved.settings);
      renderMessages();
    } else {
      settings.applyDefaults(await engineSampling(), null);
    }
    await panel.renderStored();
    panel.offerDemoModel();
    const last = saved?.model;
    if (last && (await panel.isStored(last.name, last.size))) await panel.openStored(last.name);
    // The page's layout has settled (stored models listed, the demo offered): tests wait for it.
    document.body.dataset.restored = 'true';
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
  ui.dropButton.addEventListener('click', () => pickFile());
  ui.settingsDefaults.addEventListener('click', async () => {
    settings.applyDefaults(panel.model ? state.defaults : await engineSampling(), panel.model);
    save();
  });
  for (const input of [...settings.inputs, ui.systemPrompt, ui.thinking])
    input.addEventListener('change', save);
  ui.settings.threads.addEventListener('change', () => panel.reload());
  ui.settings.device.addEventListener('change', () => panel.reload());
  for (const select of [ui.settings.precision, ui.settings.cache_k, ui.settings.cache_v])
    select.addEventListener('change', () => panel.reload());
  for (const input of [ui.settings.image_min_tokens, ui.settings.image_max_tokens])
    input.addEventListener('change', () => panel.applyImageTokens());
  updateButtons();

  return {
    loadFile: panel.loadFile,
    loadUrl: panel.loadUrl,
    attachProjector: panel.attachProjector,
    addPictures: pictures.add,
    restore,
    get model() {
      return panel.model;
    },
  };
}
