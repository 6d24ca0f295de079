// @ts-check
// Number and size formatting for the inspector. Sizes use decimal units (1 MB = 10^6
// bytes), the convention model cards and download pages use.

const integerFormat = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });

/** 262144 -> "262,144". Strings (integers beyond 2^53) pass through unchanged. */
export function formatInteger(value) {
  if (typeof value === 'string') return value;
  if (typeof value !== 'number' || !Number.isFinite(value)) return '—';
  return integerFormat.format(value);
}

function scaled(value, units, base) {
  let index = 0;
  let scaledValue = value;
  while (Math.abs(scaledValue) >= base && index < units.length - 1) {
    scaledValue /= base;
    index += 1;
  }
  return { scaledValue, unit: units[index], index };
}

/** (1, 'tensor') -> "1 tensor"; (236, 'tensor') -> "236 tensors". */
export function formatQuantity(count, noun) {
  return `${formatInteger(count)} ${count === 1 ? noun : noun + 's'}`;
}

/** 5927296 -> "5.9 MB"; 512 -> "512 B". */
export function formatBytes(bytes) {
  if (typeof bytes !== 'number' || !Number.isFinite(bytes)) return '—';
  const { scaledValue, unit, index } = scaled(bytes, ['B', 'kB', 'MB', 'GB', 'TB'], 1000);
  return index === 0 ? `${scaledValue} B` : `${scaledValue.toFixed(1)} ${unit}`;
}

/** 268098176 -> "268.1 M"; 950 -> "950". */
export function formatCount(count) {
  if (typeof count !== 'number' || !Number.isFinite(count)) return '—';
  const { scaledValue, unit, index } = scaled(count, ['', 'K', 'M', 'B', 'T'], 1000);
  return index === 0 ? String(scaledValue) : `${scaledValue.toFixed(1)} ${unit}`;
}

/** 12.4 -> "12 ms"; 0.42 -> "0.4 ms"; 2300 -> "2.30 s". */
export function formatDuration(ms) {
  if (typeof ms !== 'number' || !Number.isFinite(ms)) return '—';
  if (ms >= 1000) return `${(ms / 1000).toFixed(2)} s`;
  if (ms < 10) return `${ms.toFixed(1)} ms`;
  return `${Math.round(ms)} ms`;
}

/** 0.6123 -> "61.2%". */
export function formatShare(share) {
  if (typeof share !== 'number' || !Number.isFinite(share)) return '—';
  return `${(share * 100).toFixed(1)}%`;
}

/** [640, 1024] -> "640 × 1024". */
export function formatDims(dims) {
  return Array.isArray(dims) && dims.length ? dims.map(formatInteger).join(' × ') : '—';
}

/**
 * GGUF stores many floats as f32, which widen to noisy doubles (1e-6 arrives as
 * 9.999999974752427e-7). Print the shortest decimal that rounds to the same f32.
 */
export function formatFloat32(value) {
  if (!Number.isFinite(value) || Math.fround(value) !== value) return String(value);
  for (let digits = 1; digits < 10; digits++) {
    const candidate = Number(value.toPrecision(digits));
    if (Math.fround(candidate) === value) return String(candidate);
  }
  return String(value);
}

/** A metadata scalar as text, given its GGUF type name ("f32", "u32", "string", ...). */
export function formatScalar(value, type) {
  if (typeof value === 'number' && /^(f32|float32)$/.test(type ?? '')) return formatFloat32(value);
  return typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value);
}

/** Hexadecimal offset, the way hex dumps show it: 5927296 -> "0x5a7180". */
export function formatHex(value) {
  return typeof value === 'number' && Number.isFinite(value) ? `0x${value.toString(16)}` : '—';
}

/** A split model's name from one of its shards' (gguf-split's NAME-00001-of-00003.gguf →
 *  NAME.gguf); other names as they are. */
export function splitModelName(fileName) {
  return fileName.replace(/-\d{5}-of-\d{5}\.gguf$/, '.gguf');
}
