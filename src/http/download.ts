import { pipeline } from 'node:stream/promises';
import type { Request, Response } from 'express';
import { ObjectNotFound, RangeNotSatisfiable, type ObjectStorage, type RangeRequest } from '../infra/object-storage';
import { ApiError } from './errors';

/**
 * A single byte range of a `Range` header (`bytes=a-b`, `bytes=a-`, `bytes=-n`), or null to
 * send the whole file: no header, another unit, several ranges or a malformed one (RFC 9110
 * lets a server ignore those), or an `If-Range` that does not match `etag` (the file changed).
 */
export function requestedRange(req: Request, etag?: string): RangeRequest | null {
  const header = req.get('range');
  if (!header) return null;
  const ifRange = req.get('if-range');
  if (ifRange !== undefined && (!etag || ifRange !== etag)) return null;
  const m = /^bytes=(\d{0,15})-(\d{0,15})$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return null;
  if (m[1] === '') return { suffix: Number(m[2]) };
  const start = Number(m[1]);
  if (m[2] === '') return { start };
  const end = Number(m[2]);
  return end < start ? null : { start, end };
}

/** The headers and the 416 answer of a download, for the OpenAPI document. */
export const ACCEPT_RANGES = { description: 'bytes: one byte range may be asked for with Range.', schema: { type: 'string', enum: ['bytes'] } };
export const CONTENT_RANGE = { description: 'The bytes sent and the whole size: `bytes 0-99/5000`.', schema: { type: 'string' } };
export const RANGE_NOT_SATISFIABLE = {
  description: 'The one range asked for starts past the end of the file (`rest_range_not_satisfiable`, `data.size` the file\'s size).',
  schema: { $ref: '#/components/schemas/Error' },
  headers: { 'Content-Range': { description: 'bytes */{size}', schema: { type: 'string' } }, 'Accept-Ranges': ACCEPT_RANGES },
};

export interface SendOptions {
  /** Set once the file is found (content type, disposition, caching); never on an error answer. */
  headers: Record<string, string>;
  /** The strong ETag the caller sends, if any (If-Range compares with it). */
  etag?: string;
  /** The error for a file that is not there. */
  missing: () => ApiError;
}

/**
 * Streams a stored file as the answer (never held whole in memory): 200 with the whole file,
 * or 206 with `Content-Range` for one satisfiable `Range`; 416 (`rest_range_not_satisfiable`,
 * with `Content-Range: bytes *\/size`) for one past the end. `Accept-Ranges: bytes` on both.
 * A read failing mid-stream cuts the connection (the status is already sent).
 */
export async function sendStoredFile(req: Request, res: Response, storage: ObjectStorage, key: string, opts: SendOptions): Promise<void> {
  const range = requestedRange(req, opts.etag);
  let read;
  try {
    read = await storage.get(key, range ? { range } : {});
  } catch (err) {
    if (err instanceof ObjectNotFound) throw opts.missing();
    if (err instanceof RangeNotSatisfiable) {
      throw new ApiError(416, 'rest_range_not_satisfiable', `The range asked for lies outside the file (${err.size} bytes).`, { size: err.size }, { 'Content-Range': `bytes */${err.size}`, 'Accept-Ranges': 'bytes' });
    }
    throw err;
  }
  for (const [k, v] of Object.entries(opts.headers)) res.setHeader(k, v);
  res.setHeader('Accept-Ranges', 'bytes');
  if (read.range) {
    res.status(206);
    res.setHeader('Content-Range', `bytes ${read.range.start}-${read.range.end}/${read.size}`);
    res.setHeader('Content-Length', String(read.range.end - read.range.start + 1));
  } else {
    res.setHeader('Content-Length', String(read.size));
  }
  if (req.method === 'HEAD') {
    read.stream.destroy();
    res.end();
    return;
  }
  try {
    await pipeline(read.stream, res);
  } catch (err) {
    // The client went away (nothing to answer), or the store failed mid-file: cut the answer short.
    if (!res.writableFinished && (err as NodeJS.ErrnoException).code !== 'ERR_STREAM_PREMATURE_CLOSE') req.log.warn({ err, key }, 'stored file read failed');
    res.destroy();
  }
}
