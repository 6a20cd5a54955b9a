import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { GetObjectCommand } from '@aws-sdk/client-s3';
import gettextParser from 'gettext-parser';
import type { S3ObjectStorage } from '../src/infra/object-storage-s3';
import type { RunningWorker } from '../src/temporal/worker';
import { BASE, createReplica, createTestContext, startTestWorker, type TestContext } from './helpers';
import { startMoto, type MotoServer } from './moto-server';
import { binaryParser, status, unzip, waitForJob } from './translation-helpers';
import { GERMAN_PO, samplePot } from './translation-servers';

/**
 * Language packs with the s3 driver against moto_server on loopback: built by the worker's
 * packaging activity into the bucket, served by the API (and by a second API replica with a
 * DATA_DIR of its own), with byte ranges.
 */
describe('translations: language packs in S3 (moto on loopback)', () => {
  const BUCKET = 'hostflow-packs';
  const SLUG = 'ts3-example';
  const PACK = `${BASE}/translations/packages/plugin/${SLUG}/1.2.0/de_DE.zip`;
  let moto: MotoServer;
  let ctx: TestContext;
  let worker: RunningWorker;
  let apiDir: string;
  let workerDir: string;
  let zip: Buffer;

  const localFiles = (dir: string): string[] => (fs.existsSync(dir) ? (fs.readdirSync(dir, { recursive: true }) as string[]).filter((f) => fs.statSync(path.join(dir, f)).isFile()) : []);

  beforeAll(async () => {
    moto = await startMoto();
    await moto.createBucket(BUCKET);
    apiDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-tr-s3-api-'));
    workerDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-tr-s3-worker-'));
    ctx = await createTestContext({ DATA_DIR: apiDir, ...moto.env(BUCKET, 'packs/') });
    // The worker has a DATA_DIR of its own, as on another host: the pack reaches the API through the bucket only.
    worker = await startTestWorker({ db: ctx.db, config: { ...ctx.config, DATA_DIR: workerDir } });
    const created = await ctx.http
      .post(`${BASE}/translations/projects`)
      .set('Authorization', ctx.basic)
      .send({ slug: SLUG, type: 'plugin', name: 'S3 Example', version: '1.2.0', pot: samplePot(), glotpress_url_template: null, po_files: { de_DE: GERMAN_PO }, auto_approve: true });
    expect(created.status).toBe(200);
    const first = await ctx.http.get(`${BASE}/translations/check`).query({ slug: SLUG, type: 'plugin', locale: 'de_DE' }).set('Authorization', ctx.basic);
    await waitForJob(ctx, first.body.job_id, status('ready'));
  });
  afterAll(async () => {
    await worker?.shutdown();
    await ctx?.close();
    await moto?.stop();
    for (const d of [apiDir, workerDir]) if (d) fs.rmSync(d, { recursive: true, force: true });
  });

  test('the worker stored the pack in the bucket (application/zip, under S3_PREFIX), nothing on either DATA_DIR; the API serves it', async () => {
    const row = await ctx.db('translation_jobs').where({ slug: SLUG, locale: 'de_DE' }).first('package_path', 'package_size', 'package_sha256');
    expect(row.package_path).toBe(`plugin/${SLUG}/1.2.0/${SLUG}-de_DE.zip`);
    const client = (ctx.app.locals.storage as S3ObjectStorage).client;
    const stored = await client.send(new GetObjectCommand({ Bucket: BUCKET, Key: `packs/translations/packages/${row.package_path}` }));
    expect(stored.ContentType).toBe('application/zip');
    const storedBytes = Buffer.from(await stored.Body!.transformToByteArray());
    expect(storedBytes.length).toBe(Number(row.package_size));
    expect(localFiles(apiDir)).toEqual([]);
    expect(localFiles(workerDir)).toEqual([]);

    const dl = await ctx.http.get(PACK).buffer(true).parse(binaryParser);
    expect(dl.status).toBe(200);
    expect(dl.headers).toMatchObject({
      'content-type': 'application/zip',
      'content-length': String(row.package_size),
      'accept-ranges': 'bytes',
      etag: `"${row.package_sha256}"`,
      'cache-control': 'public, max-age=300',
      'content-disposition': `attachment; filename="${SLUG}-de_DE.zip"`,
    });
    zip = dl.body;
    expect(crypto.createHash('sha256').update(zip).digest('hex')).toBe(row.package_sha256);
    const files = await unzip(zip);
    const mo = gettextParser.mo.parse(files[`${SLUG}-de_DE.mo`]);
    expect(mo.translations[''].Settings.msgstr).toEqual(['Einstellungen']);
    const again = await ctx.http.get(PACK).set('If-None-Match', dl.headers.etag);
    expect(again.status).toBe(304);
  });

  test('Range: 206 with the exact bytes; If-Range with the current ETag keeps the range, a stale one gets the whole pack; past the end 416', async () => {
    const etag = `"${crypto.createHash('sha256').update(zip).digest('hex')}"`;
    const part = await ctx.http.get(PACK).set('Range', 'bytes=0-99').buffer(true).parse(binaryParser);
    expect(part.status).toBe(206);
    expect(part.headers['content-range']).toBe(`bytes 0-99/${zip.length}`);
    expect(part.headers.etag).toBe(etag);
    expect(Buffer.compare(part.body, zip.subarray(0, 100))).toBe(0);
    // A download resumed where it stopped.
    const rest = await ctx.http.get(PACK).set('Range', 'bytes=100-').set('If-Range', etag).buffer(true).parse(binaryParser);
    expect(rest.status).toBe(206);
    expect(Buffer.compare(Buffer.concat([part.body, rest.body]), zip)).toBe(0);
    const stale = await ctx.http.get(PACK).set('Range', 'bytes=100-').set('If-Range', '"not-the-etag"').buffer(true).parse(binaryParser);
    expect(stale.status).toBe(200);
    expect(Buffer.compare(stale.body, zip)).toBe(0);
    const past = await ctx.http.get(PACK).set('Range', `bytes=${zip.length + 10}-`);
    expect(past.status).toBe(416);
    expect(past.body).toMatchObject({ code: 'rest_range_not_satisfiable', data: { status: 416, size: zip.length } });
    expect(past.headers['content-range']).toBe(`bytes */${zip.length}`);
    expect(past.headers.etag).toBeUndefined();
  });

  test('a second API replica with its own DATA_DIR serves the same pack from the bucket', async () => {
    const otherDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-tr-s3-b-'));
    const other = await createReplica(ctx, { DATA_DIR: otherDir });
    try {
      const dl = await other.http.get(PACK).buffer(true).parse(binaryParser);
      expect(dl.status).toBe(200);
      expect(Buffer.compare(dl.body, zip)).toBe(0);
    } finally {
      await other.close();
      fs.rmSync(otherDir, { recursive: true, force: true });
    }
  });

  test('a ready pack whose object is gone from the bucket is 404 wu_rest_translation_package_not_found, with no cache headers', async () => {
    const row = await ctx.db('translation_jobs').where({ slug: SLUG, locale: 'de_DE' }).first('package_path');
    await ctx.app.locals.storage.delete(`translations/packages/${row.package_path}`);
    const gone = await ctx.http.get(PACK);
    expect(gone.status).toBe(404);
    expect(gone.body).toMatchObject({ code: 'wu_rest_translation_package_not_found', data: { status: 404 } });
    expect(gone.headers['content-type']).toMatch(/^application\/json/);
    expect(gone.headers['cache-control']).not.toBe('public, max-age=300');
  });
});
