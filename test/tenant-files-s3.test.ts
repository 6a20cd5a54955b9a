import fs from 'node:fs';
import { ListObjectsV2Command, PutObjectCommand, GetObjectCommand } from '@aws-sdk/client-s3';
import type { S3ObjectStorage } from '../src/infra/object-storage-s3';
import type { RunningWorker } from '../src/temporal/worker';
import { BASE, createTestContext, startTestWorker, type TestContext } from './helpers';
import { startMoto, type MotoServer } from './moto-server';
import { makeSite, settled, status, tenantEnv } from './tenant-helpers';

/**
 * A tenant's files with the s3 driver against moto_server on loopback: bootstrap moves the
 * site's uploads from uploads/sites/<id>/ to the tenant's root tenants/site-<id>-<uid>/uploads/
 * in the bucket, teardown moves them back; nothing is written under DATA_DIR or
 * TENANT_FILES_ROOT, so the steps can run on any worker.
 */
describe('isolated tenants: files in S3 (moto on loopback)', () => {
  const BUCKET = 'hostflow-tenants';
  let moto: MotoServer;
  let ctx: TestContext;
  let worker: RunningWorker;
  let env: Record<string, string>;
  const client = () => (ctx.app.locals.storage as S3ObjectStorage).client;
  const keys = async (prefix: string) => ((await client().send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: prefix }))).Contents ?? []).map((o) => o.Key!).sort();
  const read = async (key: string) => Buffer.from(await (await client().send(new GetObjectCommand({ Bucket: BUCKET, Key: key }))).Body!.transformToByteArray()).toString();
  const localFiles = (dir: string): string[] =>
    fs.existsSync(dir) ? (fs.readdirSync(dir, { recursive: true }) as string[]).filter((f) => !f.startsWith('tmp') && fs.statSync(`${dir}/${f}`).isFile()) : [];

  beforeAll(async () => {
    moto = await startMoto();
    await moto.createBucket(BUCKET);
    env = tenantEnv(moto.env(BUCKET, 'hf'));
    ctx = await createTestContext(env);
    worker = await startTestWorker(ctx);
  });
  afterAll(async () => {
    await worker?.shutdown();
    await ctx?.close();
    await moto?.stop();
    if (env?.DATA_DIR) fs.rmSync(env.DATA_DIR, { recursive: true, force: true });
  });

  test('bootstrap moves the uploads into the tenant root in the bucket; teardown moves them back', async () => {
    const site = await makeSite(ctx);
    const shared = `hf/uploads/sites/${site.siteId}/`;
    for (const [name, body] of [
      ['logo.txt', 'logo bytes'],
      ['2026/11/Übersicht 1.txt', 'nested'],
    ]) {
      await client().send(new PutObjectCommand({ Bucket: BUCKET, Key: shared + name, Body: body }));
    }

    const started = await ctx.http.post(`${BASE}/tenants/${site.siteId}/bootstrap`).set('Authorization', ctx.basic).send({});
    expect([200, 202]).toContain(started.status);
    const done = await settled(ctx, site.siteId);
    expect(done.body.state).toBe('ready');
    const t = await ctx.db('tenants').where({ site_id: site.siteId }).whereNot({ state: 'torn_down' }).first();
    const folder = `site-${site.siteId}-${t.uid.replace(/-/g, '').slice(0, 10)}`;
    expect(t.filesystem_root).toBe(`s3://${BUCKET}/hf/tenants/${folder}`);
    const root = `hf/tenants/${folder}/uploads/`;
    expect(await keys(shared)).toEqual([]);
    expect(await keys(root)).toEqual([`${root}2026/11/Übersicht 1.txt`, `${root}logo.txt`]);
    expect(await read(`${root}logo.txt`)).toBe('logo bytes');
    expect(localFiles(env.DATA_DIR)).toEqual([]);

    const removed = await ctx.http.delete(`${BASE}/tenants/${site.siteId}`).set('Authorization', ctx.basic);
    expect(removed.status).toBe(200);
    expect(removed.body).toMatchObject({ deleted: true, state: 'torn_down' });
    expect((await status(ctx, site.siteId)).status).toBe(404);
    expect(await keys(`hf/tenants/${folder}/`)).toEqual([]);
    expect(await keys(shared)).toEqual([`${shared}2026/11/Übersicht 1.txt`, `${shared}logo.txt`]);
    expect(await read(`${shared}2026/11/Übersicht 1.txt`)).toBe('nested');
    expect(localFiles(env.DATA_DIR)).toEqual([]);
  });
});
