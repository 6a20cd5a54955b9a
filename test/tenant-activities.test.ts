/**
 * The tenant activities as Temporal runs them (MockActivityEnvironment: a real activity
 * context, heartbeats and cancellation, no worker): they heartbeat from real progress (each file
 * moved), stop cleanly when cancelled, and a second attempt running beside the first loses no
 * upload.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { CancelledFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createTenantActivities } from '../activities/tenants';
import { LocalObjectStorage, movePrefix } from '../src/infra/object-storage';
import { createTestContext, type TestContext } from './helpers';
import { makeSite, tenantEnv } from './tenant-helpers';

/** Every file under `dir`, relative, with its content. */
function tree(dir: string): Record<string, string> {
  if (!fs.existsSync(dir)) return {};
  const out: Record<string, string> = {};
  for (const e of fs.readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (e.isFile()) out[path.relative(dir, path.join(e.parentPath, e.name))] = fs.readFileSync(path.join(e.parentPath, e.name), 'utf8');
  }
  return out;
}

describe('tenant activities in an activity context', () => {
  let ctx: TestContext;
  let env: Record<string, string>;
  let storage: LocalObjectStorage;
  let activities: ReturnType<typeof createTenantActivities>;

  beforeAll(async () => {
    env = tenantEnv();
    ctx = await createTestContext(env);
    storage = new LocalObjectStorage(env.DATA_DIR);
    activities = createTenantActivities({ db: ctx.db, config: ctx.config, storage });
  });
  afterAll(async () => {
    await ctx?.close();
    fs.rmSync(env.DATA_DIR, { recursive: true, force: true });
  });

  /** A site with `n` uploads (two folders deep) and a registry entry bound to a folder of its own. */
  async function siteWithUploads(n: number) {
    const site = await makeSite(ctx);
    const uploads = path.join(env.DATA_DIR, 'uploads', 'sites', String(site.siteId));
    const files: Record<string, string> = {};
    for (let i = 0; i < n; i++) {
      const rel = path.join('2026', String(i % 3), `file-${i}.txt`);
      fs.mkdirSync(path.dirname(path.join(uploads, rel)), { recursive: true });
      fs.writeFileSync(path.join(uploads, rel), `upload ${i}`);
      files[rel] = `upload ${i}`;
    }
    const root = path.join(env.TENANT_FILES_ROOT, `site-${site.siteId}-${crypto.randomBytes(4).toString('hex')}`);
    const [t] = await ctx.db('tenants')
      .insert({ uid: crypto.randomUUID(), site_id: site.siteId, state: 'bootstrapping', filesystem_root: root, hostname: `t${site.siteId}.example.com`, path: '/', database_host: 'primary', database_name: 'x' })
      .returning('id');
    return { tenantId: Number(t.id), uploads, tenantUploads: path.join(root, 'uploads'), files };
  }

  test('moving the uploads heartbeats once per file moved, with the count and the key', async () => {
    const s = await siteWithUploads(5);
    const activity = new MockActivityEnvironment({ heartbeatTimeoutMs: 10_000 });
    const beats: unknown[] = [];
    activity.on('heartbeat', (d: unknown) => beats.push(d));
    await activity.run(activities.tenantCreateFilesAndRoute, s.tenantId);
    expect(tree(s.tenantUploads)).toEqual(s.files);
    expect(fs.existsSync(s.uploads)).toBe(false);
    const moves = beats.filter((b) => (b as { moved?: number })?.moved !== undefined) as { step: string; moved: number; key?: string }[];
    expect(moves.map((b) => b.moved)).toEqual([1, 2, 3, 4, 5, 5]);
    expect(moves.slice(0, 5).every((b) => b.step === 'files_and_routing' && /^uploads\/sites\/\d+\/2026\/\d\/file-\d\.txt$/.test(b.key!))).toBe(true);
    // Started, loaded: progress before any file, never from a timer (no beat without a reason).
    expect(beats[0]).toEqual({ started: 'tenantCreateFilesAndRoute' });
    expect(beats).toHaveLength(2 + 6);
    expect(await ctx.db('tenant_routes').where({ tenant_id: s.tenantId }).first('hostname')).toEqual({ hostname: expect.stringMatching(/\.example\.com$/) });
  });

  test('cancelled mid-move: it stops at the next file with CancelledFailure, every upload whole in one place; run again, it finishes', async () => {
    const s = await siteWithUploads(40);
    const activity = new MockActivityEnvironment({ heartbeatTimeoutMs: 10_000 });
    activity.on('heartbeat', (d: { moved?: number }) => {
      if (d?.moved === 10) activity.cancel('CANCELLED');
    });
    const err = await activity.run(activities.tenantCreateFilesAndRoute, s.tenantId).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CancelledFailure);
    const moved = tree(s.tenantUploads);
    const left = tree(s.uploads);
    expect(Object.keys(moved)).toHaveLength(10);
    expect({ ...moved, ...left }).toEqual(s.files);
    expect(Object.keys(left).filter((k) => k in moved)).toEqual([]);
    // It stopped before the route: the step is not done.
    expect(await ctx.db('tenant_routes').where({ tenant_id: s.tenantId }).first()).toBeUndefined();

    await new MockActivityEnvironment().run(activities.tenantCreateFilesAndRoute, s.tenantId);
    expect(tree(s.tenantUploads)).toEqual(s.files);
    expect(fs.existsSync(s.uploads)).toBe(false);
    expect(Number((await ctx.db('tenant_routes').where({ tenant_id: s.tenantId }).first('tenant_id')).tenant_id)).toBe(s.tenantId);
  });

  test('a second attempt running beside the first (the first timed out but still running): no upload lost, none duplicated', async () => {
    const s = await siteWithUploads(300);
    const [a, b] = await Promise.all([new MockActivityEnvironment().run(activities.tenantCreateFilesAndRoute, s.tenantId), new MockActivityEnvironment().run(activities.tenantCreateFilesAndRoute, s.tenantId)]);
    expect([a, b]).toEqual([undefined, undefined]);
    expect(tree(s.tenantUploads)).toEqual(s.files);
    expect(fs.existsSync(s.uploads)).toBe(false);
    // Teardown's move back, twice at once as well: everything back in the site's folder.
    await ctx.db('tenants').where({ id: s.tenantId }).update({ state: 'tearing_down' });
    await Promise.all([new MockActivityEnvironment().run(activities.tenantRemoveFilesAndRoute, s.tenantId), new MockActivityEnvironment().run(activities.tenantRemoveFilesAndRoute, s.tenantId)]);
    expect(tree(s.uploads)).toEqual(s.files);
  });

  test('movePrefix never deletes what is already in the target, and leaves a file added to the source meanwhile', async () => {
    const local = new LocalObjectStorage(path.join(env.DATA_DIR, 'mv'));
    await local.put('to/kept.txt', Buffer.from('kept'));
    await local.put('to/a.txt', Buffer.from('old a'));
    await local.put('from/a.txt', Buffer.from('new a'));
    await local.put('from/sub/b.txt', Buffer.from('b'));
    const seen: string[] = [];
    await movePrefix(local, 'from/', local, 'to/', {
      onEntry: (key) => {
        seen.push(key);
        // An upload arriving under the source during the move: moved or left, never deleted.
        if (seen.length === 1) fs.writeFileSync(local.pathOf('from/late.txt'), 'late');
      },
    });
    expect(seen.sort()).toEqual(expect.arrayContaining(['from/a.txt', 'from/sub/b.txt']));
    const after = { ...tree(local.pathOf('to')), ...tree(local.pathOf('from')) };
    expect(after).toEqual({ 'kept.txt': 'kept', 'a.txt': 'new a', [path.join('sub', 'b.txt')]: 'b', 'late.txt': 'late' });
  });
});
