import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type { Config } from '../config';
import type { S3ObjectStorage as S3Storage } from './object-storage-s3';

/**
 * Files that every API and worker replica must see (chat attachments and thumbnails, language
 * packs, tenants' uploads), behind one small interface with two drivers:
 * - `local`: a folder (DATA_DIR), the embedded default of `npm start`; keys are relative paths,
 *   so the files sit where they always did. Only for one host: replicas on other hosts do not
 *   see each other's files.
 * - `s3`: a bucket of an S3-compatible object store (AWS S3, MinIO, Ceph, moto in the tests),
 *   shared by every replica.
 *
 * A key is a relative path of `/`-separated segments (unicode allowed). Keys that could leave
 * the folder or mean something else to a store (`..`, absolute, empty, control characters,
 * backslashes, over 1024 bytes) are refused with InvalidObjectKey before any I/O.
 */

export class InvalidObjectKey extends Error {
  constructor(reason: string) {
    super(`invalid object key: ${reason}`);
    this.name = 'InvalidObjectKey';
  }
}

export class ObjectNotFound extends Error {
  constructor(readonly key: string) {
    super(`object not found: ${key}`);
    this.name = 'ObjectNotFound';
  }
}

/** The range asked for lies past the object's end (HTTP 416); `size` is the object's. */
export class RangeNotSatisfiable extends Error {
  constructor(readonly size: number) {
    super(`range not satisfiable (object of ${size} bytes)`);
    this.name = 'RangeNotSatisfiable';
  }
}

/** Bytes `start`..`end` (inclusive; no end: to the last byte), or the last `suffix` bytes. */
export type RangeRequest = { start: number; end?: number } | { suffix: number };

export interface ObjectInfo {
  size: number;
  contentType: string | null;
}

export interface ObjectRead extends ObjectInfo {
  stream: Readable;
  /** The bytes the stream holds (inclusive), when a range was asked for; else the whole object. */
  range: { start: number; end: number } | null;
}

export interface PutOptions {
  contentType?: string;
}

export interface PutFileOptions extends PutOptions {
  /** The file is the caller's own temporary file: the local driver may move it in rather than copy it. */
  move?: boolean;
}

export interface ObjectStorage {
  readonly driver: 'local' | 's3';
  /** Stores bytes under `key`, replacing what was there; readers see the old or the new object, never half of one. */
  put(key: string, body: Buffer, opts?: PutOptions): Promise<void>;
  /** Stores a local file (streamed, never read whole into memory). */
  putFile(key: string, file: string, opts?: PutFileOptions): Promise<void>;
  /** Reads an object as a stream; ObjectNotFound, RangeNotSatisfiable. */
  get(key: string, opts?: { range?: RangeRequest }): Promise<ObjectRead>;
  /** The object's size and type, or null when there is none. */
  head(key: string): Promise<ObjectInfo | null>;
  /** Removes the object; nothing there is not an error. */
  delete(key: string): Promise<void>;
  /** The keys under `prefix` (a folder: ends with `/`), in no promised order. */
  list(prefix: string): Promise<string[]>;
  copy(from: string, to: string): Promise<void>;
  /** Where a key is, for people (a path, or s3://bucket/key): logs, status answers. */
  locationOf(key: string): string;
  /**
   * Whether the store can be used now (readiness): the folder exists or can be made, and is
   * writable; the bucket answers (HeadBucket). Rejects saying why; gives up after `timeoutMs`.
   */
  check(timeoutMs: number): Promise<void>;
  /** Removes many keys in few requests, where the driver can (s3: 1000 a request); deletePrefix uses it. */
  deleteMany?(keys: string[]): Promise<void>;
  close(): void;
}

/** `work`, or a rejection once `ms` have passed. */
export async function within<T>(ms: number, what: string, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const signal = AbortSignal.timeout(ms);
  return Promise.race([
    work(signal),
    new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(new Error(`${what} did not answer within ${ms} ms`)), { once: true })),
  ]);
}

const MAX_KEY_BYTES = 1024;

/** The key, checked; InvalidObjectKey otherwise. */
export function checkKey(key: string): string {
  if (typeof key !== 'string' || key.length === 0) throw new InvalidObjectKey('empty');
  if (Buffer.byteLength(key, 'utf8') > MAX_KEY_BYTES) throw new InvalidObjectKey(`longer than ${MAX_KEY_BYTES} bytes`);
  if (key.startsWith('/')) throw new InvalidObjectKey('absolute');
  if (key.includes('\\')) throw new InvalidObjectKey('backslash');
  // Control characters (NUL included) and unpaired surrogates have no safe meaning in a path or a URL.
  if (/[\u0000-\u001f\u007f]/.test(key) || /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(key)) throw new InvalidObjectKey('control character or unpaired surrogate');
  for (const segment of key.split('/')) {
    if (segment === '' || segment === '.' || segment === '..') throw new InvalidObjectKey(`segment "${segment}"`);
  }
  return key;
}

/** A folder prefix (`a/b/`), checked as a key but for its trailing slash. */
export function checkPrefix(prefix: string): string {
  if (prefix === '') return '';
  if (!prefix.endsWith('/')) throw new InvalidObjectKey('a prefix ends with "/"');
  checkKey(prefix.slice(0, -1));
  return prefix;
}

/** The inclusive byte range a request means for an object of `size` bytes; RangeNotSatisfiable. */
export function resolveRange(r: RangeRequest, size: number): { start: number; end: number } {
  if ('suffix' in r) {
    if (r.suffix <= 0 || size === 0) throw new RangeNotSatisfiable(size);
    return { start: Math.max(0, size - r.suffix), end: size - 1 };
  }
  if (r.start >= size || (r.end !== undefined && r.end < r.start)) throw new RangeNotSatisfiable(size);
  return { start: r.start, end: Math.min(r.end ?? size - 1, size - 1) };
}

/** A put in progress beside its object (`name.<pid>.<12 hex>.tmp`): never listed. */
const TEMP_NAME = /\.\d+\.[0-9a-f]{12}\.tmp$/;

/** The local driver: a folder; a key is a path relative to it. */
export class LocalObjectStorage implements ObjectStorage {
  readonly driver = 'local' as const;
  readonly root: string;

  constructor(root: string) {
    this.root = path.resolve(root);
  }

  /** The key's path, always inside the folder. */
  pathOf(key: string): string {
    const p = path.join(this.root, ...checkKey(key).split('/'));
    if (!p.startsWith(this.root + path.sep)) throw new InvalidObjectKey('outside the folder');
    return p;
  }

  async check(timeoutMs: number): Promise<void> {
    await within(timeoutMs, `the folder ${this.root}`, async () => {
      await fs.promises.mkdir(this.root, { recursive: true });
      await fs.promises.access(this.root, fs.constants.W_OK);
    });
  }

  private tempBeside(p: string): string {
    return `${p}.${process.pid}.${crypto.randomBytes(6).toString('hex')}.tmp`;
  }


  async put(key: string, body: Buffer): Promise<void> {
    const p = this.pathOf(key);
    await fs.promises.mkdir(path.dirname(p), { recursive: true });
    const tmp = this.tempBeside(p);
    try {
      await fs.promises.writeFile(tmp, body, { flag: 'wx', mode: 0o600 });
      await fs.promises.rename(tmp, p);
    } finally {
      await fs.promises.rm(tmp, { force: true });
    }
  }

  async putFile(key: string, file: string, opts: PutFileOptions = {}): Promise<void> {
    const p = this.pathOf(key);
    await fs.promises.mkdir(path.dirname(p), { recursive: true });
    if (opts.move) {
      try {
        await fs.promises.chmod(file, 0o600);
        await fs.promises.rename(file, p);
        return;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err;
      }
    }
    const tmp = this.tempBeside(p);
    try {
      // Copied beside the target, then renamed: a reader never sees half a file.
      await fs.promises.copyFile(file, tmp);
      await fs.promises.chmod(tmp, 0o600);
      await fs.promises.rename(tmp, p);
    } finally {
      await fs.promises.rm(tmp, { force: true });
    }
  }

  async get(key: string, opts: { range?: RangeRequest } = {}): Promise<ObjectRead> {
    const p = this.pathOf(key);
    let handle: fs.promises.FileHandle;
    try {
      handle = await fs.promises.open(p, 'r');
    } catch (err) {
      if (isMissing(err)) throw new ObjectNotFound(key);
      throw err;
    }
    try {
      // The size of the file this handle reads, even if the path is replaced meanwhile.
      const stat = await handle.stat();
      if (!stat.isFile()) throw new ObjectNotFound(key);
      const range = opts.range ? resolveRange(opts.range, stat.size) : null;
      const stream = handle.createReadStream(range ? { start: range.start, end: range.end } : {});
      return { stream, size: stat.size, contentType: null, range };
    } catch (err) {
      await handle.close();
      throw err;
    }
  }

  async head(key: string): Promise<ObjectInfo | null> {
    try {
      const stat = await fs.promises.stat(this.pathOf(key));
      return stat.isFile() ? { size: stat.size, contentType: null } : null;
    } catch (err) {
      if (isMissing(err)) return null;
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    await fs.promises.rm(this.pathOf(key), { force: true });
  }

  async list(prefix: string): Promise<string[]> {
    const dir = checkPrefix(prefix) === '' ? this.root : this.pathOf(prefix.slice(0, -1));
    let entries: fs.Dirent[];
    try {
      entries = await fs.promises.readdir(dir, { recursive: true, withFileTypes: true });
    } catch (err) {
      if (isMissing(err) || (err as NodeJS.ErrnoException).code === 'ENOTDIR') return [];
      throw err;
    }
    return entries
      .filter((e) => e.isFile() && !TEMP_NAME.test(e.name))
      .map((e) => prefix + path.relative(dir, path.join(e.parentPath, e.name)).split(path.sep).join('/'));
  }

  async copy(from: string, to: string): Promise<void> {
    const src = this.pathOf(from);
    if (!(await this.head(from))) throw new ObjectNotFound(from);
    await this.putFile(to, src);
  }

  locationOf(key: string): string {
    return this.pathOf(key);
  }

  close(): void {}
}

function isMissing(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR' || code === 'EISDIR';
}

/** Removes every object under the folder `prefix` (`a/b/`); with the local driver, the folder itself. */
export async function deletePrefix(storage: ObjectStorage, prefix: string): Promise<void> {
  if (checkPrefix(prefix) === '') throw new InvalidObjectKey('deleting everything is not a prefix');
  if (storage instanceof LocalObjectStorage) return fs.promises.rm(storage.pathOf(prefix.slice(0, -1)), { recursive: true, force: true });
  const keys = await storage.list(prefix);
  if (storage.deleteMany) return storage.deleteMany(keys);
  for (const k of keys) await storage.delete(k);
}

/**
 * Copies every object under the folder `from` to the same names under `to` (replacing what is
 * there). Local: one recursive copy of the folder (special files refused, as fs.cp does); s3:
 * server-side copies.
 */
export async function copyPrefix(storage: ObjectStorage, from: string, to: string): Promise<void> {
  checkPrefix(from);
  checkPrefix(to);
  if (storage instanceof LocalObjectStorage) {
    const src = storage.pathOf(from.slice(0, -1));
    if (!fs.existsSync(src)) return;
    await fs.promises.cp(src, storage.pathOf(to.slice(0, -1)), { recursive: true, force: true });
    return;
  }
  for (const key of await storage.list(from)) await storage.copy(key, to + key.slice(from.length));
}

export interface MoveOptions {
  /** Checked before each entry: an aborted move stops there (throwing the signal's reason), every entry whole in one place. */
  signal?: AbortSignal;
  /** Called after each entry moved (its key under `from`): progress, e.g. an activity's heartbeat. */
  onEntry?: (key: string) => void;
}

/**
 * Moves the folder `from` of one storage into the folder `to` of another of the same driver
 * (an entry already in `to` is replaced), entry by entry, then removes what is left of `from`
 * (empty folders only). An entry is never in neither place, and nothing under `to` is deleted
 * first, so the move is safe to repeat after a failure and safe when a second attempt runs beside
 * the first (an activity retried while its first attempt still runs): what one moved is not
 * under `from` for the other any more, and is skipped. Local: each file renamed into place
 * (atomic; across file systems copied to a temporary name beside its target, renamed into
 * place, then the source removed), `to` created even when there is nothing to move; s3: each
 * object copied, then deleted. An object added under `from` during the move is moved by it or
 * left there, never deleted unmoved.
 */
export async function movePrefix(source: ObjectStorage, from: string, target: ObjectStorage, to: string, opts: MoveOptions = {}): Promise<void> {
  checkPrefix(from);
  checkPrefix(to);
  if (source instanceof LocalObjectStorage && target instanceof LocalObjectStorage) {
    const src = source.pathOf(from.slice(0, -1));
    const dst = target.pathOf(to.slice(0, -1));
    await fs.promises.mkdir(dst, { recursive: true, mode: 0o750 });
    await moveTree(src, dst, from, opts);
    await removeEmptyFolders(src);
    return;
  }
  if (source !== target) throw new Error('movePrefix: both sides must be one storage (s3) or local folders');
  for (const key of await source.list(from)) {
    opts.signal?.throwIfAborted();
    try {
      await source.copy(key, to + key.slice(from.length));
    } catch (err) {
      if (err instanceof ObjectNotFound) continue; // moved by another attempt meanwhile
      throw err;
    }
    await source.delete(key);
    opts.onEntry?.(key);
  }
}

/** The files under `src` moved to the same paths under `dst`, one at a time (see movePrefix). */
async function moveTree(src: string, dst: string, prefix: string, opts: MoveOptions): Promise<void> {
  let entries: fs.Dirent[];
  try {
    entries = await fs.promises.readdir(src, { withFileTypes: true });
  } catch (err) {
    if (isMissing(err)) return; // nothing (left) to move
    throw err;
  }
  for (const entry of entries) {
    opts.signal?.throwIfAborted();
    const from = path.join(src, entry.name);
    const into = path.join(dst, entry.name);
    if (entry.isDirectory()) {
      await fs.promises.mkdir(into, { recursive: true, mode: 0o750 });
      await moveTree(from, into, `${prefix}${entry.name}/`, opts);
      continue;
    }
    if (TEMP_NAME.test(entry.name)) continue; // a write in progress (or left by a crash), not an object
    try {
      await fs.promises.rename(from, into);
    } catch (err) {
      if (isMissing(err)) continue; // moved by another attempt meanwhile
      if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err;
      const temp = `${into}.${process.pid}.${crypto.randomBytes(6).toString('hex')}.tmp`;
      try {
        await fs.promises.copyFile(from, temp);
        await fs.promises.rename(temp, into);
      } catch (copyErr) {
        await fs.promises.rm(temp, { force: true });
        if (isMissing(copyErr)) continue;
        throw copyErr;
      }
      await fs.promises.rm(from, { force: true });
    }
    opts.onEntry?.(`${prefix}${entry.name}`);
  }
}

/** Removes `dir` and the folders under it that are empty; a folder with anything left in it stays. */
async function removeEmptyFolders(dir: string): Promise<void> {
  let entries: fs.Dirent[];
  try {
    entries = await fs.promises.readdir(dir, { withFileTypes: true });
  } catch (err) {
    if (isMissing(err) || (err as NodeJS.ErrnoException).code === 'ENOTDIR') return;
    throw err;
  }
  for (const e of entries) if (e.isDirectory()) await removeEmptyFolders(path.join(dir, e.name));
  try {
    await fs.promises.rmdir(dir);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'ENOTEMPTY' && code !== 'EEXIST' && !isMissing(err)) throw err;
  }
}

/** The storage the configuration names. Built once per process (API and worker) and passed down. */
export function createObjectStorage(
  config: Pick<Config, 'STORAGE_DRIVER' | 'DATA_DIR' | 'S3_BUCKET' | 'S3_PREFIX' | 'S3_ENDPOINT' | 'S3_REGION' | 'S3_ACCESS_KEY_ID' | 'S3_SECRET_ACCESS_KEY' | 'S3_FORCE_PATH_STYLE'>,
): ObjectStorage {
  if (config.STORAGE_DRIVER === 'local') return new LocalObjectStorage(config.DATA_DIR);
  // The AWS SDK (about 4 MiB resident) is loaded by a process that stores in S3, not by every process.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { S3ObjectStorage } = require('./object-storage-s3') as { S3ObjectStorage: typeof S3Storage };
  return new S3ObjectStorage({
    bucket: config.S3_BUCKET!,
    prefix: config.S3_PREFIX,
    endpoint: config.S3_ENDPOINT,
    region: config.S3_REGION,
    credentials: config.S3_ACCESS_KEY_ID && config.S3_SECRET_ACCESS_KEY ? { accessKeyId: config.S3_ACCESS_KEY_ID, secretAccessKey: config.S3_SECRET_ACCESS_KEY } : undefined,
    forcePathStyle: config.S3_FORCE_PATH_STYLE,
  });
}
