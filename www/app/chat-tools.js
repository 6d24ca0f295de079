// @ts-check
// The chat page's tools demo: one made-up function the model may call, whose result the page
// makes up as well, so a conversation shows a call, its result and the answer that uses it.
// The same city always gets the same weather; nothing leaves the page.

import { el } from './dom.js';

export const DEMO_TOOL = Object.freeze({
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The current weather in a city.',
    parameters: {
      type: 'object',
      properties: {
        city: { type: 'string', description: 'The city, e.g. Paris', maxLength: 40 },
        unit: { enum: ['celsius', 'fahrenheit'] },
      },
      required: ['city'],
    },
  },
});

const SKIES = ['clear', 'a few clouds', 'overcast', 'light rain', 'fog', 'snow showers'];

/** The page's answer to `call` (JSON text, as a tool's result is sent back). */
export function demoToolResult(call) {
  if (call.function.name !== DEMO_TOOL.function.name)
    return JSON.stringify({ error: `there is no tool named ${call.function.name}` });
  let args;
  try {
    args = JSON.parse(call.function.arguments);
  } catch {
    return JSON.stringify({ error: 'the arguments are not JSON' });
  }
  const city = typeof args?.city === 'string' ? args.city.trim() : '';
  if (!city) return JSON.stringify({ error: 'no city was given' });
  let hash = 0;
  for (const char of city.toLowerCase()) hash = (hash * 31 + char.codePointAt(0)) >>> 0;
  const celsius = 2 + (hash % 29);
  const fahrenheit = args.unit === 'fahrenheit';
  return JSON.stringify({
    city,
    temperature: fahrenheit ? Math.round((celsius * 9) / 5 + 32) : celsius,
    unit: fahrenheit ? 'fahrenheit' : 'celsius',
    sky: SKIES[(hash >>> 8) % SKIES.length],
  });
}

/** A call as the conversation shows it: the function and its arguments. */
export function toolCallNode(call) {
  return el(
    'div',
    { className: 'tool-call', dataset: { tool: call.function.name } },
    el('span', { className: 'tool-label' }, `Called ${call.function.name}`),
    el('code', { className: 'tool-code' }, call.function.arguments),
  );
}

/** A tool's result as the conversation shows it. */
export function toolResultNode(message) {
  return el(
    'div',
    { className: 'tool-result' },
    el('span', { className: 'tool-label' }, `${message.name ?? 'The tool'} returned`),
    el('code', { className: 'tool-code' }, message.content),
  );
}
