// @ts-check
// Renders an inspect Report (the JSON of `inferno inspect --json`) into the page.
// All file-derived text goes through el()/Text nodes: a GGUF file is untrusted input.

import { el, replaceChildren } from './dom.js';
import {
  formatBytes,
  formatCount,
  formatDuration,
  formatHex,
  formatInteger,
  formatQuantity,
  formatScalar,
  formatShare,
} from './format.js';
import { renderMetadataTable } from './metadata-table.js';
import { TensorTable } from './tensor-table.js';

// Distinct hues that stay readable on light and dark backgrounds.
const TYPE_PALETTE = [
  '#e8590c',
  '#1c7ed6',
  '#2f9e44',
  '#ae3ec9',
  '#0c8599',
  '#d6336c',
  '#5c7cfa',
  '#66a80f',
  '#b08900',
  '#868e96',
];

/** Gives each tensor type a stable colour, largest type first. */
function typeColors(report) {
  const colors = new Map();
  const ordered = [...(report.types ?? [])].sort((a, b) => b.bytes - a.bytes);
  ordered.forEach((entry, index) => colors.set(entry.type, TYPE_PALETTE[index % TYPE_PALETTE.length]));
  return colors;
}

function missing() {
  return el('span', { className: 'muted', title: 'not set in this file' }, '—');
}

function textOrMissing(value) {
  return value === null || value === undefined || value === '' ? missing() : String(value);
}

function facts(pairs) {
  return pairs.flatMap(([label, value, props = {}]) => [el('dt', {}, label), el('dd', props, value)]);
}

function swatch(color) {
  const node = el('span', { className: 'swatch', 'aria-hidden': 'true' });
  node.style.setProperty('--swatch', color);
  return node;
}

function quantizationMix(mix, colors) {
  if (!mix?.length) return missing();
  const bar = el('div', {
    className: 'mix-bar',
    role: 'img',
    'aria-label': mix.map((m) => `${m.type} ${formatShare(m.share)}`).join(', '),
  });
  for (const part of mix) {
    const segment = el('span', {
      className: 'mix-segment',
      title: `${part.type}: ${formatShare(part.share)}`,
    });
    segment.style.setProperty('--swatch', colors.get(part.type) ?? TYPE_PALETTE[0]);
    segment.style.flexGrow = String(Math.max(part.share, 0.002));
    bar.append(segment);
  }
  const legend = el(
    'ul',
    { className: 'mix-legend' },
    mix.map((part) =>
      el(
        'li',
        {},
        swatch(colors.get(part.type) ?? TYPE_PALETTE[0]),
        el('code', {}, part.type),
        ' ',
        el('span', { className: 'muted' }, formatShare(part.share)),
      ),
    ),
  );
  return el('div', { className: 'mix' }, bar, legend);
}

/** Whether the engine can chat with the file, and if not the first reason it gives. */
function runsText(runs) {
  if (!runs) return missing();
  if (runs.ok && runs.embeds_only) {
    return el(
      'span',
      { className: 'runs-yes' },
      'No, it embeds: this page can load it to embed text; an encoder has no output layer to chat with',
    );
  }
  if (runs.ok && runs.on_gpu) {
    return el(
      'span',
      { className: 'runs-yes' },
      `Yes, on the GPU: this page can load it with its weights streamed into GPU memory, given a GPU with room for them (not into WebAssembly memory: ${runs.reason})`,
    );
  }
  if (runs.ok) return el('span', { className: 'runs-yes' }, 'Yes: this page can load it and chat');
  return el('span', { className: 'runs-no' }, `No: ${runs.reason}`);
}

/** What the file is for, from the pooling it declares (the report's `purpose`). */
function purposeText({ purpose, pooling }, vision) {
  if (vision) return "Vision projector (mmproj): turns images into a language model's embeddings";
  switch (purpose) {
    case 'embedding':
      return `Embedding model (pooling: ${pooling})`;
    case 'chat_and_embedding':
      return `Chat and embedding (pooling: ${pooling}, and a chat template)`;
    case 'reranker':
      return 'Reranker (pooling: rank): scores pairs of texts, which Inferno does not';
    case 'chat':
      return 'Chat model (declares no pooling; embeds when told how)';
    default:
      return missing();
  }
}

function renderSummary(section, report, context, colors) {
  const summary = report.summary ?? {};
  const title = summary.name || context.fileName;
  replaceChildren(
    section,
    el('h2', { id: 'summary-title', className: 'summary-title' }, title),
    el('p', { className: 'file-name' }, el('code', {}, context.fileName)),
    el(
      'dl',
      { className: 'facts' },
      facts([
        ['Architecture', textOrMissing(summary.architecture), { id: 'summary-architecture' }],
        ['Name', textOrMissing(summary.name)],
        ['Size label', textOrMissing(summary.size_label)],
        [
          'Parameters',
          summary.parameter_count == null ? missing() : formatCount(summary.parameter_count),
          { title: formatInteger(summary.parameter_count), id: 'summary-parameters' },
        ],
        ['File size', formatBytes(report.file?.size), { title: `${formatInteger(report.file?.size)} bytes` }],
        ['File type', textOrMissing(summary.file_type)],
        ['Chat', runsText(report.runs), { id: 'summary-runs' }],
        ['Purpose', purposeText(summary, report.vision), { id: 'summary-purpose' }],
      ]),
    ),
    el('h3', {}, 'Quantization mix'),
    quantizationMix(summary.quantization_mix, colors),
  );
}

function bytesReadText({ bytesRead, fileSize, ms }) {
  const scope = bytesRead < fileSize ? 'header only' : 'whole file';
  return `Read ${formatBytes(bytesRead)} of ${formatBytes(fileSize)} (${scope}) in ${formatDuration(ms)}`;
}

function renderHeaderFacts(report, context) {
  const gguf = report.gguf ?? {};
  const file = report.file ?? {};
  replaceChildren(
    document.getElementById('header-facts-list'),
    facts([
      ['GGUF version', formatInteger(gguf.version)],
      ['Alignment', `${formatInteger(gguf.alignment)} bytes`],
      ['Data offset', `${formatInteger(gguf.data_offset)} (${formatHex(gguf.data_offset)})`],
      ['Tensors', formatInteger(gguf.tensor_count), { id: 'tensor-count' }],
      ['Metadata keys', formatInteger(gguf.metadata_count), { id: 'metadata-count' }],
      ['Header size', formatBytes(file.header_bytes), { title: `${formatInteger(file.header_bytes)} bytes` }],
      ['Tensor data', formatBytes(file.tensor_bytes), { title: `${formatInteger(file.tensor_bytes)} bytes` }],
    ]),
  );
  const bytesRead = document.getElementById('bytes-read');
  bytesRead.textContent = bytesReadText(context);
  bytesRead.dataset.bytesRead = String(context.bytesRead);
  bytesRead.dataset.fileSize = String(context.fileSize);
}

function renderTypeChart(report, colors) {
  const types = [...(report.types ?? [])].sort((a, b) => b.bytes - a.bytes);
  const largest = Math.max(1, ...types.map((t) => t.bytes));
  const total = types.reduce((sum, t) => sum + t.bytes, 0) || 1;
  const rows = types.map((entry) => {
    const fill = el('span', { className: 'bar-fill' });
    fill.style.setProperty('--swatch', colors.get(entry.type));
    fill.style.width = `${Math.max(0.4, (entry.bytes / largest) * 100)}%`;
    return el(
      'div',
      { className: 'bar-row', dataset: { type: entry.type } },
      el('code', { className: 'bar-label' }, entry.type),
      el('div', { className: 'bar-track' }, fill),
      el(
        'span',
        { className: 'bar-value' },
        el('strong', {}, formatBytes(entry.bytes)),
        el(
          'span',
          { className: 'muted' },
          ` · ${formatShare(entry.bytes / total)} · ${formatQuantity(entry.tensors, 'tensor')} · ${formatCount(entry.elements)} weights`,
        ),
      ),
    );
  });
  replaceChildren(
    document.getElementById('type-chart'),
    rows.length ? rows : el('p', { className: 'muted' }, 'This file has no tensors.'),
  );
}

function scalarText(value, type) {
  if (value === null || value === undefined) return missing();
  return formatScalar(value, type);
}

function renderHyperparameters(report) {
  const params = report.hyperparameters ?? [];
  const body = document.getElementById('hyperparameters-body');
  if (!params.length) {
    replaceChildren(body, el('p', { className: 'muted' }, 'No architecture-specific keys in this file.'));
    return;
  }
  const arch = report.summary?.architecture;
  // The metadata types say which values are f32 and deserve f32-aware printing.
  const metadataTypes = new Map((report.metadata ?? []).map((m) => [m.key, m.type]));
  const typeOf = (key) => metadataTypes.get(`${arch}.${key}`);
  replaceChildren(
    body,
    arch ? el('p', { className: 'muted small' }, 'Keys under ', el('code', {}, `${arch}.`)) : null,
    el(
      'dl',
      { className: 'facts mono-values' },
      facts(params.map((p) => [el('code', {}, p.key), scalarText(p.value, typeOf(p.key))])),
    ),
  );
}

/** Three channel values as the file stores them (f32), R, G, B. */
function channelsText(values) {
  return values ? values.map((v) => String(Math.fround(v))).join(', ') : missing();
}

/** A vision projector's card (report.vision): what image it takes, what it gives, what it fits. */
function renderVision(report) {
  const section = document.getElementById('vision-section');
  const vision = report.vision;
  section.hidden = !vision;
  if (!vision) return;
  const count = (n) => (n == null ? missing() : formatInteger(n));
  const encoders =
    [vision.has_vision ? 'image' : null, vision.has_audio ? 'audio' : null].filter(Boolean).join(' and ') ||
    'none';
  // Projectors that size pictures at their own aspect ignore the file's image size.
  const ownAspect = Array.isArray(vision.image_tokens);
  const image = ownAspect
    ? 'each picture at its own aspect' +
      (vision.patch_size == null ? '' : `, patches of ${formatInteger(vision.patch_size)} px`)
    : vision.image_size == null
      ? missing()
      : `${formatInteger(vision.image_size)} × ${formatInteger(vision.image_size)} px` +
        (vision.patch_size == null ? '' : `, patches of ${formatInteger(vision.patch_size)} px`) +
        (vision.patches_per_side == null
          ? ''
          : ` (${formatInteger(vision.patches_per_side)} × ${formatInteger(vision.patches_per_side)})`);
  replaceChildren(
    document.getElementById('vision-body'),
    el(
      'p',
      { className: 'muted small' },
      'Goes beside the language model it was made for: drop both files together (or this one onto the loaded model) to ask the model about pictures. Inferno encodes Gemma 3, Gemma 4, SmolVLM and LFM2-VL projectors.',
    ),
    el(
      'dl',
      { className: 'facts', id: 'vision-facts' },
      facts([
        ['Projector', textOrMissing(vision.projector || null), { id: 'vision-projector' }],
        ['Fits', textOrMissing(vision.family ?? null), { id: 'vision-family' }],
        ['Model architecture', textOrMissing(vision.model_architectures?.join(', ') || null)],
        ['Encoders', encoders],
        ['Image', image, { id: 'vision-image' }],
        ...(ownAspect
          ? [
              [
                'Rows per picture',
                `${formatInteger(vision.image_tokens[0])} to ${formatInteger(vision.image_tokens[1])}`,
                { id: 'vision-image-tokens' },
              ],
            ]
          : []),
        ['Mean (R, G, B)', channelsText(vision.image_mean)],
        ['Std (R, G, B)', channelsText(vision.image_std)],
        ['Encoder width', count(vision.encoder_width)],
        ['Encoder layers', count(vision.encoder_layers)],
        ['Attention heads', count(vision.encoder_heads)],
        ['Feed-forward width', count(vision.encoder_feed_forward)],
        ['Output width', count(vision.output_width), { id: 'vision-output-width' }],
      ]),
    ),
    vision.problems?.length
      ? el(
          'ul',
          { className: 'runs-no', id: 'vision-problems' },
          vision.problems.map((problem) => el('li', {}, problem)),
        )
      : null,
  );
}

function yesNo(value) {
  if (value === null || value === undefined) return missing();
  return value ? 'yes' : 'no';
}

function specialTokensTable(special) {
  if (!special?.length) return el('p', { className: 'muted' }, 'No special tokens declared.');
  return el(
    'table',
    { className: 'data-table compact', id: 'special-tokens' },
    el(
      'thead',
      {},
      el(
        'tr',
        {},
        el('th', { scope: 'col' }, 'Role'),
        el('th', { scope: 'col', className: 'num' }, 'Id'),
        el('th', { scope: 'col' }, 'Text'),
      ),
    ),
    el(
      'tbody',
      {},
      special.map((token) =>
        el(
          'tr',
          {},
          el('td', {}, token.role),
          el('td', { className: 'num' }, formatInteger(token.id)),
          el('td', {}, token.text == null ? missing() : el('code', { className: 'token-text' }, token.text)),
        ),
      ),
    ),
  );
}

function renderTokenizer(report) {
  const tokenizer = report.tokenizer;
  const body = document.getElementById('tokenizer-body');
  if (!tokenizer) {
    replaceChildren(body, el('p', { className: 'muted' }, 'This file has no tokenizer.'));
    return;
  }
  replaceChildren(
    body,
    el(
      'dl',
      { className: 'facts' },
      facts([
        ['Model', textOrMissing(tokenizer.model)],
        ['Pre-tokenizer', textOrMissing(tokenizer.pre)],
        [
          'Vocabulary',
          tokenizer.vocab_size == null ? missing() : `${formatInteger(tokenizer.vocab_size)} tokens`,
        ],
        ['Merges', tokenizer.merges_count == null ? missing() : formatInteger(tokenizer.merges_count)],
        ['Adds BOS', yesNo(tokenizer.add_bos)],
        ['Adds EOS', yesNo(tokenizer.add_eos)],
      ]),
    ),
    el('h3', {}, 'Special tokens'),
    specialTokensTable(tokenizer.special),
  );
}

function renderChatTemplate(report) {
  const template = report.chat_template;
  const body = document.getElementById('chat-template-body');
  if (!template) {
    replaceChildren(body, el('p', { className: 'muted' }, 'This file has no chat template.'));
    return;
  }
  replaceChildren(
    body,
    el(
      'p',
      { className: 'muted small' },
      `${formatInteger(template.length)} characters, from `,
      el('code', {}, 'tokenizer.chat_template'),
    ),
    el('pre', { className: 'code-block' }, el('code', { id: 'chat-template' }, template)),
  );
}

let tensorTable = null;

/** Fills every report section. context: {fileName, fileSize, bytesRead, ms}. */
export function renderReport(report, context) {
  const colors = typeColors(report);
  renderSummary(document.getElementById('summary'), report, context, colors);
  renderHeaderFacts(report, context);
  renderTypeChart(report, colors);
  renderVision(report);
  renderHyperparameters(report);
  renderTokenizer(report);
  renderChatTemplate(report);
  renderMetadataTable(report.metadata ?? []);
  tensorTable ??= new TensorTable(document.getElementById('tensors-section'));
  tensorTable.setTensors(report.tensors ?? [], colors);
}
