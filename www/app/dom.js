// @ts-check
// Tiny DOM builder. Everything that comes from a model file is untrusted, so text only
// ever enters the page as Text nodes: there is deliberately no innerHTML path here.

/**
 * el('td', {className: 'num', dataset: {tensor: name}}, 'text', childNode, [more])
 * Props: className, dataset, hidden, and any attribute (set with setAttribute);
 * on* functions become event listeners. Children: strings, numbers, nodes, arrays,
 * null/undefined/false (skipped).
 */
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'className') node.className = value;
    else if (key === 'dataset') Object.assign(node.dataset, value);
    else if (key === 'hidden') node.hidden = Boolean(value);
    else if (key.startsWith('on') && typeof value === 'function') node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  append(node, children);
  return node;
}

export function append(parent, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    parent.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return parent;
}

/** Replaces all children of node. */
export function replaceChildren(node, ...children) {
  node.replaceChildren();
  return append(node, children);
}

/** Runs fn at most once per animation frame, with the latest arguments. */
export function throttleToFrame(fn) {
  let pendingArgs = null;
  return (...args) => {
    const alreadyScheduled = pendingArgs !== null;
    pendingArgs = args;
    if (alreadyScheduled) return;
    requestAnimationFrame(() => {
      const latest = pendingArgs;
      pendingArgs = null;
      fn(...latest);
    });
  };
}

/**
 * An error banner built from the elements `#${id}`, `#${id}-title`, `-kind`, `-message` and
 * `-dismiss`: show(title, error) fills it with the error's kind and message, hide() clears it.
 */
export function errorBanner(id) {
  const part = (suffix) => document.getElementById(suffix ? `${id}-${suffix}` : id);
  const [root, title, kind, message] = [part(''), part('title'), part('kind'), part('message')];
  const hide = () => {
    root.hidden = true;
    delete root.dataset.kind;
  };
  part('dismiss').addEventListener('click', hide);
  return {
    show(heading, error) {
      title.textContent = heading;
      kind.textContent = error?.kind ?? 'internal';
      message.textContent = error?.message || String(error);
      root.dataset.kind = error?.kind ?? 'internal';
      root.hidden = false;
    },
    hide,
  };
}

/** Rows a long table builds at first, and adds per "show more": a hostile file can list tens
 *  of thousands of tensors or metadata keys, and building every row at once froze the page. */
export const PAGE_ROWS = 500;

/** The last row of a paged table: how many rows are not shown yet, and a button that shows
 *  the next PAGE_ROWS of them (`onMore`). */
export function moreRowsRow(colspan, shown, total, onMore) {
  const next = Math.min(PAGE_ROWS, total - shown);
  return el(
    'tr',
    { className: 'more-rows' },
    el(
      'td',
      { colSpan: colspan },
      `${(total - shown).toLocaleString('en-US')} more not shown · `,
      el(
        'button',
        { type: 'button', className: 'more-rows-button', onclick: onMore },
        `Show ${next.toLocaleString('en-US')} more`,
      ),
    ),
  );
}
