// @ts-check
// The public API's checks of a caller's request, before any worker sees it: each OpenAI field
// read into what the engine takes, or refused with kind bad_request naming the field. The
// engine checks what only it can (templates, schemas, tools against the model).

import { InfernoError } from './worker-client.js';
import { SAMPLING_KEYS } from './defaults.js';

/** The most stop strings a request may give (OpenAI allows 4). */
const MAX_STOP_STRINGS = 16;

/** @param {string} message */
export function badRequest(message) {
  return new InfernoError({ name: 'TypeError', kind: 'bad_request', message });
}

export function integerParam(value, name, min, max) {
  if (value === undefined || value === null) return undefined;
  if (!Number.isInteger(value) || value < min || value > max)
    throw badRequest(`${name} must be a whole number in ${min}..${max}`);
  return value;
}

export function stopStrings(stop) {
  if (stop === undefined || stop === null) return [];
  const list = Array.isArray(stop) ? stop : [stop];
  if (list.length > MAX_STOP_STRINGS || !list.every((s) => typeof s === 'string' && s.length > 0)) {
    throw badRequest(`stop must be a non-empty string or up to ${MAX_STOP_STRINGS} of them`);
  }
  return list;
}

/**
 * OpenAI's `response_format` as the engine's grammar: `{type: 'text'}` (none),
 * `{type: 'json_object'}`, `{type: 'json_schema', json_schema: {name, schema, strict}}`, and the
 * extension `{type: 'grammar', grammar}` (a Lark grammar). The schema goes as JSON text; the
 * engine compiles it before the answer starts. A `strict` schema is refused (kind bad_schema)
 * unless every keyword can be enforced; otherwise those that cannot are left out, and the
 * answer names them (`inferno.warnings`), as OpenAI's API treats a schema that is not strict.
 */
/** @returns {import('./protocol.js').ResponseGrammar | undefined} */
export function responseFormat(format) {
  if (format === undefined || format === null) return undefined;
  switch (format.type) {
    case 'text':
      return undefined;
    case 'json_object':
      return { type: 'json_object' };
    case 'json_schema': {
      const schema = format.json_schema?.schema;
      if (schema === null || typeof schema !== 'object')
        throw badRequest('response_format.json_schema.schema must be a JSON schema object');
      return {
        type: 'json_schema',
        schema: JSON.stringify(schema),
        strict: format.json_schema.strict === true,
      };
    }
    case 'grammar':
      if (typeof format.grammar !== 'string' || format.grammar.length === 0)
        throw badRequest('response_format.grammar must be a non-empty Lark grammar');
      return { type: 'lark', grammar: format.grammar };
    default:
      throw badRequest("response_format.type must be 'text', 'json_object', 'json_schema' or 'grammar'");
  }
}

/** Where a picture goes in a message's text: llama.cpp's mtmd marker, which the engine takes. */
export const MEDIA_MARKER = '<__media__>';

/**
 * OpenAI messages to the template's, and the URLs of their pictures in order. Content may be a
 * string, or a list of parts: `{type: 'text', text}` and `{type: 'image_url', image_url: {url}}`
 * (a `data:`, `blob:` or `http(s):` URL); parts are joined as llama.cpp's server joins them (a
 * newline between two texts, none beside a picture, which becomes a `<__media__>` marker).
 * Content may be null in an assistant message that made tool calls; `developer` is `system`.
 * @returns {{messages: import('./engine-types.js').ChatMessage[], pictures: string[]}}
 */
export function chatMessages(messages) {
  if (!Array.isArray(messages) || messages.length === 0)
    throw badRequest('messages must be a non-empty array');
  /** @type {string[]} */
  const pictures = [];
  const out = messages.map((message, i) => {
    const calls = message?.tool_calls;
    const content = Array.isArray(message?.content)
      ? joinParts(message.content, i, pictures)
      : (message?.content ?? (Array.isArray(calls) ? '' : message?.content));
    if (typeof message?.role !== 'string' || typeof content !== 'string') {
      throw badRequest(`messages[${i}] needs a string role and string content`);
    }
    const out = { role: message.role === 'developer' ? 'system' : message.role, content };
    if (calls !== undefined && calls !== null) out.tool_calls = toolCalls(calls, i);
    for (const key of ['tool_call_id', 'name', 'reasoning_content']) {
      if (message[key] === undefined || message[key] === null) continue;
      if (typeof message[key] !== 'string') throw badRequest(`messages[${i}].${key} must be a string`);
      out[key] = message[key];
    }
    return out;
  });
  return { messages: out, pictures };
}

/** A message's content parts as one text, each picture's URL pushed onto `pictures`. */
function joinParts(parts, i, pictures) {
  let text = '';
  let afterPicture = false;
  for (const [j, part] of parts.entries()) {
    if (part?.type === 'text' && typeof part.text === 'string') {
      if (text !== '' && !afterPicture) text += '\n';
      text += part.text;
      afterPicture = false;
    } else if (part?.type === 'image_url') {
      const url = part.image_url?.url;
      if (typeof url !== 'string' && !(url instanceof URL))
        throw badRequest(`messages[${i}].content[${j}].image_url.url must be a data:, blob: or http(s): URL`);
      pictures.push(String(url));
      text += MEDIA_MARKER;
      afterPicture = true;
    } else {
      throw badRequest(
        `messages[${i}].content[${j}]: parts are {type: 'text', text} or {type: 'image_url', image_url: {url}}`,
      );
    }
  }
  return text;
}

/** An assistant message's `tool_calls`: arguments as JSON text (an object is written as one). */
function toolCalls(calls, i) {
  if (!Array.isArray(calls)) throw badRequest(`messages[${i}].tool_calls must be an array`);
  return calls.map((call, j) => {
    const name = call?.function?.name;
    let args = call?.function?.arguments ?? '{}';
    if (args !== null && typeof args === 'object') args = JSON.stringify(args);
    if (typeof name !== 'string' || typeof args !== 'string')
      throw badRequest(`messages[${i}].tool_calls[${j}] needs function.name and function.arguments`);
    return { id: call.id ?? undefined, type: 'function', function: { name, arguments: args } };
  });
}

/** `tools`, `tool_choice` and `parallel_tool_calls` for the engine, which checks the names and
 *  schemas (kind bad_tools). */
export function toolFields(params) {
  const fields = {};
  if (params.tools !== undefined && params.tools !== null) {
    if (!Array.isArray(params.tools))
      throw badRequest('tools must be an array of {type: "function", function}');
    fields.tools = params.tools.map((tool, i) => {
      if (tool?.type !== 'function' || typeof tool.function?.name !== 'string')
        throw badRequest(
          `tools[${i}] must be {type: 'function', function: {name, description?, parameters?}}`,
        );
      const { name, description, parameters } = tool.function;
      return { type: 'function', function: { name, description, parameters } };
    });
  }
  const choice = params.tool_choice;
  if (choice !== undefined && choice !== null) {
    const named = typeof choice === 'object' && typeof choice.function?.name === 'string';
    if (!named && !['auto', 'none', 'required'].includes(choice))
      throw badRequest(
        "tool_choice must be 'auto', 'none', 'required' or {type: 'function', function: {name}}",
      );
    fields.tool_choice = named ? { type: 'function', function: { name: choice.function.name } } : choice;
  }
  if (params.parallel_tool_calls !== undefined && params.parallel_tool_calls !== null)
    fields.parallel_tool_calls = Boolean(params.parallel_tool_calls);
  return fields;
}

/** llama.cpp's `reasoning_format`: 'auto' (default) keeps the reasoning apart in
 *  `reasoning_content`, 'none' leaves it in the content as the model wrote it. */
export function reasoningFormat(format) {
  if (format === undefined || format === null || format === 'auto') return undefined;
  if (format === 'none') return false;
  throw badRequest("reasoning_format must be 'auto' or 'none'");
}

/** The sampling settings in force: the request's, else the file's recommendation (which is
 *  llama.cpp's defaults where the file says nothing); a fresh random seed unless one is given. */
/** @param {import('./inferno.js').AnswerParams} params @param {Record<string, number>} [recommended]
 *  @returns {Record<string, number>} */
export function samplingSettings(params, recommended = {}) {
  /** @type {Record<string, number>} */
  const settings = { ...recommended };
  for (const key of SAMPLING_KEYS) {
    const value = params[key];
    if (value === undefined || value === null) continue;
    if (typeof value !== 'number' || !Number.isFinite(value))
      throw badRequest(`${key} must be a finite number`);
    settings[key] = value;
  }
  const seed = params.seed ?? crypto.getRandomValues(new Uint32Array(1))[0];
  if (!Number.isSafeInteger(seed) || seed < 0) throw badRequest('seed must be a whole number >= 0');
  settings.seed = seed;
  return settings;
}
