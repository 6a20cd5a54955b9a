import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Request } from 'express';
import busboy from 'busboy';
import jpeg from 'jpeg-js';
import { PNG } from 'pngjs';
import { ApiError, invalidParams } from '../http/errors';

/**
 * Attachments: multipart upload, type from the bytes (never the name or the declared type),
 * stored under DATA_DIR/chat-attachments with random names, metadata in chat_attachments.
 * PNG and JPEG images get a 250 px thumbnail (pure JavaScript: pngjs, jpeg-js); GIF and WebP
 * get width and height but no thumbnail (thumbnail_url null: clients show an icon).
 */
export const THUMBNAIL_SIZE = 250;
/** Images larger than this (pixels) are stored but not decoded for a thumbnail. */
const MAX_THUMBNAIL_SOURCE_PIXELS = 40_000_000;

export interface Sniffed {
  mime: string;
  width: number | null;
  height: number | null;
}

export const ALLOWED_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp', 'application/pdf', 'text/plain'] as const;

function jpegSize(b: Buffer): { width: number; height: number } | null {
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
  return null;
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

function isPlainText(b: Buffer): boolean {
  if (b.length === 0) return false;
  try {
    const text = new TextDecoder('utf-8', { fatal: true }).decode(b);
    // No control characters but tab, line feed, carriage return, form feed.
    return !/[\u0000-\u0008\u000b\u000e-\u001f\u007f]/.test(text);
  } catch {
    return false;
  }
}

/** The file's type from its first bytes; null when it is not on the allow-list. */
export function sniff(b: Buffer): Sniffed | null {
  if (b.length >= 24 && b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) && b.toString('ascii', 12, 16) === 'IHDR') {
    return { mime: 'image/png', width: b.readUInt32BE(16), height: b.readUInt32BE(20) };
  }
  if (b.length >= 4 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) {
    const size = jpegSize(b);
    return size ? { mime: 'image/jpeg', ...size } : null;
  }
  if (b.length >= 10 && (b.toString('ascii', 0, 6) === 'GIF87a' || b.toString('ascii', 0, 6) === 'GIF89a')) {
    return { mime: 'image/gif', width: b.readUInt16LE(6), height: b.readUInt16LE(8) };
  }
  if (b.length >= 16 && b.toString('ascii', 0, 4) === 'RIFF' && b.toString('ascii', 8, 12) === 'WEBP') {
    const size = webpSize(b);
    return size ? { mime: 'image/webp', ...size } : null;
  }
  if (b.length >= 5 && b.toString('ascii', 0, 5) === '%PDF-') return { mime: 'application/pdf', width: null, height: null };
  if (isPlainText(b)) return { mime: 'text/plain', width: null, height: null };
  return null;
}

/** Box-filter downscale of RGBA pixels so the longer side is at most THUMBNAIL_SIZE. */
function downscale(src: Uint8Array | Buffer, w: number, h: number): { data: Buffer; width: number; height: number } {
  const scale = Math.min(1, THUMBNAIL_SIZE / Math.max(w, h));
  const tw = Math.max(1, Math.round(w * scale));
  const th = Math.max(1, Math.round(h * scale));
  const out = Buffer.alloc(tw * th * 4);
  for (let y = 0; y < th; y++) {
    const y0 = Math.floor((y * h) / th);
    const y1 = Math.max(y0 + 1, Math.floor(((y + 1) * h) / th));
    for (let x = 0; x < tw; x++) {
      const x0 = Math.floor((x * w) / tw);
      const x1 = Math.max(x0 + 1, Math.floor(((x + 1) * w) / tw));
      const acc = [0, 0, 0, 0];
      let n = 0;
      // Sample at most 4x4 source pixels per target pixel (enough for a thumbnail).
      const sy = Math.max(1, Math.floor((y1 - y0) / 4));
      const sx = Math.max(1, Math.floor((x1 - x0) / 4));
      for (let yy = y0; yy < y1; yy += sy) {
        for (let xx = x0; xx < x1; xx += sx) {
          const i = (yy * w + xx) * 4;
          acc[0] += src[i];
          acc[1] += src[i + 1];
          acc[2] += src[i + 2];
          acc[3] += src[i + 3];
          n++;
        }
      }
      const o = (y * tw + x) * 4;
      for (let c = 0; c < 4; c++) out[o + c] = Math.round(acc[c] / n);
    }
  }
  return { data: out, width: tw, height: th };
}

/** A PNG thumbnail of a PNG or JPEG image, or null. */
export function thumbnail(b: Buffer, s: Sniffed): Buffer | null {
  if (!s.width || !s.height || s.width * s.height > MAX_THUMBNAIL_SOURCE_PIXELS) return null;
  try {
    let rgba: { data: Uint8Array | Buffer; width: number; height: number };
    if (s.mime === 'image/png') rgba = PNG.sync.read(b);
    else if (s.mime === 'image/jpeg') rgba = jpeg.decode(b, { useTArray: true, formatAsRGBA: true, maxMemoryUsageInMB: 256, maxResolutionInMP: 40 });
    else return null;
    const small = downscale(rgba.data, rgba.width, rgba.height);
    const png = new PNG({ width: small.width, height: small.height });
    small.data.copy(png.data);
    return PNG.sync.write(png);
  } catch {
    return null;
  }
}

export interface UploadedFile {
  name: string;
  bytes: Buffer;
  caption: string | null;
}

/** Reads one multipart file (field `file`) and an optional `message` field, within `maxBytes`. */
export function readMultipart(req: Request, maxBytes: number): Promise<UploadedFile> {
  return new Promise((resolve, reject) => {
    const type = req.headers['content-type'] ?? '';
    if (!/^multipart\/form-data/i.test(type)) {
      reject(new ApiError(415, 'chat_attachment_not_multipart', 'Send the file as multipart/form-data, in the field "file".'));
      return;
    }
    const tooLarge = () => new ApiError(413, 'chat_attachment_too_large', `The file is larger than the limit of ${maxBytes} bytes.`, { limit: maxBytes });
    const declared = Number(req.headers['content-length']);
    // The body holds the file plus a little framing; far above the limit is refused unread.
    if (Number.isFinite(declared) && declared > maxBytes + 64 * 1024) {
      req.resume();
      reject(tooLarge());
      return;
    }
    let bb: busboy.Busboy;
    try {
      bb = busboy({ headers: req.headers, limits: { fileSize: maxBytes + 1, files: 1, fields: 5, fieldSize: 10_000, parts: 10 } });
    } catch {
      reject(invalidParams({ file: 'The multipart body could not be read.' }));
      return;
    }
    let file: { name: string; chunks: Buffer[]; truncated: boolean } | null = null;
    let caption: string | null = null;
    let failed = false;
    const fail = (err: ApiError) => {
      if (failed) return;
      failed = true;
      req.unpipe(bb);
      req.resume();
      if (file) file.chunks.length = 0;
      reject(err);
    };
    bb.on('file', (field, stream, info) => {
      if (field !== 'file' || file) {
        stream.resume();
        return;
      }
      const current = { name: info.filename ?? 'file', chunks: [] as Buffer[], truncated: false };
      file = current;
      stream.on('data', (c: Buffer) => current.chunks.push(c));
      stream.on('limit', () => {
        current.truncated = true;
        fail(tooLarge());
      });
    });
    bb.on('field', (name, value) => {
      if (name === 'message') caption = value;
    });
    bb.on('error', () => fail(invalidParams({ file: 'The multipart body could not be read.' })));
    // A client that goes away mid-body: busboy never sees the end, so give up here (nothing has
    // been written yet; the chunks read so far are dropped with the request).
    const aborted = () => {
      if (!req.complete) fail(new ApiError(400, 'chat_attachment_aborted', 'The upload was interrupted before the whole file arrived.'));
    };
    req.on('close', aborted);
    req.on('error', aborted);
    bb.on('close', () => {
      if (failed) return;
      const f = file as { name: string; chunks: Buffer[]; truncated: boolean } | null;
      if (!f) return fail(invalidParams({ file: 'file is required (a multipart field named "file").' }));
      const bytes = Buffer.concat(f.chunks);
      // busboy stops one byte past the limit: anything above it is refused.
      if (f.truncated || bytes.length > maxBytes) return fail(tooLarge());
      resolve({ name: f.name, bytes, caption });
    });
    req.pipe(bb);
  });
}

/** A file name that is safe to show and to put in Content-Disposition. */
export function cleanName(name: string): string {
  const base = name.split(/[\\/]/).pop() ?? '';
  const cleaned = base.replace(/[\u0000-\u001f\u007f"]/g, '').trim().slice(0, 200);
  return cleaned || 'file';
}

export class AttachmentStorage {
  readonly dir: string;

  constructor(dataDir: string) {
    this.dir = path.resolve(dataDir, 'chat-attachments');
  }

  static newName(): string {
    return crypto.randomBytes(16).toString('hex');
  }

  /** Only names we generate (32 hex digits) map to a path, always inside the folder. */
  pathOf(storageName: string): string {
    if (!/^[a-f0-9]{32}$/.test(storageName)) throw new Error('bad storage name');
    const p = path.join(this.dir, storageName.slice(0, 2), storageName);
    if (!p.startsWith(this.dir + path.sep)) throw new Error('bad storage name');
    return p;
  }

  async write(storageName: string, bytes: Buffer): Promise<void> {
    const p = this.pathOf(storageName);
    await fs.promises.mkdir(path.dirname(p), { recursive: true });
    await fs.promises.writeFile(p, bytes, { flag: 'wx', mode: 0o600 });
  }

  async remove(storageName: string): Promise<void> {
    await fs.promises.rm(this.pathOf(storageName), { force: true });
  }
}
