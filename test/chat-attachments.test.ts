import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { AttachmentStorage, receiveFile, Thumbnailer } from '../src/chat/attachments';
import { ApiError } from '../src/http/errors';
import { LocalObjectStorage } from '../src/infra/object-storage';
import { bearer, CHAT, expectError, makeAgent, makeSession } from './chat-helpers';
import { createTestContext, type TestContext } from './helpers';
import { blankPng, deflateZeros, interlacedBomb, pngFile, probe } from './image-builders';

/** Attachments: multipart upload, size limit, type from the bytes, thumbnails, download rules, path traversal. */
describe('support chat: attachments', () => {
  let ctx: TestContext;
  let dataDir: string;
  let agent: { id: number; token: string };
  const LIMIT = 200_000;

  const image = (w: number, h: number) => sharp({ create: { width: w, height: h, channels: 4, background: { r: 40, g: 120, b: 200, alpha: 1 } } });
  const png = (w: number, h: number) => image(w, h).png().toBuffer();
  const jpg = (w: number, h: number) => image(w, h).jpeg({ quality: 80 }).toBuffer();
  const sizeOf = async (bytes: Buffer) => {
    const m = await sharp(bytes).metadata();
    return [m.format, m.width, m.height];
  };
  // A 3x2 GIF header (enough for the type and the size; no image data to decode).
  const gif = Buffer.concat([Buffer.from('GIF89a'), Buffer.from([3, 0, 2, 0, 0x80, 0, 0]), Buffer.alloc(32)]);
  const elf = Buffer.concat([Buffer.from([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0]), crypto.randomBytes(200)]);
  const upload = (sessionId: number, token: string, bytes: Buffer, filename: string, message?: string) => {
    const req = ctx.http.post(`${CHAT}/chat/sessions/${sessionId}/attachments`).set(bearer(token)).attach('file', bytes, { filename, contentType: 'application/octet-stream' });
    return message ? req.field('message', message) : req;
  };
  /** Stored files and uploads' temporary files alike: a failed upload leaves neither. */
  const storedFiles = () => {
    const dir = path.join(dataDir, 'chat-attachments');
    const tmp = path.join(dataDir, 'tmp', 'chat-uploads');
    const stored = fs.existsSync(dir) ? fs.readdirSync(dir).flatMap((d) => fs.readdirSync(path.join(dir, d))) : [];
    return [...stored, ...(fs.existsSync(tmp) ? fs.readdirSync(tmp) : [])];
  };
  const binary = (res: any, cb: any) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => cb(null, Buffer.concat(chunks)));
  };

  /**
   * A multipart upload over a raw connection; the file (`total` bytes of "a") is generated as it is
   * sent, never held whole. With `sent` < `total` the client goes away after that many bytes
   * (`waitMs` later). Answers the response, or null when there was none.
   */
  const rawUpload = (server: http.Server, path: string, headers: Record<string, string>, total: number, sent = total, waitMs = 100) => {
    const boundary = '----hostflowraw';
    const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="stream.txt"\r\nContent-Type: text/plain\r\n\r\n`);
    const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
    const port = (server.address() as AddressInfo).port;
    return new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: any } | null>((resolve) => {
      const req = http.request({
        host: '127.0.0.1',
        port,
        path,
        method: 'POST',
        headers: { ...headers, 'Content-Type': `multipart/form-data; boundary=${boundary}`, 'Content-Length': head.length + total + tail.length },
      });
      req.on('error', () => resolve(null));
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: chunks.length ? JSON.parse(Buffer.concat(chunks).toString()) : null }));
      });
      void (async () => {
        req.write(head);
        const block = Buffer.alloc(64 * 1024, 'a');
        for (let left = sent; left > 0 && !req.destroyed; left -= block.length) {
          if (!req.write(block.subarray(0, Math.min(block.length, left)))) await new Promise((r) => req.once('drain', r));
        }
        if (sent === total) req.end(tail);
        else
          setTimeout(() => {
            req.destroy();
            resolve(null);
          }, waitMs);
      })();
    });
  };
  const listen = async (app: http.RequestListener) => {
    const server = http.createServer(app);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    return server;
  };
  const closeServer = async (server: http.Server) => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  };

  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hostflow-chat-'));
    ctx = await createTestContext({ DATA_DIR: dataDir, CHAT_ATTACHMENT_MAX_BYTES: String(LIMIT) });
    await ctx.app.locals.chat.realtime.ready();
    agent = await makeAgent(ctx, { online: true });
  });
  afterAll(async () => {
    await ctx?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test('a PNG: metadata (type from the bytes, size, sha256, width, height, thumbnail), a message carrying it, stored under a random name', async () => {
    const s = await makeSession(ctx);
    const bytes = await png(600, 300);
    const res = await upload(s.id, s.token, bytes, 'screenshot.png', 'Here is the error');
    expect(res.status).toBe(201);
    const a = res.body.attachment;
    expect(a).toMatchObject({ session_id: s.id, name: 'screenshot.png', type: 'image/png', size: bytes.length, width: 600, height: 300 });
    expect(a.sha256).toBe(crypto.createHash('sha256').update(bytes).digest('hex'));
    expect(a.download_url).toBe(`${CHAT}/chat/attachments/${a.id}/download`);
    expect(a.thumbnail_url).toBe(`${a.download_url}?variant=thumbnail`);
    expect(res.body.message).toMatchObject({ sender_type: 'customer', body: 'Here is the error', attachment: a });
    const row = await ctx.db('chat_attachments').where({ id: a.id }).first();
    expect(row.storage_name).toMatch(/^[a-f0-9]{32}$/);
    expect(fs.readFileSync(path.join(dataDir, 'chat-attachments', row.storage_name.slice(0, 2), row.storage_name))).toEqual(bytes);
    expect(storedFiles().some((f) => f.includes('screenshot'))).toBe(false);

    // Download: the same bytes, as an attachment, never sniffed.
    const dl = await ctx.http.get(a.download_url).set(bearer(s.token)).buffer(true).parse(binary);
    expect(dl.status).toBe(200);
    expect(dl.headers['content-type']).toBe('image/png');
    expect(dl.headers['content-disposition']).toBe(`attachment; filename="screenshot.png"; filename*=UTF-8''screenshot.png`);
    expect(dl.headers['x-content-type-options']).toBe('nosniff');
    expect(Buffer.compare(dl.body, bytes)).toBe(0);
    // The thumbnail: a real 250 px PNG.
    const th = await ctx.http.get(a.thumbnail_url).set(bearer(agent.token)).buffer(true).parse(binary);
    expect(th.status).toBe(200);
    expect(th.headers['content-type']).toBe('image/png');
    expect(await sizeOf(th.body)).toEqual(['png', 250, 125]);
    // Polling shows the attachment on the message.
    const msgs = (await ctx.http.get(`${CHAT}/chat/sessions/${s.id}/messages`).set(bearer(agent.token))).body.messages;
    expect(msgs[msgs.length - 1].attachment.id).toBe(a.id);
  });

  test('JPEG, GIF and WebP get thumbnails; an undecodable GIF keeps its size but gets none; PDF and UTF-8 text are accepted; the agent can upload too', async () => {
    const s = await makeSession(ctx);
    const j = await upload(s.id, s.token, await jpg(400, 800), 'photo.jpeg');
    expect(j.body.attachment).toMatchObject({ type: 'image/jpeg', name: 'photo.jpeg', width: 400, height: 800 });
    const th = await ctx.http.get(j.body.attachment.thumbnail_url).set(bearer(s.token)).buffer(true).parse(binary);
    expect(await sizeOf(th.body)).toEqual(['png', 125, 250]);
    const realGif = await upload(s.id, s.token, await image(300, 200).gif().toBuffer(), 'anim.gif');
    expect(realGif.body.attachment).toMatchObject({ type: 'image/gif', width: 300, height: 200 });
    expect(await sizeOf((await ctx.http.get(realGif.body.attachment.thumbnail_url).set(bearer(s.token)).buffer(true).parse(binary)).body)).toEqual(['png', 250, 167]);
    const webp = await upload(s.id, s.token, await image(100, 400).webp().toBuffer(), 'tall.webp');
    expect(webp.body.attachment).toMatchObject({ type: 'image/webp', width: 100, height: 400 });
    expect(await sizeOf((await ctx.http.get(webp.body.attachment.thumbnail_url).set(bearer(s.token)).buffer(true).parse(binary)).body)).toEqual(['png', 62, 250]);
    const g = await upload(s.id, s.token, gif, 'header-only.gif');
    expect(g.body.attachment).toMatchObject({ type: 'image/gif', width: 3, height: 2, thumbnail_url: null });
    expectError(await ctx.http.get(`${g.body.attachment.download_url}?variant=thumbnail`).set(bearer(s.token)), 404, 'chat_attachment_no_thumbnail');
    const pdf = await upload(s.id, agent.token, Buffer.from('%PDF-1.7\n1 0 obj\n<<>>\nendobj\n%%EOF\n'), 'invoice.pdf');
    expect(pdf.status).toBe(201);
    expect(pdf.body.attachment).toMatchObject({ type: 'application/pdf', width: null, height: null, thumbnail_url: null });
    expect(pdf.body.message).toMatchObject({ sender_type: 'agent', agent_id: agent.id, body: 'Sent a file: invoice.pdf' });
    const txt = await upload(s.id, s.token, Buffer.from('<script>alert(1)</script> héllo\n'), 'page.html');
    expect(txt.body.attachment).toMatchObject({ type: 'text/plain', name: 'page.txt' });
    const dl = await ctx.http.get(txt.body.attachment.download_url).set(bearer(s.token));
    expect(dl.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(dl.headers['content-disposition']).toBe(`attachment; filename="page.txt"; filename*=UTF-8''page.txt`);
    expect(dl.headers['content-security-policy']).toContain("default-src 'none'");
  });

  test('the name takes the extension of the detected type: a GIF-prefixed HTML page named invoice.html is stored and served as invoice.gif', async () => {
    const s = await makeSession(ctx);
    const polyglot = Buffer.from('GIF89a<html><body><script>fetch("/steal?c="+document.cookie)</script></body></html>\n');
    const res = await upload(s.id, s.token, polyglot, 'invoice.html');
    expect(res.status).toBe(201);
    expect(res.body.attachment).toMatchObject({ type: 'image/gif', name: 'invoice.gif' });
    expect(res.body.message.body).toBe('Sent a file: invoice.gif');
    const dl = await ctx.http.get(res.body.attachment.download_url).set(bearer(s.token)).buffer(true).parse(binary);
    expect(dl.headers['content-type']).toBe('image/gif');
    expect(dl.headers['content-disposition']).toBe(`attachment; filename="invoice.gif"; filename*=UTF-8''invoice.gif`);
    // No extension: one is added; a name only of dots and spaces falls back to "file"; an alias of the type is kept.
    expect((await upload(s.id, s.token, polyglot, 'invoice')).body.attachment.name).toBe('invoice.gif');
    expect((await upload(s.id, s.token, polyglot, 'invoice.html. ')).body.attachment.name).toBe('invoice.gif');
    expect((await upload(s.id, s.token, Buffer.from('%PDF-1.4\n'), '. .')).body.attachment.name).toBe('file.pdf');
    expect((await upload(s.id, s.token, await jpg(4, 4), 'SCAN.JPG')).body.attachment.name).toBe('SCAN.JPG');
    // A row stored before this rule keeps its name, but is served with the detected type's extension.
    await ctx.db('chat_attachments').where({ id: res.body.attachment.id }).update({ name: 'legacy.html' });
    const old = await ctx.http.get(res.body.attachment.download_url).set(bearer(s.token)).buffer(true).parse(binary);
    expect(old.headers['content-disposition']).toBe(`attachment; filename="legacy.gif"; filename*=UTF-8''legacy.gif`);
  });

  test('the type comes from the bytes, not the name: an executable named .png is 415; a PNG named .exe is a PNG', async () => {
    const s = await makeSession(ctx);
    const before = storedFiles().length;
    const bad = await upload(s.id, s.token, elf, 'cute-cat.png');
    expectError(bad, 415, 'chat_attachment_type_not_allowed');
    expect(bad.body.data.allowed_types).toContain('image/png');
    expectError(await upload(s.id, s.token, Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 0, 0, 0, 0, 0, 0]), 'broken.png'), 415);
    expectError(await upload(s.id, s.token, Buffer.from([0, 1, 2, 3, 0xff, 0xfe]), 'notes.txt'), 415);
    expect(storedFiles().length).toBe(before);
    expect(await ctx.db('chat_attachments').where({ session_id: s.id })).toEqual([]);
    const renamed = await upload(s.id, s.token, await png(10, 10), 'setup.exe');
    expect(renamed.body.attachment).toMatchObject({ type: 'image/png', name: 'setup.png' });
  });

  test('sniffing a streamed file: text is checked to its last byte, characters split across chunks pass; a JPEG whose size lies past the first 64 KiB is sized from the file', async () => {
    const s = await makeSession(ctx);
    const files = storedFiles().length;
    // Valid UTF-8 for 150 KB, then one NUL byte: not text.
    const late = Buffer.concat([Buffer.alloc(150_000, 'x'), Buffer.from([0]), Buffer.from('end\n')]);
    expectError(await upload(s.id, s.token, late, 'late.txt'), 415, 'chat_attachment_type_not_allowed');
    // Two-byte characters at odd offsets: chunk boundaries (even) fall inside them.
    const split = Buffer.from(`x${'é'.repeat(90_000)}\n`);
    const text = await upload(s.id, s.token, split, 'accents.txt');
    expect(text.body.attachment).toMatchObject({ type: 'text/plain', size: split.length });
    // APP15 segments (80 KB) before the frame header.
    const app15 = Buffer.concat([Buffer.from([0xff, 0xef, 0x9c, 0x40]), Buffer.alloc(0x9c40 - 2, 0x20)]);
    const base = await jpg(64, 48);
    const padded = Buffer.concat([base.subarray(0, 2), app15, app15, base.subarray(2)]);
    const j = await upload(s.id, s.token, padded, 'padded.jpg');
    expect(j.body.attachment).toMatchObject({ type: 'image/jpeg', width: 64, height: 48 });
    expect(j.body.attachment.thumbnail_url).not.toBeNull();
    // The same segments, then no frame at all: not a JPEG.
    expectError(await upload(s.id, s.token, Buffer.concat([base.subarray(0, 2), app15, app15, Buffer.alloc(100, 0xaa)]), 'broken.jpg'), 415, 'chat_attachment_type_not_allowed');
    expect(storedFiles().length).toBe(files + 3);
  });

  test('size limit (CHAT_ATTACHMENT_MAX_BYTES): at the limit accepted, above it 413 in the error shape, nothing stored', async () => {
    const s = await makeSession(ctx);
    const atLimit = Buffer.alloc(LIMIT, 'a');
    const ok = await upload(s.id, s.token, atLimit, 'big.txt');
    expect(ok.status).toBe(201);
    expect(ok.body.attachment.size).toBe(LIMIT);
    const before = storedFiles().length;
    const rows = await ctx.db('chat_attachments').count({ n: '*' }).first();
    const tooBig = await upload(s.id, s.token, Buffer.alloc(LIMIT + 1, 'a'), 'bigger.txt');
    expectError(tooBig, 413, 'chat_attachment_too_large');
    expect(tooBig.body.data.limit).toBe(LIMIT);
    const huge = await upload(s.id, s.token, Buffer.alloc(LIMIT * 3, 'a'), 'huge.txt');
    expectError(huge, 413, 'chat_attachment_too_large');
    expect(storedFiles().length).toBe(before);
    expect(await ctx.db('chat_attachments').count({ n: '*' }).first()).toEqual(rows);
  });

  test('bad uploads: no file field is 400, a caption with NUL or too long is 400, a JSON body is 415, a closed session is 409; refused callers never reach the parser', async () => {
    const s = await makeSession(ctx);
    const noFile = await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/attachments`).set(bearer(s.token)).field('message', 'no file');
    expectError(noFile, 400, 'wu_rest_invalid_parameter');
    expect(Object.keys(noFile.body.data.params)).toEqual(['file']);
    expectError(await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/attachments`).set(bearer(s.token)).send({ file: 'x' }), 415, 'chat_attachment_not_multipart');
    // A caption PostgreSQL cannot store (NUL), or too long: 400 naming the field, nothing kept.
    const files = storedFiles().length;
    const nul = await upload(s.id, s.token, Buffer.from('notes\n'), 'notes.txt', 'a\u0000b');
    expectError(nul, 400, 'wu_rest_invalid_parameter');
    expect(Object.keys(nul.body.data.params)).toEqual(['message']);
    // Too long, in one-byte and in four-byte characters (the parser cuts fields at 40004 bytes: still too long).
    for (const caption of ['x'.repeat(10_001), '\u{1F600}'.repeat(10_001), 'x'.repeat(50_000)]) {
      expectError(await upload(s.id, s.token, Buffer.from('notes\n'), 'notes.txt', caption), 400, 'wu_rest_invalid_parameter');
    }
    expect(storedFiles().length).toBe(files);
    expect(await ctx.db('chat_attachments').where({ session_id: s.id })).toEqual([]);
    // The longest caption (10000 UTF-16 units, 20000 bytes) is taken whole.
    const longest = '\u{1F600}'.repeat(5000);
    expect((await upload(s.id, s.token, Buffer.from('notes\n'), 'notes.txt', longest)).body.message.body).toBe(longest);
    const other = await makeSession(ctx);
    expectError(await upload(s.id, other.token, await png(5, 5), 'x.png'), 403);
    expectError(await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/attachments`).attach('file', await png(5, 5), 'x.png'), 401);
    await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/status`).set(bearer(s.token)).send({ status: 'closed' });
    expectError(await upload(s.id, s.token, await png(5, 5), 'x.png'), 409, 'chat_session_closed');
  });

  test("download: only the session's customer and agents; anonymous 401; another session's customer gets exactly the 404 of an unknown id", async () => {
    const s = await makeSession(ctx);
    const a = (await upload(s.id, s.token, await png(20, 20), 'mine.png')).body.attachment;
    const other = await makeSession(ctx);
    expectError(await ctx.http.get(a.download_url), 401, 'rest_forbidden');
    // No existence oracle: the same status, headers and bytes as an id that does not exist.
    const missingId = Number((await ctx.db('chat_attachments').max({ id: 'id' }).first())!.id) + 1000;
    for (const variant of ['', '?variant=thumbnail']) {
      const others = await ctx.http.get(`${a.download_url}${variant}`).set(bearer(other.token));
      const missing = await ctx.http.get(`${CHAT}/chat/attachments/${missingId}/download${variant}`).set(bearer(other.token));
      expectError(others, 404, 'wu_rest_chat_attachment_invalid_id');
      expect(others.text).toBe(missing.text);
      const headers = (r: any) => Object.entries(r.headers).filter(([k]) => !['date', 'x-request-id', 'etag'].includes(k));
      expect(headers(others)).toEqual(headers(missing));
    }
    expect((await ctx.http.get(a.download_url).set(bearer(agent.token))).status).toBe(200);
    expect((await ctx.http.get(a.download_url).set('Authorization', ctx.basic)).status).toBe(200);
    expectError(await ctx.http.get(`${CHAT}/chat/attachments/999999/download`).set(bearer(agent.token)), 404, 'wu_rest_chat_attachment_invalid_id');
    expectError(await ctx.http.get(`${a.download_url}?variant=../../x`).set(bearer(agent.token)), 400, 'wu_rest_invalid_parameter');
  });

  test('path traversal attempts fail safely (404 or 400 in the error shape, never a file outside the folder)', async () => {
    const s = await makeSession(ctx);
    const a = (await upload(s.id, s.token, await png(8, 8), 'p.png')).body.attachment;
    const attempts = [
      `${CHAT}/chat/attachments/..%2F..%2F..%2Fetc%2Fpasswd/download`,
      `${CHAT}/chat/attachments/%2e%2e%2f%2e%2e%2fetc%2fpasswd/download`,
      `${CHAT}/chat/attachments/${a.id}%2F..%2F..%2Fpackage.json/download`,
      `${CHAT}/chat/attachments/..%5C..%5Cwin.ini/download`,
      `${CHAT}/chat/attachments/${a.id}/download/..%2F..%2F..%2Fpackage.json`,
      `${CHAT}/chat/attachments/-1/download`,
      `${CHAT}/chat/attachments/1e3/download`,
    ];
    for (const url of attempts) {
      const res = await ctx.http.get(url).set(bearer(agent.token));
      expect([400, 404]).toContain(res.status);
      expect(res.body.code).toEqual(expect.any(String));
      expect(res.text).not.toMatch(/root:|"name": "hostflow"/);
    }
    // Even a tampered row cannot point outside the folder.
    await ctx.db('chat_attachments').where({ id: a.id }).update({ storage_name: '../../../../etc/passwd' });
    const tampered = await ctx.http.get(a.download_url).set(bearer(agent.token));
    expectError(tampered, 404, 'chat_attachment_missing');
    expect(tampered.text).not.toContain('root:');
  });

  describe('no orphaned files or rows', () => {
    // Nothing in the service deletes chat sessions or attachments (no route, CLI command or
    // workflow; deleting a customer or a site only unlinks its sessions), so files can only be
    // orphaned by an upload that fails half-way. Each failure below leaves the folder and the
    // table as they were.
    const rowCount = async () => Number((await ctx.db('chat_attachments').count({ n: '*' }).first())!.n);
    const messageCount = async () => Number((await ctx.db('chat_messages').count({ n: '*' }).first())!.n);

    test('too big, bad type, no file, closed session: refused before anything is written', async () => {
      const s = await makeSession(ctx);
      const files = storedFiles().length;
      const rows = await rowCount();
      expectError(await upload(s.id, s.token, Buffer.alloc(LIMIT + 1, 'a'), 'big.txt'), 413, 'chat_attachment_too_large');
      expectError(await upload(s.id, s.token, elf, 'tool.png'), 415, 'chat_attachment_type_not_allowed');
      expectError(await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/attachments`).set(bearer(s.token)).field('message', 'no file'), 400);
      await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/status`).set(bearer(s.token)).send({ status: 'closed' });
      expectError(await upload(s.id, s.token, await png(30, 30), 'late.png'), 409, 'chat_session_closed');
      expect(storedFiles().length).toBe(files);
      expect(await rowCount()).toBe(rows);
    });

    test('the database failing after the files were written (original and thumbnail): both files removed, no row', async () => {
      const s = await makeSession(ctx);
      const files = storedFiles().length;
      const rows = await rowCount();
      const messages = await messageCount();
      // The attachment row is inserted, then its message fails: the transaction rolls back.
      await ctx.db.raw(`CREATE FUNCTION hf_test_fail_attachment_message() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'simulated failure'; END $$`);
      await ctx.db.raw(`CREATE TRIGGER hf_test_fail_attachment_message BEFORE INSERT ON chat_messages FOR EACH ROW WHEN (NEW.attachment_id IS NOT NULL) EXECUTE FUNCTION hf_test_fail_attachment_message()`);
      try {
        const res = await upload(s.id, s.token, await png(400, 300), 'screenshot.png');
        expectError(res, 500, 'internal_error');
        expect(storedFiles().length).toBe(files);
        expect(await rowCount()).toBe(rows);
        expect(await messageCount()).toBe(messages);
      } finally {
        await ctx.db.raw('DROP TRIGGER hf_test_fail_attachment_message ON chat_messages');
        await ctx.db.raw('DROP FUNCTION hf_test_fail_attachment_message()');
      }
      // The same upload works once the database does.
      const ok = await upload(s.id, s.token, await png(400, 300), 'screenshot.png');
      expect(ok.status).toBe(201);
      expect(storedFiles().length).toBe(files + 2);
      expect(await rowCount()).toBe(rows + 1);
    });

    test('a client that goes away mid-upload leaves nothing, and the parser gives up on it (no request left hanging)', async () => {
      const s = await makeSession(ctx);
      const server = await listen(ctx.app);
      try {
        const files = storedFiles().length;
        const rows = await rowCount();
        const url = `${CHAT}/chat/sessions/${s.id}/attachments`;
        expect(await rawUpload(server, url, bearer(s.token), 150_000, 60_000)).toBeNull();
        expect(await rawUpload(server, url, bearer(s.token), 150_000, 0)).toBeNull();
        await new Promise((r) => setTimeout(r, 300));
        expect(storedFiles().length).toBe(files);
        expect(await rowCount()).toBe(rows);
        expect((await upload(s.id, s.token, await png(10, 10), 'after.png')).status).toBe(201);
      } finally {
        await closeServer(server);
      }

      // The parser itself: an aborted body rejects (chat_attachment_aborted) instead of waiting
      // forever, and the part of the file already streamed to disk is removed first.
      const ownDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hostflow-parser-'));
      const own = new AttachmentStorage(new LocalObjectStorage(ownDir), ownDir);
      const outcome: Promise<unknown>[] = [];
      const parser = await listen((req, res) => {
        outcome.push(receiveFile(req as never, own, LIMIT).then(() => 'resolved', (err: unknown) => err));
        res.on('close', () => res.end());
      });
      try {
        await rawUpload(parser, '/', {}, 150_000, 60_000);
        let timer: NodeJS.Timeout | undefined;
        const err = await Promise.race([outcome[0], new Promise((r) => (timer = setTimeout(() => r('still waiting'), 3000)))]);
        clearTimeout(timer);
        expect(err).toBeInstanceOf(ApiError);
        expect((err as ApiError).code).toBe('chat_attachment_aborted');
        expect(fs.existsSync(own.tmpDir)).toBe(true); // the file had been started
        expect(fs.readdirSync(own.tmpDir)).toEqual([]);
        // What a killed process left behind is swept when the next one starts; recent files stay.
        fs.writeFileSync(path.join(own.tmpDir, 'a'.repeat(32)), 'stale');
        fs.utimesSync(path.join(own.tmpDir, 'a'.repeat(32)), new Date(Date.now() - 2 * 86_400_000), new Date(Date.now() - 2 * 86_400_000));
        fs.writeFileSync(path.join(own.tmpDir, 'b'.repeat(32)), 'in flight');
        expect(await own.sweepTemp(86_400_000)).toBe(1);
        expect(fs.readdirSync(own.tmpDir)).toEqual(['b'.repeat(32)]);
      } finally {
        await closeServer(parser);
        fs.rmSync(ownDir, { recursive: true, force: true });
      }
    });
  });

  describe('image bombs and large files from an anonymous session (sharp off the event loop, within a budget; streamed to disk)', () => {
    let big: TestContext;
    beforeAll(async () => {
      big = await createTestContext({ DATA_DIR: dataDir, CHAT_ATTACHMENT_MAX_BYTES: String(80 << 20) });
    });
    afterAll(async () => {
      await big?.close();
    });
    const send = async (file: Buffer, filename: string) => {
      const s = await makeSession(big);
      return probe(() => big.http.post(`${CHAT}/chat/sessions/${s.id}/attachments`).set(bearer(s.token)).attach('file', file, { filename, contentType: 'image/png' }).then((r) => r));
    };

    // The old decoder (pngjs, synchronously on the event loop): +517 MB and a 2.1 s stall for the
    // first, +205 MB and a 3.0 s stall for the 6300x6300 one (measured in this test).
    test('an interlaced PNG whose IHDR says 1x1 but whose data inflates to 256 MiB: stored without a thumbnail, memory and event loop bounded', async () => {
      const bomb = await interlacedBomb();
      expect(bomb.length).toBeGreaterThan(250_000);
      expect(bomb.length).toBeLessThan(270_000);
      const { result: res, stallMs, rssGrowthMb } = await send(bomb, 'bomb.png');
      expect(res.status).toBe(201);
      expect(res.body.attachment).toMatchObject({ type: 'image/png', width: 1, height: 1, size: bomb.length, thumbnail_url: null });
      expect(rssGrowthMb).toBeLessThan(100);
      expect(stallMs).toBeLessThan(250);
    });

    test('the same bomb not interlaced: libvips reads the one row it needs, so it gets a 1x1 thumbnail, memory and event loop bounded', async () => {
      const bomb = pngFile({ width: 1, height: 1, colorType: 2, interlaced: false, idat: await deflateZeros(256 << 20) });
      const { result: res, stallMs, rssGrowthMb } = await send(bomb, 'flat-bomb.png');
      expect(res.status).toBe(201);
      const th = await big.http.get(res.body.attachment.thumbnail_url).set('Authorization', big.basic).buffer(true).parse(binary);
      expect(await sizeOf(th.body)).toEqual(['png', 1, 1]);
      expect(rssGrowthMb).toBeLessThan(100);
      expect(stallMs).toBeLessThan(250);
    });

    test('a plain 6300x6300 PNG of ~154 KB (over CHAT_THUMBNAIL_MAX_PIXELS): stored without a thumbnail, memory and event loop bounded', async () => {
      const file = await blankPng(6300, 6300);
      expect(file.length).toBeLessThan(200_000);
      const { result: res, stallMs, rssGrowthMb } = await send(file, 'wide.png');
      expect(res.status).toBe(201);
      expect(res.body.attachment).toMatchObject({ type: 'image/png', width: 6300, height: 6300, thumbnail_url: null });
      expect(rssGrowthMb).toBeLessThan(100);
      expect(stallMs).toBeLessThan(250);
    });

    test('a 64 MiB upload is streamed to disk: memory grows by far less than the file, and size, sha256 and text check are right', async () => {
      const size = 64 << 20;
      const hash = crypto.createHash('sha256');
      const block = Buffer.alloc(1 << 20, 'a');
      for (let i = 0; i < size / block.length; i++) hash.update(block);
      const s = await makeSession(big);
      const server = await listen(big.app);
      try {
        // The old parser held every chunk, then a copy of the whole: +128 MB for a 48 MiB file.
        const { result: res, rssGrowthMb, stallMs } = await probe(() => rawUpload(server, `${CHAT}/chat/sessions/${s.id}/attachments`, bearer(s.token), size));
        expect(res!.status).toBe(201);
        expect(res!.body.attachment).toMatchObject({ type: 'text/plain', size, sha256: hash.digest('hex'), name: 'stream.txt' });
        const row = await big.db('chat_attachments').where({ id: res!.body.attachment.id }).first();
        const stored = path.join(dataDir, 'chat-attachments', row.storage_name.slice(0, 2), row.storage_name);
        expect(fs.statSync(stored).size).toBe(size);
        expect(fs.statSync(stored).mode & 0o777).toBe(0o600);
        expect(rssGrowthMb).toBeLessThan(32); // holding the file at all would cost 64
        expect(stallMs).toBeLessThan(250);
      } finally {
        await closeServer(server);
      }
    });
  });

  describe('Thumbnailer: the budget of bytes, pixels, time and thumbnails at once', () => {
    let tmp: string;
    beforeAll(() => {
      tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hostflow-thumbs-'));
    });
    afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));
    const saved = async (name: string, bytes: Buffer | Promise<Buffer>) => {
      const b = await bytes;
      const p = path.join(tmp, name);
      fs.writeFileSync(p, b);
      return { path: p, size: b.length };
    };
    const pngOf = (w: number, h: number, interlaced = false) => ({ mime: 'image/png', width: w, height: h, interlaced });

    test('over the input bytes or pixels, interlaced, or lying about its size: not thumbnailed', async () => {
      const t = new Thumbnailer({ maxBytes: 2000, maxPixels: 10_000, timeoutSeconds: 5, concurrency: 1 });
      const small = await saved('small.png', png(50, 50));
      expect(small.size).toBeLessThan(2000);
      const made = await t.make(small.path, small.size, pngOf(50, 50));
      expect('png' in made && (await sizeOf(made.png))).toEqual(['png', 50, 50]);
      const noisy = await saved('noisy.png', sharp({ create: { width: 60, height: 60, channels: 3, background: '#000', noise: { type: 'gaussian', mean: 128, sigma: 40 } } }).png().toBuffer());
      expect(noisy.size).toBeGreaterThan(2000);
      expect(await t.make(noisy.path, noisy.size, pngOf(60, 60))).toEqual({ skipped: 'bytes' });
      const wide = await saved('wide.png', png(200, 200));
      expect(await t.make(wide.path, wide.size, pngOf(200, 200))).toEqual({ skipped: 'pixels' });
      // A header that passed the first check but an image over the limit: libvips' limitInputPixels refuses it.
      expect(await t.make(wide.path, wide.size, pngOf(50, 50))).toEqual({ skipped: 'unreadable' });
      const interlaced = await saved('adam7.png', image(50, 50).png({ progressive: true }).toBuffer());
      expect(await t.make(interlaced.path, interlaced.size, pngOf(50, 50, true))).toEqual({ skipped: 'interlaced' });
      expect(await t.make(small.path, small.size, { mime: 'application/pdf', width: null, height: null })).toEqual({ skipped: 'type' });
    });

    test('a decode that outlasts CHAT_THUMBNAIL_TIMEOUT_SECONDS is abandoned; while the one slot is taken, another upload gets none', async () => {
      const t = new Thumbnailer({ maxBytes: 64 << 20, maxPixels: 2_000_000_000, timeoutSeconds: 1, concurrency: 1 });
      // 1.6 gigapixels of zeros, 28 MB on disk: 4.5 s of decoding on an AMD EPYC host where 400
      // megapixels took 1.2 s, close enough to the 1 s timeout to finish first now and then.
      const slow = await saved('slow.png', blankPng(40_000, 40_000, 1));
      const small = await saved('small.png', png(40, 40));
      const first = t.make(slow.path, slow.size, pngOf(40_000, 40_000));
      expect(await t.make(small.path, small.size, pngOf(40, 40))).toEqual({ skipped: 'busy' });
      expect(await first).toEqual({ skipped: 'timeout' });
      // The slot is free again.
      expect('png' in (await t.make(small.path, small.size, pngOf(40, 40)))).toBe(true);
    });
  });

  describe('quotas (per session and per client address, rolling window, counted in PostgreSQL)', () => {
    let q: TestContext;
    let qAgent: { id: number; token: string };
    const WINDOW = 3600;
    beforeAll(async () => {
      // TRUST_PROXY: the client address comes from X-Forwarded-For, so each test is its own client.
      q = await createTestContext({
        DATA_DIR: dataDir,
        TRUST_PROXY: 'true',
        CHAT_ATTACHMENT_MAX_BYTES: '40000',
        CHAT_ATTACHMENT_QUOTA_WINDOW_SECONDS: String(WINDOW),
        CHAT_ATTACHMENT_SESSION_MAX_FILES: '3',
        CHAT_ATTACHMENT_SESSION_MAX_TOTAL_BYTES: '30000',
        CHAT_ATTACHMENT_ADDRESS_MAX_FILES: '5',
        CHAT_ATTACHMENT_ADDRESS_MAX_TOTAL_BYTES: '60000',
      });
      qAgent = await makeAgent(q, { online: true });
    });
    afterAll(async () => {
      await q?.close();
    });
    const from = (address: string) => ({ 'X-Forwarded-For': address });
    const send = (sessionId: number, token: string, address: string, bytes = 1000) =>
      q.http.post(`${CHAT}/chat/sessions/${sessionId}/attachments`).set(bearer(token)).set(from(address)).attach('file', Buffer.alloc(bytes, 'q'), { filename: 'notes.txt', contentType: 'text/plain' });
    const state = async () => ({
      files: storedFiles().length,
      rows: Number((await q.db('chat_attachments').count({ n: '*' }).first())!.n),
      messages: Number((await q.db('chat_messages').count({ n: '*' }).first())!.n),
    });
    const rowsFrom = async (address: string) => Number((await q.db('chat_attachments').where({ uploader_address: address }).count({ n: '*' }).first())!.n);
    /** Moves the oldest upload of the session `age` seconds into the past. */
    const age = async (sessionId: number, seconds: number) => {
      const oldest = await q.db('chat_attachments').where({ session_id: sessionId }).orderBy('id').first('id');
      await q.db('chat_attachments').where({ id: oldest.id }).update({ date_created: q.db.raw(`now() - make_interval(secs => ?)`, [seconds]) });
    };
    const expectQuota = (res: { status: number; body: any; headers: any }, quota: string, limit: number, usage: number) => {
      expectError(res, 429, 'chat_attachment_quota_exceeded');
      expect(res.body.data).toEqual({ status: 429, quota, limit, usage, window_seconds: WINDOW, retry_after: expect.any(Number) });
      expect(res.headers['retry-after']).toBe(String(res.body.data.retry_after));
      return res.body.data.retry_after as number;
    };

    test('files per session: the fourth upload in the window is 429 with Retry-After (when the oldest ages out), nothing written; agents and other sessions are not held back', async () => {
      const ip = '203.0.113.1';
      const s = await makeSession(q);
      for (let i = 0; i < 3; i++) expect((await send(s.id, s.token, ip)).status).toBe(201);
      // The oldest upload leaves the window in about 100 seconds: that is when one more fits.
      await age(s.id, WINDOW - 100);
      const before = await state();
      const wait = expectQuota(await send(s.id, s.token, ip), 'session_files', 3, 3);
      expect(wait).toBeGreaterThanOrEqual(98);
      expect(wait).toBeLessThanOrEqual(101);
      expect(await state()).toEqual(before);
      expect((await send(s.id, qAgent.token, ip)).status).toBe(201);
      const other = await makeSession(q);
      expect((await send(other.id, other.token, ip)).status).toBe(201);
      // Once the oldest is out of the window, the session may upload again.
      await age(s.id, WINDOW + 1);
      expect((await send(s.id, s.token, ip)).status).toBe(201);
    });

    test('bytes per session: a file that would pass the total is 429 (usage in bytes, Retry-After until enough bytes age out); one that fits is taken; a file larger than the whole quota is 413', async () => {
      const ip = '203.0.113.2';
      const s = await makeSession(q);
      expect((await send(s.id, s.token, ip, 12_000)).status).toBe(201);
      expect((await send(s.id, s.token, ip, 12_000)).status).toBe(201);
      await age(s.id, WINDOW - 200);
      const before = await state();
      const wait = expectQuota(await send(s.id, s.token, ip, 12_000), 'session_bytes', 30_000, 24_000);
      expect(wait).toBeGreaterThanOrEqual(198);
      expect(wait).toBeLessThanOrEqual(201);
      expect(await state()).toEqual(before);
      expect((await send(s.id, s.token, ip, 6000)).status).toBe(201); // exactly 30000
      const fresh = await makeSession(q);
      const huge = await send(fresh.id, fresh.token, ip, 35_000);
      expectError(huge, 413, 'chat_attachment_too_large');
      expect(huge.body.data.limit).toBe(30_000);
      expect(await q.db('chat_attachments').where({ session_id: fresh.id })).toEqual([]);
    });

    test('files per address, across sessions: 429 address_files; another address is unaffected, even for the same session', async () => {
      const ip = '198.51.100.3';
      const a = await makeSession(q);
      const b = await makeSession(q);
      for (let i = 0; i < 3; i++) expect((await send(a.id, a.token, ip)).status).toBe(201);
      for (let i = 0; i < 2; i++) expect((await send(b.id, b.token, ip)).status).toBe(201);
      const before = await state();
      expectQuota(await send(b.id, b.token, ip), 'address_files', 5, 5);
      expect(await state()).toEqual(before);
      expect((await send(b.id, b.token, '198.51.100.4')).status).toBe(201);
      expect(await rowsFrom(ip)).toBe(5);
    });

    test('bytes per address: once no byte is left, the upload is refused before its body is read', async () => {
      const ip = '198.51.100.5';
      for (let i = 0; i < 3; i++) {
        const s = await makeSession(q);
        expect((await send(s.id, s.token, ip, 20_000)).status).toBe(201);
      }
      const s = await makeSession(q);
      const server = await listen(q.app);
      try {
        const before = await state();
        // Only the headers and the start of the multipart body are sent: the answer comes anyway.
        const res = await rawUpload(server, `${CHAT}/chat/sessions/${s.id}/attachments`, { ...bearer(s.token), ...from(ip) }, 10_000, 0, 5000);
        expect(res).not.toBeNull();
        expectQuota(res!, 'address_bytes', 60_000, 60_000);
        expect(await state()).toEqual(before);
      } finally {
        await closeServer(server);
      }
    });

    test('a concurrent burst cannot overshoot: 8 uploads at once into a session with room for 3, and 8 from 4 sessions of an address with room for 5', async () => {
      const s = await makeSession(q);
      const before = await state();
      const one = await Promise.all(Array.from({ length: 8 }, () => send(s.id, s.token, '192.0.2.7')));
      expect(one.map((r) => r.status).sort()).toEqual([201, 201, 201, 429, 429, 429, 429, 429]);
      for (const r of one.filter((x) => x.status === 429)) expect(r.body.data.quota).toBe('session_files');
      expect((await state()).rows).toBe(before.rows + 3);
      expect(storedFiles().length).toBe(before.files + 3);

      const ip = '192.0.2.8';
      const sessions = await Promise.all(Array.from({ length: 4 }, () => makeSession(q)));
      const many = await Promise.all(sessions.flatMap((x) => [send(x.id, x.token, ip), send(x.id, x.token, ip)]));
      expect(many.filter((r) => r.status === 201).length).toBe(5);
      for (const r of many.filter((x) => x.status !== 201)) expectQuota(r, 'address_files', 5, 5);
      expect(await rowsFrom(ip)).toBe(5);
      expect((await state()).rows).toBe(before.rows + 8);
      expect(storedFiles().length).toBe(before.files + 8);
    });
  });
});
