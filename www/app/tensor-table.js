// @ts-check
// The tensor table: sortable by every column, filterable by name and type, and grouped
// per transformer layer ("blk.N") with collapsible groups. Rows are built PAGE_ROWS (500) at
// a time, with a "show more" row, so each change rebuilds a bounded body in one
// DocumentFragment whatever the file lists; collapsing only toggles `hidden` on the rows it
// owns.

import { PAGE_ROWS, el, moreRowsRow, replaceChildren, throttleToFrame } from './dom.js';
import { formatBytes, formatDims, formatInteger, formatQuantity } from './format.js';

const NON_LAYER_GROUP = 'global';

const naturalOrder = new Intl.Collator('en', { numeric: true, sensitivity: 'base' });

function compareNumbers(a, b) {
  return (a ?? -Infinity) - (b ?? -Infinity);
}

function compareDims(a, b) {
  const length = Math.max(a.length, b.length);
  for (let i = 0; i < length; i++) {
    const diff = compareNumbers(a[i], b[i]);
    if (diff) return diff;
  }
  return 0;
}

function typeBadge(tensor, colors) {
  const badge = el('code', { className: 'type-badge' }, tensor.type);
  const color = colors.get(tensor.type);
  if (color) badge.style.setProperty('--swatch', color);
  return badge;
}

const COLUMNS = [
  {
    key: 'name',
    label: 'Name',
    compare: (a, b) => naturalOrder.compare(a.name, b.name),
    cell: (t) => el('td', { className: 'name-cell' }, el('code', {}, t.name)),
  },
  {
    key: 'type',
    label: 'Type',
    compare: (a, b) => naturalOrder.compare(a.type, b.type),
    cell: (t, colors) => el('td', {}, typeBadge(t, colors)),
  },
  {
    key: 'dims',
    label: 'Shape',
    compare: (a, b) => compareDims(a.dims ?? [], b.dims ?? []),
    cell: (t) => el('td', { className: 'mono' }, formatDims(t.dims)),
  },
  {
    key: 'elements',
    label: 'Elements',
    numeric: true,
    compare: (a, b) => compareNumbers(a.elements, b.elements),
    cell: (t) => el('td', { className: 'num' }, formatInteger(t.elements)),
  },
  {
    key: 'bytes',
    label: 'Bytes',
    numeric: true,
    compare: (a, b) => compareNumbers(a.bytes, b.bytes),
    cell: (t) =>
      el('td', { className: 'num', title: `${formatInteger(t.bytes)} bytes` }, formatBytes(t.bytes)),
  },
  {
    key: 'file_offset',
    label: 'File offset',
    numeric: true,
    compare: (a, b) => compareNumbers(a.file_offset, b.file_offset),
    cell: (t) =>
      el(
        'td',
        { className: 'num', title: `data section + ${formatInteger(t.offset)}` },
        formatInteger(t.file_offset),
      ),
  },
];

function groupKeyOf(tensor) {
  return tensor.layer === null || tensor.layer === undefined ? NON_LAYER_GROUP : `blk.${tensor.layer}`;
}

function groupOrder(a, b) {
  if (a.key === b.key) return 0;
  if (a.key === NON_LAYER_GROUP) return -1;
  if (b.key === NON_LAYER_GROUP) return 1;
  return a.layer - b.layer;
}

export class TensorTable {
  constructor(section) {
    this.table = section.querySelector('#tensor-table');
    this.tbody = this.table.querySelector('tbody');
    this.nameFilter = section.querySelector('#tensor-filter');
    this.typeFilter = section.querySelector('#tensor-type-filter');
    this.groupToggle = section.querySelector('#tensor-group-toggle');
    this.shownLabel = section.querySelector('#tensor-shown');
    this.tensors = [];
    this.colors = new Map();
    this.sort = { key: 'file_offset', direction: 1 };
    this.collapsed = new Set();
    this.groups = new Map();
    this.limit = PAGE_ROWS; // tensor rows built; grows with "show more", resets with the view
    this.buildHeader();
    this.wireControls(section);
  }

  buildHeader() {
    this.headerCells = COLUMNS.map((column) => {
      const button = el(
        'button',
        { type: 'button', className: 'sort-button', onclick: () => this.sortBy(column.key) },
        column.label,
        el('span', { className: 'sort-mark', 'aria-hidden': 'true' }),
      );
      return el(
        'th',
        { scope: 'col', className: column.numeric ? 'num' : null, dataset: { column: column.key } },
        button,
      );
    });
    replaceChildren(this.table.querySelector('thead tr'), this.headerCells);
  }

  wireControls(section) {
    const rerender = throttleToFrame(() => {
      this.limit = PAGE_ROWS;
      this.render();
    });
    this.nameFilter.addEventListener('input', rerender);
    this.typeFilter.addEventListener('change', rerender);
    this.groupToggle.addEventListener('change', rerender);
    section.querySelector('#tensor-expand-all').addEventListener('click', () => this.setAllCollapsed(false));
    section.querySelector('#tensor-collapse-all').addEventListener('click', () => this.setAllCollapsed(true));
  }

  /** Shows a new file's tensors; filters and collapsed groups start fresh. */
  setTensors(tensors, colors) {
    this.tensors = tensors;
    this.colors = colors;
    this.collapsed.clear();
    this.nameFilter.value = '';
    this.limit = PAGE_ROWS;
    this.fillTypeOptions();
    this.render();
  }

  fillTypeOptions() {
    const counts = new Map();
    for (const tensor of this.tensors) counts.set(tensor.type, (counts.get(tensor.type) ?? 0) + 1);
    const types = [...counts.keys()].sort(naturalOrder.compare);
    replaceChildren(
      this.typeFilter,
      el('option', { value: '' }, `All types (${formatInteger(this.tensors.length)})`),
      types.map((type) => el('option', { value: type }, `${type} (${formatInteger(counts.get(type))})`)),
    );
    this.typeFilter.value = '';
  }

  sortBy(key) {
    this.sort = this.sort.key === key ? { key, direction: -this.sort.direction } : { key, direction: 1 };
    this.render();
  }

  visibleTensors() {
    const query = this.nameFilter.value.trim().toLowerCase();
    const type = this.typeFilter.value;
    const column = COLUMNS.find((c) => c.key === this.sort.key);
    const direction = this.sort.direction;
    return this.tensors
      .filter((t) => (!query || t.name.toLowerCase().includes(query)) && (!type || t.type === type))
      .sort((a, b) => direction * column.compare(a, b) || naturalOrder.compare(a.name, b.name));
  }

  render() {
    const tensors = this.visibleTensors();
    const shown = tensors.slice(0, this.limit);
    const fragment = document.createDocumentFragment();
    this.groups.clear();
    if (this.groupToggle.checked) this.appendGrouped(fragment, shown, tensors);
    else shown.forEach((tensor) => fragment.append(this.buildRow(tensor, null)));
    if (!tensors.length)
      fragment.append(
        el(
          'tr',
          { className: 'empty-row' },
          el('td', { colspan: COLUMNS.length }, 'No tensors match the filter.'),
        ),
      );
    if (shown.length < tensors.length) {
      fragment.append(
        moreRowsRow(COLUMNS.length, shown.length, tensors.length, () => {
          this.limit += PAGE_ROWS;
          this.render();
        }),
      );
    }
    this.tbody.replaceChildren(fragment);
    this.updateHeader();
    this.shownLabel.textContent =
      tensors.length === this.tensors.length
        ? formatQuantity(tensors.length, 'tensor')
        : `${formatInteger(tensors.length)} of ${formatQuantity(this.tensors.length, 'tensor')}`;
  }

  /** Groups `tensors` (all that match) by layer and builds rows for those in `shown` only;
   *  group headers count and size the whole group. */
  appendGrouped(fragment, shown, tensors) {
    const byGroup = new Map();
    for (const tensor of tensors) {
      const key = groupKeyOf(tensor);
      if (!byGroup.has(key)) byGroup.set(key, { key, layer: tensor.layer, tensors: [] });
      byGroup.get(key).tensors.push(tensor);
    }
    const wanted = new Set(shown);
    let budget = shown.length;
    for (const group of [...byGroup.values()].sort(groupOrder)) {
      if (budget <= 0) break;
      const collapsed = this.collapsed.has(group.key);
      const header = this.buildGroupHeader(group, collapsed);
      const members = group.tensors.filter((tensor) => wanted.has(tensor)).slice(0, budget);
      if (!members.length) continue;
      budget -= members.length;
      const rows = members.map((tensor) => this.buildRow(tensor, group.key, collapsed));
      this.groups.set(group.key, { header, rows });
      fragment.append(header, ...rows);
    }
  }

  buildGroupHeader(group, collapsed) {
    const bytes = group.tensors.reduce((sum, t) => sum + (t.bytes ?? 0), 0);
    const label = group.key === NON_LAYER_GROUP ? 'Not in a layer' : group.key;
    const toggle = el(
      'button',
      {
        type: 'button',
        className: 'group-toggle',
        'aria-expanded': String(!collapsed),
        onclick: () => this.toggleGroup(group.key),
      },
      el('span', { className: 'chevron', 'aria-hidden': 'true' }),
      el('span', { className: 'group-label' }, label),
      el(
        'span',
        { className: 'muted' },
        ` ${formatQuantity(group.tensors.length, 'tensor')} · ${formatBytes(bytes)}`,
      ),
    );
    return el(
      'tr',
      { className: 'group-row', dataset: { group: group.key } },
      el('th', { colspan: COLUMNS.length, scope: 'rowgroup' }, toggle),
    );
  }

  buildRow(tensor, groupKey, collapsed = false) {
    const row = el(
      'tr',
      { dataset: { tensor: tensor.name }, hidden: collapsed },
      COLUMNS.map((column) => column.cell(tensor, this.colors)),
    );
    if (groupKey) row.dataset.inGroup = groupKey;
    return row;
  }

  toggleGroup(key) {
    this.setGroupCollapsed(key, !this.collapsed.has(key));
  }

  setGroupCollapsed(key, collapsed) {
    if (collapsed) this.collapsed.add(key);
    else this.collapsed.delete(key);
    const group = this.groups.get(key);
    if (!group) return;
    group.header.querySelector('.group-toggle').setAttribute('aria-expanded', String(!collapsed));
    for (const row of group.rows) row.hidden = collapsed;
  }

  setAllCollapsed(collapsed) {
    const keys = new Set(this.tensors.map(groupKeyOf));
    for (const key of keys) this.setGroupCollapsed(key, collapsed);
  }

  updateHeader() {
    for (const th of this.headerCells) {
      const active = th.dataset.column === this.sort.key;
      if (active) th.setAttribute('aria-sort', this.sort.direction > 0 ? 'ascending' : 'descending');
      else th.removeAttribute('aria-sort');
    }
  }
}
