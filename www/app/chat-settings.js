// @ts-check
// The chat's settings panel: sampling, answer length, context size and threads, checked when
// read. Defaults come from the engine (llama.cpp's sampling), the loaded file's
// recommendation and defaults.js, never from copies here.

import { el, replaceChildren } from './dom.js';
import { Inferno } from '../lib/inferno.js';
import { DEFAULT_CONTEXT, DEFAULT_MAX_TOKENS, MAX_TOKENS_LIMIT, SAMPLING_KEYS } from '../lib/defaults.js';

/** The sampling part of engine defaults or a file's recommendation. */
export function pickSampling(settings) {
  return Object.fromEntries(
    SAMPLING_KEYS.filter((key) => settings?.[key] !== undefined).map((key) => [key, settings[key]]),
  );
}

/**
 * inputs: {temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n, max_tokens, seed, context, threads,
 * device, image_min_tokens, image_max_tokens, json_schema} (form controls); threadsNote: the element
 * explaining the thread choice.
 */
export function createSettings(inputs, threadsNote) {
  setUpThreads();

  /** The Threads choices: "auto" (the engine's default) and 1..cores; one thread only where
   *  the page cannot share memory with workers. */
  function setUpThreads() {
    const {
      threads: supported,
      hardwareThreads: cores,
      defaultThreads,
      coresBucketed,
    } = Inferno.capabilities();
    const options = [el('option', { value: '' }, `Auto (${defaultThreads})`)];
    if (supported)
      for (let n = 1; n <= Math.min(cores, 64); n++)
        options.push(el('option', { value: String(n) }, String(n)));
    replaceChildren(inputs.threads, options);
    inputs.threads.disabled = !supported;
    const offered =
      coresBucketed && cores <= 4
        ? `this browser says ${cores}, which it says for any machine under 8 cores, so Auto uses ${defaultThreads}`
        : `this machine offers ${cores}`;
    threadsNote.textContent = supported
      ? `Threads: ${offered}. Changing it reloads the model into a new engine; the conversation stays.`
      : 'One thread: this page is not cross-origin isolated, so WebAssembly threads are unavailable (serve it with COOP/COEP headers).';
  }

  /** Shows `sampling` (any of its keys) and, when given, the answer length and context.
   *  @param {Record<string, number> | undefined} sampling
   *  @param {{maxTokens?: number, context?: number}} [limits] */
  function apply(sampling, { maxTokens, context } = {}) {
    for (const key of SAMPLING_KEYS) {
      const value = sampling?.[key];
      if (value !== undefined) inputs[key].value = String(Number(value.toFixed?.(4) ?? value));
    }
    if (maxTokens !== undefined) inputs.max_tokens.value = String(maxTokens);
    if (context !== undefined) inputs.context.value = String(context);
  }

  /** The defaults for a model (or for no model yet): sampling, answer length and context. */
  function applyDefaults(sampling, model) {
    apply(sampling, {
      maxTokens: DEFAULT_MAX_TOKENS,
      context: Math.min(DEFAULT_CONTEXT, model?.context_length ?? DEFAULT_CONTEXT),
    });
    inputs.seed.value = '';
  }

  function readNumber(input, { integer = false, min = -Infinity, max = Infinity, name }) {
    const value = Number(input.value);
    if (
      input.value.trim() === '' ||
      !Number.isFinite(value) ||
      (integer && !Number.isInteger(value)) ||
      value < min ||
      value > max
    ) {
      input.setCustomValidity(`${name} must be ${integer ? 'a whole number' : 'a number'} in ${min}..${max}`);
      input.reportValidity();
      throw Object.assign(
        new Error(`${name} must be ${integer ? 'a whole number' : 'a number'} between ${min} and ${max}`),
        { kind: 'bad_setting' },
      );
    }
    input.setCustomValidity('');
    return value;
  }

  /** The JSON schema box as a response_format (none when empty); throws (kind bad_setting)
   *  when it is not a JSON object. The engine checks the schema itself (kind bad_schema). */
  function readResponseFormat() {
    const input = inputs.json_schema;
    const text = input.value.trim();
    if (text === '') return undefined;
    let schema;
    try {
      schema = JSON.parse(text);
    } catch {
      schema = null;
    }
    if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) {
      input.setCustomValidity('The JSON schema must be a JSON object');
      input.reportValidity();
      throw Object.assign(new Error('The JSON schema must be a JSON object'), { kind: 'bad_setting' });
    }
    input.setCustomValidity('');
    return { type: 'json_schema', json_schema: { name: 'answer', schema } };
  }

  /** The settings as completion parameters; throws (kind bad_setting) on an invalid field.
   *  An empty seed means a fresh random one per answer (the engine picks it). */
  function read(model) {
    const seedText = inputs.seed.value.trim();
    const responseFormat = readResponseFormat();
    if (responseFormat && inputs.tools_demo.value !== 'off') {
      throw Object.assign(new Error('Answer as JSON or offer the demo tool: not both at once'), {
        kind: 'bad_setting',
      });
    }
    return {
      response_format: responseFormat,
      temperature: readNumber(inputs.temperature, { min: 0, max: 10, name: 'Temperature' }),
      top_k: readNumber(inputs.top_k, { integer: true, min: 0, max: 1e6, name: 'Top-k' }),
      top_p: readNumber(inputs.top_p, { min: 0.0001, max: 1, name: 'Top-p' }),
      min_p: readNumber(inputs.min_p, { min: 0, max: 1, name: 'Min-p' }),
      repeat_penalty: readNumber(inputs.repeat_penalty, { min: 0.01, max: 10, name: 'Repeat penalty' }),
      repeat_last_n: readNumber(inputs.repeat_last_n, {
        integer: true,
        min: 0,
        max: 1e6,
        name: 'Penalty window',
      }),
      seed:
        seedText === ''
          ? undefined
          : readNumber(inputs.seed, { integer: true, min: 0, max: 2 ** 53 - 1, name: 'Seed' }),
      max_tokens: readNumber(inputs.max_tokens, {
        integer: true,
        min: 1,
        max: MAX_TOKENS_LIMIT,
        name: 'Max tokens',
      }),
      context_size: readNumber(inputs.context, {
        integer: true,
        min: 16,
        max: model?.context_length ?? MAX_TOKENS_LIMIT,
        name: 'Context',
      }),
    };
  }

  /** The limits on a picture's rows, as `Inferno.load` and `attachProjector` take them (an
   *  empty field: the projector's own); throws (kind bad_setting) on anything but a whole
   *  number of at least 1. The engine checks them against the projector (kind bad_request). */
  function imageTokens() {
    /** @type {{image_min_tokens?: number, image_max_tokens?: number}} */
    const limits = {};
    for (const [key, name] of /** @type {const} */ ([
      ['image_min_tokens', 'Picture rows, least'],
      ['image_max_tokens', 'Picture rows, most'],
    ])) {
      const input = inputs[key];
      if (input.value.trim() === '') input.setCustomValidity('');
      else limits[key] = readNumber(input, { integer: true, min: 1, max: 1 << 20, name });
    }
    return limits;
  }

  /** The thread count chosen, or null for the engine's default. */
  function threads() {
    return Number(inputs.threads.value) || null;
  }

  /** Every field's text, for saving; restore() puts them back. */
  function values() {
    return Object.fromEntries(
      Object.entries(inputs).map(([key, input]) => [
        key,
        input.type === 'checkbox' ? String(input.checked) : input.value,
      ]),
    );
  }

  function restore(saved) {
    for (const [key, input] of Object.entries(inputs)) {
      if (typeof saved?.[key] !== 'string') continue;
      if (input.type === 'checkbox') input.checked = saved[key] === 'true';
      else input.value = saved[key];
    }
  }

  return {
    apply,
    applyDefaults,
    read,
    threads,
    imageTokens,
    values,
    restore,
    inputs: Object.values(inputs),
  };
}
