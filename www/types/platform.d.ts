// What the browsers offer that TypeScript's DOM types leave out (or keep to workers), as far as
// the front end uses it.

interface Navigator {
  /** WebGPU, where the browser has it. */
  readonly gpu?: {
    requestAdapter(options?: { powerPreference?: string }): Promise<WebGpuAdapter | null>;
  };
}

interface WebGpuAdapter {
  readonly info?: WebGpuAdapterInfo;
  readonly features: ReadonlySet<string>;
  readonly limits: Record<string, number>;
}

interface WebGpuAdapterInfo {
  vendor?: string;
  architecture?: string;
  description?: string;
  isFallbackAdapter?: boolean;
}

interface FileSystemFileHandle {
  /** Workers only (the engine's worker writes downloads through it). */
  createSyncAccessHandle(): Promise<FileSystemSyncAccessHandle>;
  /** Chromium and Firefox; not in the standard's IDL yet. */
  move?(name: string): Promise<void>;
  move?(directory: FileSystemDirectoryHandle, name: string): Promise<void>;
}

interface FileSystemSyncAccessHandle {
  read(buffer: ArrayBufferView, options?: { at?: number }): number;
  write(buffer: ArrayBufferView, options?: { at?: number }): number;
  truncate(size: number): void;
  getSize(): number;
  flush(): void;
  close(): void;
}

interface Window {
  /** The bench pages' result, read by scripts/bench.mjs. */
  __result?: unknown;
}
