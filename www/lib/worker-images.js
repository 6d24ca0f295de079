// @ts-check
// The engine worker's pictures: a vision projector (mmproj) read beside the model, and the
// pictures of a chat decoded and handed to the engine one at a time. The browser decodes
// (createImageBitmap, then a canvas's RGBA); the engine checks the size a file's header claims
// first (`picture_header`), so a small file that claims a huge picture is refused before the
// browser allocates for it, and encodes each picture as it is added.

import {
  WorkerError,
  fetchUrl,
  getEngine,
  post,
  requireModel,
  runExclusive,
  yieldToMessages,
} from './worker-engine.js';

/** @typedef {import('./worker-engine.js').WebEngine} WebEngine */
/** @typedef {import('./worker-engine.js').Run} Run */

/** Enough of a file for any header `picture_header` reads (AVIF's metadata included). */
const HEADER_BYTES = 1 << 16;

/**
 * A projector file's bytes: a File or Blob, or a URL fetched whole. `report(bytes, total)` is
 * called as they arrive.
 * @param {Blob | string} source
 * @param {(bytes: number, total: number) => void} [report]
 * @param {Run} [run]
 * @returns {Promise<Uint8Array>}
 */
export async function readProjector(source, report, run) {
  if (source instanceof Blob) {
    report?.(0, source.size);
    const bytes = new Uint8Array(await source.arrayBuffer());
    report?.(bytes.length, bytes.length);
    return bytes;
  }
  const response = await fetchUrl(source);
  const total = Number(response.headers.get('Content-Length')) || 0;
  const reader = response.body.getReader();
  const parts = [];
  let received = 0;
  for (;;) {
    if (run?.stopRequested) {
      await reader.cancel().catch(() => {});
      throw new WorkerError('LoadError', 'cancelled', 'the load was stopped');
    }
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(value);
    received += value.length;
    report?.(received, Math.max(total, received));
  }
  const bytes = new Uint8Array(received);
  let at = 0;
  for (const part of parts) {
    bytes.set(part, at);
    at += part.length;
  }
  return bytes;
}

/**
 * Attaches a projector to a model's engine, with the limits on a picture's rows the request
 * gives: its facts (the inspector's `vision`, `image_tokens` the limits in force), or the
 * engine's typed refusal (`mmproj_mismatch`, `bad_projector`, `unsupported_projector`, or
 * `bad_request` for limits it cannot take).
 * @param {WebEngine} engine @param {Uint8Array} bytes
 * @param {{image_min_tokens?: number, image_max_tokens?: number}} [limits]
 * @returns {import('./inferno.js').ProjectorFacts}
 */
export function attachBytes(engine, bytes, { image_min_tokens, image_max_tokens } = {}) {
  return /** @type {import('./inferno.js').ProjectorFacts} */ (
    engine.attach_projector(bytes, image_min_tokens, image_max_tokens)
  );
}

/**
 * `attach_projector`: a projector beside the loaded model, refused while an answer runs.
 * @param {import('./protocol.js').AttachProjectorRequest} request
 * @returns {Promise<import('./protocol.js').ProjectorReply>}
 */
export function attachProjector(request) {
  const model = requireModel();
  return runExclusive(async (run) => {
    const bytes = await readProjector(request.file ?? request.url ?? '', undefined, run);
    const vision = attachBytes(model.engine, bytes, request);
    model.vision = vision;
    return { type: 'projector', vision };
  });
}

/**
 * Decodes a chat's pictures and adds them to the engine in order. The projector encodes each
 * square of a picture (a tiled one has up to 17) in a call of its own, or finds the picture
 * encoded before; an `image` event goes out before each square (`part` of `parts`) and after
 * each picture (its `rows`). A stop between two squares ends the request (kind `aborted`).
 * @param {number} id @param {Run} run @param {WebEngine} engine @param {Blob[]} pictures
 */
export async function addPictures(id, run, engine, pictures) {
  engine.clear_images();
  const wasm = await getEngine();
  const count = pictures.length;
  const stopped = () => {
    if (run.stopRequested)
      throw new WorkerError('AbortError', 'aborted', 'the answer was stopped while its pictures were read');
  };
  for (const [index, picture] of pictures.entries()) {
    stopped();
    const rows = await addPicture(engine, await decodePicture(wasm, picture), async (part, parts) => {
      post({ type: 'image', id, event: true, index, count, part, parts });
      await yieldToMessages();
      stopped();
    });
    post({ type: 'image', id, event: true, index: index + 1, count, rows });
    await yieldToMessages();
  }
}

/**
 * Adds a decoded picture to the engine, its squares encoded one call at a time (on the GPU, each
 * awaited before the next call collects it); `between(done, total)` runs before each call (to
 * report, yield, or throw to stop). Returns the rows of embeddings it puts into the prompt.
 * @param {WebEngine} engine @param {{width: number, height: number, rgba: Uint8Array}} picture
 * @param {(done: number, total: number) => Promise<void>} [between]
 */
export async function addPicture(engine, { width, height, rgba }, between) {
  const total = engine.add_image(width, height, rgba);
  for (let left = total; left > 0;) {
    await between?.(total - left, total);
    left = engine.encode_square();
    // On the GPU the square was submitted (and counts as done): the next call, or finish_image,
    // takes it once it is.
    await engine.pending();
  }
  return engine.finish_image();
}

/**
 * A picture file's RGBA pixels, once the size its header claims is within the engine's caps
 * (`picture_header` refuses it with a typed error before the browser allocates anything).
 * @param {{picture_header: (bytes: Uint8Array) => {format: string, width: number, height: number}}} wasm
 * @param {Blob} picture
 */
export async function decodePicture(wasm, picture) {
  const header = wasm.picture_header(new Uint8Array(await picture.slice(0, HEADER_BYTES).arrayBuffer()));
  return pixelsOf(picture, header);
}

/**
 * A picture's RGBA pixels as the browser decodes it: EXIF orientation applied (the picture as
 * a person sees it), no colour-space conversion and no premultiplied alpha (the file's own
 * values, as llama.cpp's loader reads them; a canvas still premultiplies internally, so a
 * translucent pixel's colour may round).
 * @param {Blob} picture @param {{format: string, width: number, height: number}} header
 */
async function pixelsOf(picture, header) {
  let bitmap;
  try {
    bitmap = await createImageBitmap(picture, { premultiplyAlpha: 'none', colorSpaceConversion: 'none' });
  } catch (error) {
    throw new WorkerError(
      'EngineError',
      'bad_image',
      `the picture cannot be read: this browser could not decode its ${header.format.toUpperCase()} data (${error?.message ?? error})`,
    );
  }
  try {
    const { width, height } = bitmap;
    const canvas = new OffscreenCanvas(width, height);
    const context = canvas.getContext('2d', { willReadFrequently: true });
    if (!context)
      throw new WorkerError('EngineError', 'bad_image', 'this browser gave no canvas to read the picture');
    context.drawImage(bitmap, 0, 0);
    const data = context.getImageData(0, 0, width, height).data;
    return { width, height, rgba: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) };
  } finally {
    bitmap.close();
  }
}
