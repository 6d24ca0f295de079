// The engine's side of the wasm boundary (src/web/): what a wasm-bindgen glue file,
// lib/pkg*/inferno.js, exports, as the worker and the bench pages use it. The glue is a build
// output (and has no types of its own: build.sh runs wasm-bindgen --no-typescript), so the type
// check reads this instead of it (www/tsconfig.json: noResolve). Values the engine hands back
// through serde are described as the worker reads them after toPlain().

declare module '*/inferno.js' {
  /** Fetches and instantiates the wasm; its instance's exports (`memory` among them). */
  export default function init(): Promise<{ memory: WebAssembly.Memory }>;
  /** Threaded builds only: starts `helpers` pool workers sharing the memory. */
  export function initThreadPool(helpers: number): Promise<void>;
  export function engine_info(): EngineFacts;
  export function inspect_prefix(prefix: Uint8Array, fileSize: number, memory64: boolean): InspectStatus;
  export function inspect_shards(
    prefixes: Uint8Array[],
    sizes: number[],
    memory64: boolean,
  ): Record<string, unknown>;
  /** A split model's shard URLs when `url` names one of them (NAME-00001-of-00003.gguf). */
  export function shard_names(url: string): string[] | undefined;
  /** The size and format a picture file's header claims, within the caps (else it throws
   *  bad_image or image_too_large): checked before the browser decodes it. */
  export function picture_header(bytes: Uint8Array): { format: string; width: number; height: number };
  /** Throws bad_request where the projector file `bytes` refuses these limits on a picture's
   *  rows (each undefined: its own), bad_projector where it is no projector: checked before a
   *  load frees the model loaded. */
  export function check_image_tokens(bytes: Uint8Array, min_tokens?: number, max_tokens?: number): void;
  /** 'memory32' or 'memory64'; throws too_large for a file no build can hold. */
  export function memory_for_model(size: number, memory64: boolean): string;
  /** Not in the 64-bit-memory builds (no GPU backend there). */
  export const request_gpu: (() => Promise<WebGpu>) | undefined;
  /** Test builds only (the crate's `test-hooks` feature): traps on purpose. */
  export const deliberate_trap: (() => void) | undefined;
  /** Reads `bytes` of memory with SIMD128 loads (the bench pages' memory bandwidth). */
  export class ReadProbe {
    constructor(bytes: number);
    read(passes: number): number;
    free(): void;
  }

  export interface EngineFacts {
    version: string;
    simd128: boolean;
    relaxed_simd: boolean;
    threads: number;
    defaults: { sampling: import('../lib/inferno.js').SamplingSettings; context_cap: number };
  }

  export type InspectStatus =
    { status: 'complete'; report: Record<string, unknown> } | { status: 'need_more'; at_least: number };

  export class ModelLoader {
    constructor(size: number);
    push(chunk: Uint8Array): void;
    next_file(size: number): void;
    /** Consumes the loader, even when it throws. */
    finish(): WebEngine;
    free(): void;
  }

  /** Not in the 64-bit-memory builds: a file whose weights stream straight to `gpu`. */
  export class GpuModelLoader {
    constructor(gpu: WebGpu, size: number);
    push(chunk: Uint8Array): void;
    next_file(size: number): void;
    received(): number;
    held_bytes(): number;
    /** Consumes the loader, even when it throws: an engine on that GPU only. */
    finish(): WebEngine;
    free(): void;
  }

  export class WebGpu {
    facts(): { lost: boolean } & Record<string, unknown>;
    destroy(): void;
  }

  export interface StepOutput {
    token: number;
    text: string;
    piece: string;
    piece_bytes: number[];
    end_of_generation: boolean;
    context_full: boolean;
    trace: import('../lib/inferno.js').StepTrace | null;
  }

  export interface Prepared {
    prompt_tokens: number;
    context_size: number;
    structured: boolean;
  }

  export interface PrefillPart {
    reused: number;
    evaluated: number;
    remaining: number;
    context_used: number;
  }

  export interface EmbedOptions {
    pooling?: string;
    dimensions?: number;
    normalize?: boolean;
  }

  export class WebEngine {
    info(): Omit<
      import('../lib/inferno.js').ModelInfo,
      | 'name'
      | 'size'
      | 'source'
      | 'shards'
      | 'download'
      | 'threads'
      | 'memory64'
      | 'device'
      | 'precision'
      | 'cache_type_k'
      | 'cache_type_v'
    >;
    inspect(): Record<string, unknown>;
    embed(
      texts: string[],
      options: EmbedOptions,
    ): { vectors: Float32Array[]; prompt_tokens: number; pooling: string };
    plan_embedding(texts: string[], options: EmbedOptions): Uint32Array;
    tokenize(text: string, addSpecial?: boolean, parseSpecial?: boolean): Uint32Array;
    detokenize(ids: Uint32Array, renderSpecial?: boolean): string;
    /** An answer to a chat or a plain prompt, or a branch of the last answer; `next_events`
     *  runs it one part at a time (src/engine/generation.rs). */
    start_chat(request: object): void;
    /** A vision projector beside the model: its facts, or a typed refusal (mmproj_mismatch...). */
    attach_projector(
      bytes: Uint8Array,
      min_tokens: number | undefined,
      max_tokens: number | undefined,
    ): import('../lib/inferno.js').ProjectorFacts;
    /** A picture for the next start_chat (RGBA), laid out: the squares the projector has to
     *  encode (0 when it encoded this picture before). */
    add_image(width: number, height: number, rgba: Uint8Array): number;
    /** Encodes the next square of the picture add_image began: how many are left. On the GPU
     *  the square is submitted (counted as done) and the next call or finish_image collects it:
     *  await pending() first. */
    encode_square(): number;
    /** Adds the picture whose squares are encoded: its rows of embeddings in the prompt. */
    finish_image(): number;
    clear_images(): void;
    /** The projector's encoder runs so far (a picture seen before is not encoded again). */
    images_encoded(): number;
    start_text(request: object): void;
    start_branch(request: object): void;
    next_events(): import('../lib/protocol.js').AnswerEvent[];
    stop_answer(): void;
    /** The cache brought to exactly `tokens` (no template): the benchmark's and the device probe's prompt. */
    prepare_tokens(
      tokens: Uint32Array,
      context?: number,
    ): PrefillPart & { prompt_tokens: number; context_size: number };
    step(traceTop: number, forced?: number): StepOutput;
    context_used(): number;
    replayed(): number;
    solo_steps(): number;
    checkpoints(): { held: number; most: number; bytes_each: number };
    use_gpu(gpu: WebGpu): void;
    open_session(context?: number): void;
    use_cpu(): void;
    /** Runs the pending token; true when its logits arrive later (the GPU: await pending()). */
    advance(): boolean;
    /** Settles when the GPU has done what the last advance, prefill or encode_square submitted. */
    pending(): Promise<void> | undefined;
    reset(): void;
    decode_weight_bytes(): number;
    /** Attention's precision on the CPU from the next pass on: 'fast' (f32, the default) or
     *  'exact' (F16, llama.cpp's bits); anything else throws bad_request. */
    set_attention_precision(name: 'fast' | 'exact'): void;
    attention_precision(): 'fast' | 'exact';
    /** What sessions made from now on keep their cached keys and values as (llama.cpp's
     *  -ctk/-ctv); the session is made anew. Anything else throws bad_request; other than F16 on
     *  the GPU, gpu_unsupported; Q8_0 for heads that are not whole blocks, unfit_cache_type. */
    set_cache_types(
      keys: import('../lib/inferno.js').CacheType,
      values: import('../lib/inferno.js').CacheType,
    ): void;
    /** [keys, values]. */
    cache_types(): [import('../lib/inferno.js').CacheType, import('../lib/inferno.js').CacheType];
    /** Bytes of the session's KV cache (and recurrent state) in the wasm memory; 0 on the GPU. */
    cache_bytes(): number;
    free(): void;
  }
}
