// @ts-check
// The metadata table: one row per key, searchable by key and value. Arrays arrive as
// previews ({element_type, length, preview}), so even a 262,144-token vocabulary is a
// handful of DOM nodes; they are collapsed behind a <details> summary.

import { PAGE_ROWS, el, moreRowsRow, replaceChildren, throttleToFrame } from './dom.js';
import { formatInteger, formatQuantity, formatScalar } from './format.js';

const LONG_STRING_CHARS = 240;

let entries = [];
let searchTexts = []; // searchText of each entry, computed once per file
let limit = 0; // rows built; PAGE_ROWS more per "show more"
let searchInput = null;

function isArrayInfo(value) {
  return value && typeof value === 'object' && Array.isArray(value.preview);
}

function arraySummary(info) {
  return `${info.element_type} × ${formatInteger(info.length)}`;
}

function scalarNode(value, type) {
  if (value === null || value === undefined) return el('span', { className: 'muted' }, 'null');
  if (typeof value === 'string') return stringNode(value);
  if (typeof value === 'boolean') return el('span', { className: 'value-bool' }, String(value));
  return el('span', { className: 'value-number' }, formatScalar(value, type));
}

function stringNode(text) {
  if (text.length <= LONG_STRING_CHARS) return el('span', { className: 'value-string' }, text);
  return el(
    'details',
    { className: 'long-string' },
    el(
      'summary',
      {},
      el('span', { className: 'value-string' }, text.slice(0, 80) + '…'),
      el('span', { className: 'muted' }, ` (${formatInteger(text.length)} characters)`),
    ),
    el('pre', { className: 'code-block' }, el('code', {}, text)),
  );
}

/** An array preview, with nested arrays rendered recursively. */
function arrayNode(info) {
  const shown = info.preview.length;
  const items = info.preview.map((item) =>
    el('li', {}, isArrayInfo(item) ? arrayNode(item) : scalarNode(item, info.element_type)),
  );
  const more =
    info.length > shown
      ? el(
          'p',
          { className: 'muted small' },
          `First ${formatInteger(shown)} of ${formatInteger(info.length)} items`,
        )
      : null;
  return el(
    'details',
    { className: 'array-value' },
    el('summary', {}, el('code', {}, arraySummary(info))),
    shown
      ? el('ol', { className: 'array-preview', start: '0' }, items)
      : el('p', { className: 'muted small' }, 'empty'),
    more,
  );
}

function valueNode(entry) {
  return isArrayInfo(entry.array) ? arrayNode(entry.array) : scalarNode(entry.value, entry.type);
}

function typeLabel(entry) {
  return isArrayInfo(entry.array) ? `array<${entry.array.element_type}>` : entry.type;
}

/** Lower-cased text a search matches against: key, type and (previewed) values. */
function searchText(entry) {
  const parts = [entry.key, typeLabel(entry)];
  const collect = (value, type) => {
    if (isArrayInfo(value)) value.preview.forEach((item) => collect(item, value.element_type));
    else if (value !== null && value !== undefined) parts.push(formatScalar(value, type));
  };
  collect(entry.array ?? entry.value, entry.type);
  return parts.join('\n').toLowerCase();
}

function buildRow(entry) {
  return el(
    'tr',
    { dataset: { key: entry.key } },
    el('td', { className: 'key-cell' }, el('code', {}, entry.key)),
    el('td', { className: 'type-cell' }, el('code', { className: 'muted' }, typeLabel(entry))),
    el('td', { className: 'value-cell' }, valueNode(entry)),
  );
}

/** Builds the rows of the entries matching the search, up to `limit` of them (more on request). */
function applySearch() {
  const query = searchInput.value.trim().toLowerCase();
  const matching = query ? entries.filter((_, i) => searchTexts[i].includes(query)) : entries;
  const shown = matching.slice(0, limit);
  const tbody = document.querySelector('#metadata-table tbody');
  const more =
    shown.length < matching.length
      ? moreRowsRow(3, shown.length, matching.length, () => {
          limit += PAGE_ROWS;
          applySearch();
        })
      : [];
  replaceChildren(tbody, shown.map(buildRow), more);
  document.getElementById('metadata-shown').textContent = query
    ? `${formatInteger(matching.length)} of ${formatQuantity(entries.length, 'key')}`
    : formatQuantity(entries.length, 'key');
}

function ensureSearchWired() {
  if (searchInput) return;
  searchInput = document.getElementById('metadata-search');
  searchInput.addEventListener(
    'input',
    throttleToFrame(() => {
      limit = PAGE_ROWS;
      applySearch();
    }),
  );
}

/** Shows a new file's metadata; the search starts fresh. */
export function renderMetadataTable(newEntries) {
  ensureSearchWired();
  searchInput.value = '';
  entries = newEntries;
  searchTexts = entries.map(searchText);
  limit = PAGE_ROWS;
  applySearch();
}
