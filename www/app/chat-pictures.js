// @ts-check
// Pictures in the chat: the composer's tray of pictures waiting to be sent (added with the
// button, by pasting, or by dropping them on the page), their thumbnails in the user's
// bubble, and their files kept in IndexedDB so a reloaded conversation still shows and sends
// them. A message holds `pictures: [{id, name}]`; the files live here, by id.

import { el, replaceChildren } from './dom.js';
import { forgetPicturesExcept, keepPicture, storedPicture } from '../lib/storage.js';

/** What the browser decodes for an `<img>`, and so what the worker can. */
const PICTURE_TYPES = /^image\/(png|jpeg|gif|webp|bmp|avif)$/;
const PICTURE_NAMES = /\.(png|jpe?g|gif|webp|bmp|avif)$/i;

/** @typedef {{id: string, name: string}} PictureRef */

/** Whether a file is a picture the chat takes. @param {File} file */
export function isPicture(file) {
  return PICTURE_TYPES.test(file.type) || (!file.type && PICTURE_NAMES.test(file.name));
}

/**
 * ui: {tray, button, input, prompt}; hooks: {canAttach(): string | null (why not, or null),
 * showError(title, error), changed()}.
 */
export function createPictureTray(ui, hooks) {
  /** Object URLs of the pictures this page has, by id (null: not kept, so not shown). */
  /** @type {Map<string, string | null>} */
  const urls = new Map();
  /** @type {PictureRef[]} */
  let pending = [];

  /** Adds files to the tray (those that are pictures); refused, with the reason, where the
   *  model takes none. @param {Iterable<File>} files */
  async function add(files) {
    const pictures = [...files].filter(isPicture);
    if (pictures.length === 0) return;
    const why = hooks.canAttach();
    if (why) {
      hooks.showError('Cannot add the picture', { kind: 'no_mmproj', message: why });
      return;
    }
    for (const file of pictures) {
      const id = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
      urls.set(id, URL.createObjectURL(file));
      pending.push({ id, name: file.name || 'pasted picture' });
      // Kept for a reload; without IndexedDB the chat goes on with it unsaved.
      keepPicture(id, file).catch(() => {});
    }
    render();
    hooks.changed();
  }

  function remove(id) {
    pending = pending.filter((picture) => picture.id !== id);
    render();
    hooks.changed();
  }

  function render() {
    ui.tray.hidden = pending.length === 0;
    replaceChildren(
      ui.tray,
      pending.map((picture) =>
        el(
          'figure',
          { className: 'tray-picture', dataset: { id: picture.id } },
          el('img', { src: urls.get(picture.id) ?? '', alt: picture.name }),
          el(
            'button',
            {
              type: 'button',
              className: 'tray-remove',
              title: `Remove ${picture.name}`,
              onclick: () => remove(picture.id),
            },
            '×',
          ),
        ),
      ),
    );
  }

  /** The pictures waiting to be sent, taken out of the tray. @returns {PictureRef[]} */
  function take() {
    const taken = pending;
    pending = [];
    render();
    return taken;
  }

  /** Makes the pictures of a restored conversation available again, from IndexedDB; those no
   *  longer kept have none, and are left out of what is sent. @param {PictureRef[]} pictures */
  async function restore(pictures) {
    await Promise.all(
      pictures
        .filter((picture) => !urls.has(picture.id))
        .map(async (picture) => {
          const blob = await storedPicture(picture.id).catch(() => null);
          urls.set(picture.id, blob ? URL.createObjectURL(blob) : null);
        }),
    );
  }

  /** Deletes the kept files of pictures no message (and no pending one) holds.
   *  @param {PictureRef[]} held */
  function prune(held) {
    const ids = [...held, ...pending].map((picture) => picture.id);
    forgetPicturesExcept(ids).catch(() => {});
  }

  /** The content parts of a user message with pictures: each picture, then the text (as
   *  llama.cpp's web UI orders them). @param {PictureRef[]} pictures @param {string} text */
  function contentParts(pictures, text) {
    const parts = pictures
      .map((picture) => urls.get(picture.id))
      .filter((url) => typeof url === 'string')
      .map((url) => ({ type: 'image_url', image_url: { url } }));
    return text ? [...parts, { type: 'text', text }] : parts;
  }

  /** The thumbnails of a message's pictures. @param {PictureRef[]} pictures */
  function thumbnails(pictures) {
    return el(
      'div',
      { className: 'bubble-pictures' },
      ...pictures.map((picture) => {
        const url = urls.get(picture.id);
        return url
          ? el('img', { src: url, alt: picture.name, title: picture.name, className: 'bubble-picture' })
          : el(
              'span',
              { className: 'bubble-picture missing muted small' },
              `${picture.name} (no longer kept)`,
            );
      }),
    );
  }

  ui.button.addEventListener('click', () => {
    const why = hooks.canAttach();
    if (why) hooks.showError('Cannot add a picture', { kind: 'no_mmproj', message: why });
    else ui.input.click();
  });
  ui.input.addEventListener('change', () => {
    add(ui.input.files ?? []);
    ui.input.value = ''; // The same picture may be chosen again.
  });
  ui.prompt.addEventListener('paste', (event) => {
    const files = [...(event.clipboardData?.files ?? [])].filter(isPicture);
    if (files.length === 0) return;
    event.preventDefault();
    add(files);
  });

  return {
    add,
    take,
    restore,
    prune,
    contentParts,
    thumbnails,
    get pending() {
      return pending;
    },
  };
}
