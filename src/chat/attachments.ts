import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Transform, type Readable, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import busboy from 'busboy';
import type { Request } from 'express';
import type SharpFunction from 'sharp';
import { ApiError, invalidParams } from '../http/errors';
import type { ObjectStorage } from '../infra/object-storage';

/**
 * Attachments: multipart upload streamed to a temporary file, type from the bytes (never the name or the
 * declared type), stored in the shared object storage under chat-attachments/ with random names,
 * metadata in chat_attachments. Images get a 250 px PNG thumbnail made by sharp (libvips) within a budget.
 */
export const THUMBNAIL_SIZE = 250;
/** The longest caption (the `message` field), in characters. */
export const MAX_CAPTION_CHARS = 10_000;
/** The first bytes of a file, kept for sniffing its type (the rest goes straight to disk). */
const HEAD_BYTES = 64 * 1024;

export interface Sniffed {
  mime: string;
  /** From the header; null for a JPEG whose size is further in than the bytes kept. */
  width: number | null;
  height: number | null;
  /** An Adam7-interlaced PNG (never thumbnailed, see Thumbnailer). */
  interlaced?: boolean;
}

export const ALLOWED_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp', 'application/pdf', 'text/plain'] as const;

/** The extensions a stored name may keep for each type; the first is the one given otherwise. */
const EXTENSIONS: Record<string, string[]> = {
  'image/png': ['png'],
  'image/jpeg': ['jpg', 'jpeg'],
  'image/gif': ['gif'],
  'image/webp': ['webp'],
  'application/pdf': ['pdf'],
  'text/plain': ['txt', 'log'],
};

export const typeNotAllowed = () =>
  new ApiError(415, 'chat_attachment_type_not_allowed', `The file's content is not one of the allowed types: ${ALLOWED_TYPES.join(', ')} (the type is read from the bytes, not the name).`, {
    allowed_types: [...ALLOWED_TYPES],
  });

const tooLarge = (maxBytes: number) => new ApiError(413, 'chat_attachment_too_large', `The file is larger than the limit of ${maxBytes} bytes.`, { limit: maxBytes });

/** The JPEG's size from its SOF marker; undefined when `b` ends before it. */
function jpegSize(b: Buffer): { width: number; height: number } | null | undefined {
  let i = 2;
  while (i + 9 < b.length) {
    if (b[i] !== 0xff) return null;
    const marker = b[i + 1];
    if (marker === 0xd8 || (marker >= 0xd0 && marker <= 0xd7) || marker === 0x01) {
      i += 2;
      continue;
    }
    const len = b.readUInt16BE(i + 2);
    // SOF0..SOF15 except DHT (C4), JPG (C8), DAC (CC)
    if (marker >= 0xc0 && marker <= 0xcf && ![0xc4, 0xc8, 0xcc].includes(marker)) {
      return { height: b.readUInt16BE(i + 5), width: b.readUInt16BE(i + 7) };
    }
    i += 2 + len;
  }
  return undefined;
}

function webpSize(b: Buffer): { width: number; height: number } | null {
  const chunk = b.toString('ascii', 12, 16);
  if (chunk === 'VP8 ' && b.length >= 30) return { width: b.readUInt16LE(26) & 0x3fff, height: b.readUInt16LE(28) & 0x3fff };
  if (chunk === 'VP8L' && b.length >= 25) {
    const bits = b.readUInt32LE(21);
    return { width: (bits & 0x3fff) + 1, height: ((bits >> 14) & 0x3fff) + 1 };
  }
  if (chunk === 'VP8X' && b.length >= 30) return { width: b.readUIntLE(24, 3) + 1, height: b.readUIntLE(27, 3) + 1 };
  return null;
}

/**
 * A binary type from the first bytes of a file (`whole`: they are the whole file), or null.
 * UTF-8 text is recognised by TextCheck over the whole file instead.
 */
function sniffBinary(head: Buffer, whole: boolean): Sniffed | null {
  if (head.length >= 29 && head.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) && head.toString('ascii', 12, 16) === 'IHDR') {
    return { mime: 'image/png', width: head.readUInt32BE(16), height: head.readUInt32BE(20), interlaced: head[28] === 1 };
  }
  if (head.length >= 4 && head[0] === 0xff && head[1] === 0xd8 && head[2] === 0xff) {
    const size = jpegSize(head);
    if (size) return { mime: 'image/jpeg', ...size };
    // The size may lie past the bytes kept (large EXIF/XMP segments): read from the file later.
    return size === undefined && !whole ? { mime: 'image/jpeg', width: null, height: null } : null;
  }
  if (head.length >= 10 && (head.toString('ascii', 0, 6) === 'GIF87a' || head.toString('ascii', 0, 6) === 'GIF89a')) {
    return { mime: 'image/gif', width: head.readUInt16LE(6), height: head.readUInt16LE(8) };
  }
  if (head.length >= 16 && head.toString('ascii', 0, 4) === 'RIFF' && head.toString('ascii', 8, 12) === 'WEBP') {
    const size = webpSize(head);
    return size ? { mime: 'image/webp', ...size } : null;
  }
  if (head.length >= 5 && head.toString('ascii', 0, 5) === '%PDF-') return { mime: 'application/pdf', width: null, height: null };
  return null;
}

/** UTF-8 text without control characters (but tab, line feed, carriage return, form feed), checked chunk by chunk. */
class TextCheck {
  private readonly decoder = new TextDecoder('utf-8', { fatal: true });
  ok = true;

  push(chunk: Buffer, last = false): void {
    if (!this.ok) return;
    try {
      // stream: a character split across chunks is completed by the next one.
      if (/[\u0000-\u0008\u000b\u000e-\u001f\u007f]/.test(this.decoder.decode(chunk, { stream: !last }))) this.ok = false;
    } catch {
      this.ok = false;
    }
  }
}

const TEXT: Sniffed = { mime: 'text/plain', width: null, height: null };

/** The type of a whole file held in memory; null when it is not on the allow-list. */
export function sniff(b: Buffer): Sniffed | null {
  const binary = sniffBinary(b, true);
  if (binary) return binary;
  const text = new TextCheck();
  text.push(b, true);
  return text.ok && b.length > 0 ? TEXT : null;
}

export interface Inspected {
  size: number;
  sha256: string;
  sniffed: Sniffed | null;
}

/**
 * Passes a file through on its way to disk: counts it against the size limit, hashes it, keeps
 * its first bytes to sniff the type and checks it as text, failing as soon as it is too large or
 * can be none of the allowed types.
 */
class ContentInspector extends Transform {
  private size = 0;
  private readonly hash = crypto.createHash('sha256');
  /** The first bytes, until HEAD_BYTES have come and the type is sniffed from them. */
  private head: Buffer[] | null = [];
  private headBytes = 0;
  private binary: Sniffed | null = null;
  private readonly text = new TextCheck();
  result: Inspected | null = null;

  constructor(private readonly maxBytes: number) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.size += chunk.length;
    if (this.size > this.maxBytes) return done(tooLarge(this.maxBytes));
    this.hash.update(chunk);
    if (this.head) {
      this.head.push(chunk.subarray(0, HEAD_BYTES - this.headBytes));
      this.headBytes = Math.min(HEAD_BYTES, this.headBytes + chunk.length);
      if (this.headBytes === HEAD_BYTES) {
        this.binary = sniffBinary(Buffer.concat(this.head), false);
        this.head = null;
      }
    }
    if (!this.binary) {
      this.text.push(chunk);
      // Neither a known binary type nor text: refused before the rest is read.
      if (!this.head && !this.text.ok) return done(typeNotAllowed());
    }
    done(null, chunk);
  }

  override _flush(done: TransformCallback): void {
    let sniffed: Sniffed | null;
    if (this.head) sniffed = sniff(Buffer.concat(this.head)); // the whole file
    else {
      this.text.push(Buffer.alloc(0), true);
      sniffed = this.binary ?? (this.text.ok ? TEXT : null);
    }
    this.result = { size: this.size, sha256: this.hash.digest('hex'), sniffed };
    done();
  }
}

export interface ReceivedFile extends Inspected {
  sniffed: Sniffed;
  /** The name the uploader gave. */
  name: string;
  storageName: string;
  caption: string | null;
}

/**
 * Reads one multipart file (field `file`) and an optional `message` field, streaming the file to
 * a temporary file (never held whole in memory) within `maxBytes`. Refuses a file of a type not allowed.
 * On any failure (the client going away included) the file is removed before this rejects.
 */
export function receiveFile(req: Request, storage: AttachmentStorage, maxBytes: number): Promise<ReceivedFile> {
  return new Promise((resolve, reject) => {
    const type = req.headers['content-type'] ?? '';
    if (!/^multipart\/form-data/i.test(type)) {
      req.resume();
      reject(new ApiError(415, 'chat_attachment_not_multipart', 'Send the file as multipart/form-data, in the field "file".'));
      return;
    }
    const declared = Number(req.headers['content-length']);
    // The body holds the file plus a little framing; far above the limit is refused unread.
    if (Number.isFinite(declared) && declared > maxBytes + 64 * 1024) {
      req.resume();
      reject(tooLarge(maxBytes));
      return;
    }
    let bb: busboy.Busboy;
    try {
      // One byte over the limit reaches the inspector, which refuses the file. A field is cut at
      // fieldSize bytes: room for the longest caption in 4-byte characters, and a cut one is
      // still over MAX_CAPTION_CHARS, so it is refused rather than stored shortened.
      bb = busboy({ headers: req.headers, limits: { fileSize: maxBytes + 1, files: 1, fields: 5, fieldSize: 4 * MAX_CAPTION_CHARS + 4, parts: 10 } });
    } catch {
      reject(invalidParams({ file: 'The multipart body could not be read.' }));
      return;
    }
    let file: { name: string; storageName: string; inspector: ContentInspector; written: Promise<void> } | null = null;
    let caption: string | null = null;
    let failed = false;
    const stop = new AbortController();
    const fail = (err: unknown) => {
      if (failed) return;
      failed = true;
      req.unpipe(bb);
      req.resume();
      stop.abort();
      const f = file;
      // Removed only once the write has settled: an open still pending would create it again.
      const removed = f ? f.written.catch(() => undefined).then(() => storage.removeTemp(f.storageName)) : Promise.resolve();
      removed.then(() => reject(err), reject);
    };
    bb.on('file', (field, stream, info) => {
      if (field !== 'file' || file) {
        stream.resume();
        return;
      }
      const inspector = new ContentInspector(maxBytes);
      const storageName = AttachmentStorage.newName();
      const written = storage.writeStream(storageName, stream, inspector, stop.signal);
      file = { name: info.filename ?? 'file', storageName, inspector, written };
      written.catch(fail);
    });
    bb.on('field', (name, value) => {
      if (name === 'message') caption = value;
    });
    bb.on('error', () => fail(invalidParams({ file: 'The multipart body could not be read.' })));
    // A client that goes away mid-body: busboy never sees the end, so give up here.
    const aborted = () => {
      if (!req.complete) fail(new ApiError(400, 'chat_attachment_aborted', 'The upload was interrupted before the whole file arrived.'));
    };
    req.on('close', aborted);
    req.on('error', aborted);
    bb.on('close', () => {
      if (failed) return;
      const f = file as typeof file;
      if (!f) return fail(invalidParams({ file: 'file is required (a multipart field named "file").' }));
      f.written.then(() => {
        if (failed) return;
        const r = f.inspector.result!;
        if (!r.sniffed) return fail(typeNotAllowed());
        resolve({ ...r, sniffed: r.sniffed, name: f.name, storageName: f.storageName, caption });
      }, fail);
    });
    req.pipe(bb);
  });
}

/** A file name that is safe to show and to put in Content-Disposition. */
function cleanName(name: string): string {
  const base = name.split(/[\\/]/).pop() ?? '';
  const cleaned = base
    .replace(/[\u0000-\u001f\u007f"]/g, '')
    .replace(/[\s.]+$/, '')
    .trim()
    .slice(0, 200);
  return cleaned || 'file';
}

/**
 * The name a file is stored and served under: its extension is the detected type's, whatever the
 * uploader called it (a GIF-prefixed page named invoice.html becomes invoice.gif), so saving it
 * never makes the system open it as something else.
 */
export function fileName(name: string, mime: string): string {
  const clean = cleanName(name);
  const allowed = EXTENSIONS[mime] ?? ['bin'];
  const dot = clean.lastIndexOf('.');
  const ext = dot > 0 ? clean.slice(dot + 1).toLowerCase() : '';
  if (allowed.includes(ext)) return clean;
  return `${dot > 0 ? clean.slice(0, dot) : clean}.${allowed[0]}`;
}

/**
 * Where attachments live: objects `chat-attachments/<2 hex>/<32 hex>` of the shared object
 * storage (with the local driver, the same files under DATA_DIR as before it existed). An upload
 * is first streamed to a file of this process (DATA_DIR/tmp/chat-uploads: sniffed, counted,
 * decoded for its thumbnail there, and sent to the store with its length known), then stored.
 */
export class AttachmentStorage {
  readonly tmpDir: string;

  constructor(
    readonly objects: ObjectStorage,
    dataDir: string,
  ) {
    this.tmpDir = path.resolve(dataDir, 'tmp', 'chat-uploads');
  }

  static newName(): string {
    return crypto.randomBytes(16).toString('hex');
  }

  static isName(storageName: string): boolean {
    return /^[a-f0-9]{32}$/.test(storageName);
  }

  /** Only names we generate (32 hex digits) map to a key. */
  keyOf(storageName: string): string {
    if (!AttachmentStorage.isName(storageName)) throw new Error('bad storage name');
    return `chat-attachments/${storageName.slice(0, 2)}/${storageName}`;
  }

  /** The upload's file in this process, until it is stored. */
  tempPath(storageName: string): string {
    this.keyOf(storageName);
    return path.join(this.tmpDir, storageName);
  }

  /** Streams `source` through `through` into a new temporary file (never an existing one), until `signal` aborts. */
  async writeStream(storageName: string, source: Readable, through: Transform, signal: AbortSignal): Promise<void> {
    const p = this.tempPath(storageName);
    await fs.promises.mkdir(this.tmpDir, { recursive: true, mode: 0o700 });
    await pipeline(source, through, fs.createWriteStream(p, { flags: 'wx', mode: 0o600 }), { signal });
  }

  /** The received file into the store (streamed from its temporary file; the local driver moves it in). */
  async store(storageName: string, contentType: string): Promise<void> {
    await this.objects.putFile(this.keyOf(storageName), this.tempPath(storageName), { contentType, move: true });
  }

  /**
   * Removes temporary files older than `maxAgeMs`: uploads a process did not finish (it was
   * killed mid-upload). Each process sweeps its own DATA_DIR when it starts; an upload still
   * in flight is far younger than the age used.
   */
  async sweepTemp(maxAgeMs: number): Promise<number> {
    let names: string[];
    try {
      names = await fs.promises.readdir(this.tmpDir);
    } catch {
      return 0;
    }
    let removed = 0;
    for (const name of names) {
      const p = path.join(this.tmpDir, name);
      const stat = await fs.promises.stat(p).catch(() => null);
      if (stat?.isFile() && Date.now() - stat.mtimeMs > maxAgeMs) {
        await fs.promises.rm(p, { force: true });
        removed++;
      }
    }
    return removed;
  }

  async write(storageName: string, bytes: Buffer, contentType: string): Promise<void> {
    await this.objects.put(this.keyOf(storageName), bytes, { contentType });
  }

  async removeTemp(storageName: string): Promise<void> {
    await fs.promises.rm(this.tempPath(storageName), { force: true });
  }

  /** The temporary file and the stored object, whichever exist. */
  async remove(storageName: string): Promise<void> {
    await this.removeTemp(storageName);
    await this.objects.delete(this.keyOf(storageName));
  }
}

type Sharp = typeof SharpFunction;
let sharpModule: Sharp | undefined;
/** sharp (libvips: about 18 MB resident) is loaded by the first image, not when the process starts. */
function sharp(...args: Parameters<Sharp>): ReturnType<Sharp> {
  if (!sharpModule) {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    sharpModule = require('sharp') as Sharp;
    // libvips' operation cache would keep decoded uploads in memory after use.
    sharpModule.cache(false);
    // One libvips thread per image: the Thumbnailer's semaphore alone says how many images are decoded at once.
    sharpModule.concurrency(1);
  }
  return sharpModule(...args);
}

/** An image's width and height from its header (libvips reads no pixels for this). */
export async function imageSize(file: string): Promise<{ width: number; height: number } | null> {
  try {
    const m = await sharp(file).metadata();
    return m.width && m.height ? { width: m.width, height: m.height } : null;
  } catch {
    return null;
  }
}

export interface ThumbnailBudget {
  /** Files larger than this are not decoded. */
  maxBytes: number;
  /** Images with more pixels (header, then libvips' limitInputPixels) are not decoded. */
  maxPixels: number;
  /** libvips gives up after this long. */
  timeoutSeconds: number;
  /** Thumbnails made at once in this process; an upload finding all taken gets none. */
  concurrency: number;
}

export type ThumbnailOutcome = { png: Buffer } | { skipped: 'type' | 'interlaced' | 'bytes' | 'pixels' | 'busy' | 'timeout' | 'unreadable' };

/**
 * Thumbnails with sharp (libvips): decoded on libuv's thread pool, not the event loop that the
 * API and the worker share; read top to bottom (sequentialRead) and shrunk while loading where the
 * format allows (JPEG, WebP), within a budget of input bytes, pixels and time.
 *
 * Adam7-interlaced PNGs get none: they cannot be read top to bottom, so libvips would decode the
 * whole image (up to 8 bytes a pixel at 16 bits) before shrinking it; screenshot tools, browsers
 * and cameras do not write them, and they are the shape of the reported decompression bomb.
 * Other images decoded whole (progressive JPEG, GIF, lossless WebP) cost about 4 bytes a pixel,
 * which the pixel budget bounds.
 *
 * Beyond `concurrency` thumbnails at once, an upload gets none rather than waiting for one: no
 * queue for a flood to fill, legitimate uploads never wait on an attacker's, and thumbnail_url
 * null is an answer clients already handle (PDF, text).
 */
export class Thumbnailer {
  private busy = 0;

  constructor(private readonly budget: ThumbnailBudget) {}

  async make(file: string, size: number, s: Sniffed): Promise<ThumbnailOutcome> {
    if (!['image/png', 'image/jpeg', 'image/gif', 'image/webp'].includes(s.mime)) return { skipped: 'type' };
    if (s.interlaced) return { skipped: 'interlaced' };
    if (size > this.budget.maxBytes) return { skipped: 'bytes' };
    if (!s.width || !s.height || s.width * s.height > this.budget.maxPixels) return { skipped: 'pixels' };
    if (this.busy >= this.budget.concurrency) return { skipped: 'busy' };
    this.busy++;
    try {
      const png = await sharp(file, { limitInputPixels: this.budget.maxPixels, sequentialRead: true, autoOrient: true })
        .timeout({ seconds: this.budget.timeoutSeconds })
        .resize(THUMBNAIL_SIZE, THUMBNAIL_SIZE, { fit: 'inside', withoutEnlargement: true })
        .png()
        .toBuffer();
      return { png };
    } catch (err) {
      return { skipped: /timeout/i.test((err as Error).message) ? 'timeout' : 'unreadable' };
    } finally {
      this.busy--;
    }
  }
}
