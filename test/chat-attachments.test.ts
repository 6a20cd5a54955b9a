import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import jpeg from 'jpeg-js';
import { PNG } from 'pngjs';
import { readMultipart } from '../src/chat/attachments';
import { ApiError } from '../src/http/errors';
import { createTestContext, type TestContext } from './helpers';
import { bearer, CHAT, expectError, makeAgent, makeSession } from './chat-helpers';

/** Attachments: multipart upload, size limit, type from the bytes, thumbnails, download rules, path traversal. */
describe('support chat: attachments', () => {
  let ctx: TestContext;
  let dataDir: string;
  let agent: { id: number; token: string };
  const LIMIT = 200_000;

  const png = (w: number, h: number) => {
    const p = new PNG({ width: w, height: h });
    for (let i = 0; i < w * h; i++) p.data.set([(i * 7) % 256, (i * 13) % 256, 128, 255], i * 4);
    return PNG.sync.write(p);
  };
  const jpg = (w: number, h: number) => {
    const data = Buffer.alloc(w * h * 4, 200);
    return jpeg.encode({ data, width: w, height: h }, 80).data;
  };
  // A 3x2 GIF header (enough for the type and the size).
  const gif = Buffer.concat([Buffer.from('GIF89a'), Buffer.from([3, 0, 2, 0, 0x80, 0, 0]), Buffer.alloc(32)]);
  const elf = Buffer.concat([Buffer.from([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0]), crypto.randomBytes(200)]);
  const upload = (sessionId: number, token: string, bytes: Buffer, filename: string, message?: string) => {
    const req = ctx.http.post(`${CHAT}/chat/sessions/${sessionId}/attachments`).set(bearer(token)).attach('file', bytes, { filename, contentType: 'application/octet-stream' });
    return message ? req.field('message', message) : req;
  };
  const storedFiles = () => {
    const dir = path.join(dataDir, 'chat-attachments');
    if (!fs.existsSync(dir)) return [];
    return fs.readdirSync(dir).flatMap((d) => fs.readdirSync(path.join(dir, d)));
  };
  const binary = (res: any, cb: any) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => cb(null, Buffer.concat(chunks)));
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
    const bytes = png(600, 300);
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
    const decoded = PNG.sync.read(th.body);
    expect([decoded.width, decoded.height]).toEqual([250, 125]);
    // Polling shows the attachment on the message.
    const msgs = (await ctx.http.get(`${CHAT}/chat/sessions/${s.id}/messages`).set(bearer(agent.token))).body.messages;
    expect(msgs[msgs.length - 1].attachment.id).toBe(a.id);
  });

  test('JPEG gets a thumbnail; GIF has its size but no thumbnail; PDF and UTF-8 text are accepted; the agent can upload too', async () => {
    const s = await makeSession(ctx);
    const j = await upload(s.id, s.token, jpg(400, 800), 'photo.jpeg');
    expect(j.body.attachment).toMatchObject({ type: 'image/jpeg', width: 400, height: 800 });
    const th = await ctx.http.get(j.body.attachment.thumbnail_url).set(bearer(s.token)).buffer(true).parse(binary);
    expect([PNG.sync.read(th.body).width, PNG.sync.read(th.body).height]).toEqual([125, 250]);
    const g = await upload(s.id, s.token, gif, 'anim.gif');
    expect(g.body.attachment).toMatchObject({ type: 'image/gif', width: 3, height: 2, thumbnail_url: null });
    expectError(await ctx.http.get(`${g.body.attachment.download_url}?variant=thumbnail`).set(bearer(s.token)), 404, 'chat_attachment_no_thumbnail');
    const pdf = await upload(s.id, agent.token, Buffer.from('%PDF-1.7\n1 0 obj\n<<>>\nendobj\n%%EOF\n'), 'invoice.pdf');
    expect(pdf.status).toBe(201);
    expect(pdf.body.attachment).toMatchObject({ type: 'application/pdf', width: null, height: null, thumbnail_url: null });
    expect(pdf.body.message).toMatchObject({ sender_type: 'agent', agent_id: agent.id, body: 'Sent a file: invoice.pdf' });
    const txt = await upload(s.id, s.token, Buffer.from('<script>alert(1)</script> héllo\n'), 'page.html');
    expect(txt.body.attachment.type).toBe('text/plain');
    const dl = await ctx.http.get(txt.body.attachment.download_url).set(bearer(s.token));
    expect(dl.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(dl.headers['content-disposition']).toMatch(/^attachment;/);
    expect(dl.headers['content-security-policy']).toContain("default-src 'none'");
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
    const renamed = await upload(s.id, s.token, png(10, 10), 'setup.exe');
    expect(renamed.body.attachment).toMatchObject({ type: 'image/png', name: 'setup.exe' });
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

  test('bad uploads: no file field is 400, a JSON body is 415, a closed session is 409; refused callers never reach the parser', async () => {
    const s = await makeSession(ctx);
    const noFile = await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/attachments`).set(bearer(s.token)).field('message', 'no file');
    expectError(noFile, 400, 'wu_rest_invalid_parameter');
    expect(Object.keys(noFile.body.data.params)).toEqual(['file']);
    expectError(await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/attachments`).set(bearer(s.token)).send({ file: 'x' }), 415, 'chat_attachment_not_multipart');
    const other = await makeSession(ctx);
    expectError(await upload(s.id, other.token, png(5, 5), 'x.png'), 403);
    expectError(await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/attachments`).attach('file', png(5, 5), 'x.png'), 401);
    await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/status`).set(bearer(s.token)).send({ status: 'closed' });
    expectError(await upload(s.id, s.token, png(5, 5), 'x.png'), 409, 'chat_session_closed');
  });

  test("download: only the session's customer and agents; anonymous 401; another session's customer gets exactly the 404 of an unknown id", async () => {
    const s = await makeSession(ctx);
    const a = (await upload(s.id, s.token, png(20, 20), 'mine.png')).body.attachment;
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
    const a = (await upload(s.id, s.token, png(8, 8), 'p.png')).body.attachment;
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

    /** A multipart body announcing `total` bytes of file, of which only `sent` are sent before the client goes away. */
    const abortedUpload = async (server: http.Server, path: string, token: string, total: number, sent: number) => {
      const boundary = '----hostflowabort';
      const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="partial.txt"\r\nContent-Type: text/plain\r\n\r\n`);
      const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
      const port = (server.address() as AddressInfo).port;
      await new Promise<void>((resolve) => {
        const req = http.request({
          host: '127.0.0.1',
          port,
          path,
          method: 'POST',
          headers: { Authorization: `Bearer ${token}`, 'Content-Type': `multipart/form-data; boundary=${boundary}`, 'Content-Length': head.length + total + tail.length },
        });
        req.on('error', () => resolve());
        req.on('response', () => resolve());
        req.write(head);
        req.write(Buffer.alloc(sent, 'a'), () => setTimeout(() => {
          req.destroy();
          resolve();
        }, 100));
      });
    };

    test('too big, bad type, no file, closed session: refused before anything is written', async () => {
      const s = await makeSession(ctx);
      const files = storedFiles().length;
      const rows = await rowCount();
      expectError(await upload(s.id, s.token, Buffer.alloc(LIMIT + 1, 'a'), 'big.txt'), 413, 'chat_attachment_too_large');
      expectError(await upload(s.id, s.token, elf, 'tool.png'), 415, 'chat_attachment_type_not_allowed');
      expectError(await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/attachments`).set(bearer(s.token)).field('message', 'no file'), 400);
      await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/status`).set(bearer(s.token)).send({ status: 'closed' });
      expectError(await upload(s.id, s.token, png(30, 30), 'late.png'), 409, 'chat_session_closed');
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
        const res = await upload(s.id, s.token, png(400, 300), 'screenshot.png');
        expectError(res, 500, 'internal_error');
        expect(storedFiles().length).toBe(files);
        expect(await rowCount()).toBe(rows);
        expect(await messageCount()).toBe(messages);
      } finally {
        await ctx.db.raw('DROP TRIGGER hf_test_fail_attachment_message ON chat_messages');
        await ctx.db.raw('DROP FUNCTION hf_test_fail_attachment_message()');
      }
      // The same upload works once the database does.
      const ok = await upload(s.id, s.token, png(400, 300), 'screenshot.png');
      expect(ok.status).toBe(201);
      expect(storedFiles().length).toBe(files + 2);
      expect(await rowCount()).toBe(rows + 1);
    });

    test('a client that goes away mid-upload leaves nothing, and the parser gives up on it (no request left hanging)', async () => {
      const s = await makeSession(ctx);
      const server = http.createServer(ctx.app);
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
      try {
        const files = storedFiles().length;
        const rows = await rowCount();
        await abortedUpload(server, `${CHAT}/chat/sessions/${s.id}/attachments`, s.token, 150_000, 60_000);
        await abortedUpload(server, `${CHAT}/chat/sessions/${s.id}/attachments`, s.token, 150_000, 0);
        await new Promise((r) => setTimeout(r, 300));
        expect(storedFiles().length).toBe(files);
        expect(await rowCount()).toBe(rows);
        expect((await upload(s.id, s.token, png(10, 10), 'after.png')).status).toBe(201);
      } finally {
        server.closeAllConnections();
        await new Promise((r) => server.close(r));
      }

      // The parser itself: an aborted body rejects (chat_attachment_aborted) instead of waiting forever.
      const outcome: Promise<unknown>[] = [];
      const parser = http.createServer((req, res) => {
        outcome.push(readMultipart(req as never, LIMIT).then(() => 'resolved', (err) => err));
        res.on('close', () => res.end());
      });
      await new Promise<void>((r) => parser.listen(0, '127.0.0.1', () => r()));
      try {
        await abortedUpload(parser, '/', 'x', 150_000, 60_000);
        let timer: NodeJS.Timeout | undefined;
        const err = await Promise.race([outcome[0], new Promise((r) => (timer = setTimeout(() => r('still waiting'), 3000)))]);
        clearTimeout(timer);
        expect(err).toBeInstanceOf(ApiError);
        expect((err as ApiError).code).toBe('chat_attachment_aborted');
      } finally {
        parser.closeAllConnections();
        await new Promise((r) => parser.close(r));
      }
    });
  });
});
