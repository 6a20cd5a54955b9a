import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { GetObjectCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import sharp from 'sharp';
import type { S3ObjectStorage } from '../src/infra/object-storage-s3';
import { bearer, CHAT, expectError, makeAgent, makeSession } from './chat-helpers';
import { createReplica, createTestContext, type TestContext } from './helpers';
import { startMoto, type MotoServer } from './moto-server';

/**
 * Chat attachments with the s3 driver against moto_server on loopback: upload and download
 * (original and thumbnail), byte ranges, and two API replicas with a DATA_DIR each sharing the
 * bucket and the database (a file uploaded through one is downloaded through the other).
 */
describe('support chat: attachments in S3 (moto on loopback)', () => {
  const BUCKET = 'hostflow-chat';
  let moto: MotoServer;
  let ctx: TestContext;
  let dataDir: string;
  let agent: { id: number; token: string };
  const binary = (res: any, cb: any) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => cb(null, Buffer.concat(chunks)));
  };
  const png = (w: number, h: number) => sharp({ create: { width: w, height: h, channels: 4, background: { r: 200, g: 40, b: 90, alpha: 1 } } }).png().toBuffer();
  const bucketKeys = async () => {
    const out = await (ctx.app.locals.storage as S3ObjectStorage).client.send(new ListObjectsV2Command({ Bucket: BUCKET }));
    return (out.Contents ?? []).map((o) => o.Key!);
  };
  const localFiles = (dir: string): string[] => (fs.existsSync(dir) ? (fs.readdirSync(dir, { recursive: true }) as string[]).filter((f) => fs.statSync(path.join(dir, f)).isFile()) : []);

  beforeAll(async () => {
    moto = await startMoto();
    await moto.createBucket(BUCKET);
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hostflow-chat-s3-'));
    ctx = await createTestContext({ DATA_DIR: dataDir, ...moto.env(BUCKET, 'hf/') });
    agent = await makeAgent(ctx, { online: true });
  });
  afterAll(async () => {
    await ctx?.close();
    await moto?.stop();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test('upload: the file and its thumbnail go to the bucket (with their types), nothing stays under DATA_DIR; download streams them back', async () => {
    const s = await makeSession(ctx);
    const bytes = await png(640, 320);
    const res = await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/attachments`).set(bearer(s.token)).attach('file', bytes, { filename: 'shot.png', contentType: 'application/octet-stream' });
    expect(res.status).toBe(201);
    const a = res.body.attachment;
    const row = await ctx.db('chat_attachments').where({ id: a.id }).first();
    const key = `hf/chat-attachments/${row.storage_name.slice(0, 2)}/${row.storage_name}`;
    const thumbKey = `hf/chat-attachments/${row.thumbnail_storage_name.slice(0, 2)}/${row.thumbnail_storage_name}`;
    expect(await bucketKeys()).toEqual(expect.arrayContaining([key, thumbKey]));
    const client = (ctx.app.locals.storage as S3ObjectStorage).client;
    const stored = await client.send(new GetObjectCommand({ Bucket: BUCKET, Key: key }));
    expect(stored.ContentType).toBe('image/png');
    expect(Buffer.compare(Buffer.from(await stored.Body!.transformToByteArray()), bytes)).toBe(0);
    // The upload's temporary file is gone, and no attachment was written locally.
    expect(localFiles(dataDir)).toEqual([]);

    const dl = await ctx.http.get(a.download_url).set(bearer(s.token)).buffer(true).parse(binary);
    expect(dl.status).toBe(200);
    expect(dl.headers).toMatchObject({
      'content-type': 'image/png',
      'content-length': String(bytes.length),
      'accept-ranges': 'bytes',
      'content-disposition': `attachment; filename="shot.png"; filename*=UTF-8''shot.png`,
      'x-content-type-options': 'nosniff',
      'content-security-policy': "default-src 'none'; sandbox",
      'cache-control': 'private, no-store',
    });
    expect(Buffer.compare(dl.body, bytes)).toBe(0);

    const th = await ctx.http.get(a.thumbnail_url).set(bearer(agent.token)).buffer(true).parse(binary);
    expect(th.status).toBe(200);
    expect(th.headers['content-type']).toBe('image/png');
    const m = await sharp(th.body).metadata();
    expect([m.format, m.width, m.height]).toEqual(['png', 250, 125]);

    // The auth rules are the same: another session's customer gets the same 404 as for no attachment.
    const other = await makeSession(ctx);
    expectError(await ctx.http.get(a.download_url).set(bearer(other.token)), 404, 'wu_rest_chat_attachment_invalid_id');
    expectError(await ctx.http.get(a.download_url), 401);
  });

  test('Range: one range answers 206 with the exact bytes and Content-Range; past the end 416; several or malformed ranges the whole file', async () => {
    const s = await makeSession(ctx);
    const bytes = Buffer.from(Array.from({ length: 3000 }, (_, i) => `line ${i}\n`).join('')); // text/plain
    const res = await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/attachments`).set(bearer(s.token)).attach('file', bytes, { filename: 'log.txt', contentType: 'text/plain' });
    expect(res.status).toBe(201);
    const url = res.body.attachment.download_url;
    const get = (range?: string) => {
      const r = ctx.http.get(url).set(bearer(s.token));
      return (range ? r.set('Range', range) : r).buffer(true).parse(binary);
    };
    const size = bytes.length;
    for (const [range, start, end] of [
      ['bytes=100-199', 100, 199],
      ['bytes=0-0', 0, 0],
      [`bytes=${size - 10}-`, size - 10, size - 1],
      ['bytes=-25', size - 25, size - 1],
      [`bytes=${size - 5}-${size + 1000}`, size - 5, size - 1],
    ] as const) {
      const r = await get(range);
      expect(r.status).toBe(206);
      expect(r.headers['content-range']).toBe(`bytes ${start}-${end}/${size}`);
      expect(r.headers['content-length']).toBe(String(end - start + 1));
      expect(r.headers['content-type']).toBe('text/plain; charset=utf-8');
      expect(r.headers['content-disposition']).toContain('filename="log.txt"');
      expect(Buffer.compare(r.body, bytes.subarray(start, end + 1))).toBe(0);
    }
    const past = await ctx.http.get(url).set(bearer(s.token)).set('Range', `bytes=${size}-`);
    expectError(past, 416, 'rest_range_not_satisfiable');
    expect(past.headers['content-range']).toBe(`bytes */${size}`);
    expect(past.headers['content-type']).toMatch(/^application\/json/);
    expect(past.headers['content-disposition']).toBeUndefined();
    for (const ignored of ['bytes=0-1,5-6', 'bytes=abc', 'items=0-5', 'bytes=9-3']) {
      const r = await get(ignored);
      expect(r.status).toBe(200);
      expect(Buffer.compare(r.body, bytes)).toBe(0);
    }
  });

  test('an object missing from the bucket is 404 chat_attachment_missing, not a 500', async () => {
    const s = await makeSession(ctx);
    const res = await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/attachments`).set(bearer(s.token)).attach('file', Buffer.from('gone soon\n'), { filename: 'gone.txt' });
    expect(res.status).toBe(201);
    const row = await ctx.db('chat_attachments').where({ id: res.body.attachment.id }).first();
    await ctx.app.locals.storage.delete(`chat-attachments/${row.storage_name.slice(0, 2)}/${row.storage_name}`);
    expectError(await ctx.http.get(res.body.attachment.download_url).set(bearer(s.token)), 404, 'chat_attachment_missing');
    expectError(await ctx.http.get(res.body.attachment.download_url).set(bearer(s.token)).set('Range', 'bytes=0-3'), 404, 'chat_attachment_missing');
  });

  test('two API replicas, each with its own DATA_DIR, one bucket: uploaded through one, downloaded through the other', async () => {
    const otherDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hostflow-chat-s3-b-'));
    const other = await createReplica(ctx, { DATA_DIR: otherDir });
    try {
      const s = await makeSession(ctx);
      const bytes = crypto.randomBytes(64 * 1024);
      // Bytes that are not text nor an allowed image: a PDF header followed by random bytes.
      const pdf = Buffer.concat([Buffer.from('%PDF-1.7\n'), bytes]);
      const up = await other.http.post(`${CHAT}/chat/sessions/${s.id}/attachments`).set(bearer(s.token)).attach('file', pdf, { filename: 'invoice.pdf' });
      expect(up.status).toBe(201);
      expect(localFiles(otherDir)).toEqual([]);
      const dl = await ctx.http.get(up.body.attachment.download_url).set(bearer(agent.token)).buffer(true).parse(binary);
      expect(dl.status).toBe(200);
      expect(dl.headers['content-type']).toBe('application/pdf');
      expect(Buffer.compare(dl.body, pdf)).toBe(0);
      const part = await other.http.get(up.body.attachment.download_url).set(bearer(s.token)).set('Range', 'bytes=9-40').buffer(true).parse(binary);
      expect(part.status).toBe(206);
      expect(Buffer.compare(part.body, pdf.subarray(9, 41))).toBe(0);
    } finally {
      await other.close();
      fs.rmSync(otherDir, { recursive: true, force: true });
    }
  });
});
