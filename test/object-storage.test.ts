import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { loadConfig } from '../src/config';
import {
  copyPrefix,
  createObjectStorage,
  deletePrefix,
  movePrefix,
  InvalidObjectKey,
  LocalObjectStorage,
  ObjectNotFound,
  RangeNotSatisfiable,
  type ObjectStorage,
} from '../src/infra/object-storage';
import type { S3ObjectStorage } from '../src/infra/object-storage-s3';
import { startMoto, type MotoServer } from './moto-server';

/**
 * The object-storage contract, run against both drivers: the local folder and the s3 driver
 * against moto_server on loopback (a real S3-protocol server, real HTTP).
 */

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

const HOSTILE_KEYS: [string, string][] = [
  ['parent', '../x'],
  ['parent inside', 'a/../../x'],
  ['parent at the end', 'a/..'],
  ['dot segment', 'a/./b'],
  ['absolute', '/etc/passwd'],
  ['empty', ''],
  ['empty segment', 'a//b'],
  ['trailing slash', 'a/b/'],
  ['backslash traversal', '..\\..\\x'],
  ['NUL', 'a\u0000b'],
  ['line break', 'a\nb'],
  ['unpaired surrogate', 'a\ud800b'],
  ['huge', 'k'.repeat(1025)],
  ['huge in bytes', 'é'.repeat(513)],
];

let moto: MotoServer;
let localRoot: string;
const BUCKET = 'hostflow-contract';

beforeAll(async () => {
  moto = await startMoto();
  await moto.createBucket(BUCKET);
  localRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'hostflow-objects-'));
});
afterAll(async () => {
  await moto?.stop();
  if (localRoot) fs.rmSync(localRoot, { recursive: true, force: true });
});

describe.each([
  ['local', () => createObjectStorage(loadConfig({ DATA_DIR: path.join(localRoot, 'data') }))],
  ['s3', () => createObjectStorage(loadConfig({ DATA_DIR: path.join(localRoot, 'unused'), ...moto.env(BUCKET, 'contract/') }))],
])('object storage contract: %s driver', (driver, make) => {
  let storage: ObjectStorage;
  beforeAll(() => {
    storage = make();
    expect(storage.driver).toBe(driver);
  });
  afterAll(() => storage.close());

  test('check: the store is usable', async () => {
    await expect(storage.check(2000)).resolves.toBeUndefined();
  });

  test('put and get: the same bytes, size and (s3) content type; a put replaces the object', async () => {
    const bytes = crypto.randomBytes(5000);
    await storage.put('put/one.bin', bytes, { contentType: 'application/octet-stream' });
    const read = await storage.get('put/one.bin');
    expect(read.size).toBe(5000);
    expect(read.range).toBeNull();
    expect(Buffer.compare(await readAll(read.stream), bytes)).toBe(0);
    // The local driver keeps no metadata: the rows of the features hold the type.
    expect(read.contentType).toBe(driver === 's3' ? 'application/octet-stream' : null);

    await storage.put('put/one.bin', Buffer.from('shorter'));
    const again = await storage.get('put/one.bin');
    expect(again.size).toBe(7);
    expect((await readAll(again.stream)).toString()).toBe('shorter');
  });

  test('putFile streams a local file (4 MB) in; get streams it back', async () => {
    const file = path.join(localRoot, `big-${driver}.bin`);
    const bytes = crypto.randomBytes(4 * 1024 * 1024);
    fs.writeFileSync(file, bytes);
    await storage.putFile('files/big.bin', file, { contentType: 'application/zip' });
    expect(await storage.head('files/big.bin')).toEqual({ size: bytes.length, contentType: driver === 's3' ? 'application/zip' : null });
    const read = await storage.get('files/big.bin');
    const back = await readAll(read.stream);
    expect(crypto.createHash('sha256').update(back).digest('hex')).toBe(crypto.createHash('sha256').update(bytes).digest('hex'));
    expect(fs.existsSync(file)).toBe(true); // the source stays

    // move: the caller's temporary file; the local driver renames it in, s3 sends it (the caller removes it).
    const temp = path.join(localRoot, `temp-${driver}.bin`);
    fs.writeFileSync(temp, bytes.subarray(0, 1000));
    await storage.putFile('files/moved.bin', temp, { move: true });
    expect(fs.existsSync(temp)).toBe(driver === 's3');
    expect(Buffer.compare(await readAll((await storage.get('files/moved.bin')).stream), bytes.subarray(0, 1000))).toBe(0);
  });

  test('ranges: a-b, a-, the last n bytes, an end past the size (clamped), and a start past it (RangeNotSatisfiable with the size)', async () => {
    const bytes = Buffer.from('0123456789abcdefghij'); // 20 bytes
    await storage.put('range/r.txt', bytes);
    const cases: [Parameters<ObjectStorage['get']>[1], { start: number; end: number }, string][] = [
      [{ range: { start: 2, end: 5 } }, { start: 2, end: 5 }, '2345'],
      [{ range: { start: 15 } }, { start: 15, end: 19 }, 'fghij'],
      [{ range: { suffix: 3 } }, { start: 17, end: 19 }, 'hij'],
      [{ range: { suffix: 500 } }, { start: 0, end: 19 }, bytes.toString()],
      [{ range: { start: 18, end: 1000 } }, { start: 18, end: 19 }, 'ij'],
      [{ range: { start: 0, end: 0 } }, { start: 0, end: 0 }, '0'],
    ];
    for (const [opts, range, text] of cases) {
      const read = await storage.get('range/r.txt', opts);
      expect({ size: read.size, range: read.range }).toEqual({ size: 20, range });
      expect((await readAll(read.stream)).toString()).toBe(text);
    }
    for (const range of [{ start: 20 }, { start: 25, end: 30 }]) {
      const err = await storage.get('range/r.txt', { range }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RangeNotSatisfiable);
      expect((err as RangeNotSatisfiable).size).toBe(20);
    }
    await storage.put('range/empty', Buffer.alloc(0));
    const empty = await storage.get('range/empty');
    expect(empty.size).toBe(0);
    expect((await readAll(empty.stream)).length).toBe(0);
    await expect(storage.get('range/empty', { range: { start: 0 } })).rejects.toBeInstanceOf(RangeNotSatisfiable);
  });

  test('head, delete, missing objects (ObjectNotFound on get, null on head, delete is no error)', async () => {
    await storage.put('del/x', Buffer.from('x'));
    expect(await storage.head('del/x')).toMatchObject({ size: 1 });
    await storage.delete('del/x');
    expect(await storage.head('del/x')).toBeNull();
    await expect(storage.get('del/x')).rejects.toBeInstanceOf(ObjectNotFound);
    await expect(storage.get('del/never', { range: { start: 0, end: 1 } })).rejects.toBeInstanceOf(ObjectNotFound);
    await expect(storage.delete('del/never')).resolves.toBeUndefined();
    // A "folder" is not an object.
    await storage.put('del/dir/inner', Buffer.from('i'));
    expect(await storage.head('del/dir')).toBeNull();
    await expect(storage.get('del/dir')).rejects.toBeInstanceOf(ObjectNotFound);
  });

  test('keys with unicode: stored, read, listed and copied under the same name', async () => {
    const key = 'unicode/Übersicht – 日本語 😀/файл (1).txt';
    await storage.put(key, Buffer.from('grüße'));
    expect((await readAll((await storage.get(key)).stream)).toString()).toBe('grüße');
    expect(await storage.list('unicode/')).toEqual([key]);
    await storage.copy(key, 'unicode/copie é.txt');
    expect((await readAll((await storage.get('unicode/copie é.txt')).stream)).toString()).toBe('grüße');
    expect((await storage.list('unicode/')).sort()).toEqual([key, 'unicode/copie é.txt'].sort());
  });

  test('list and copy under a prefix; deletePrefix removes only that folder', async () => {
    await storage.put('tree/a/1.txt', Buffer.from('1'));
    await storage.put('tree/a/sub/2.txt', Buffer.from('2'));
    await storage.put('tree/ab/3.txt', Buffer.from('3'));
    expect((await storage.list('tree/a/')).sort()).toEqual(['tree/a/1.txt', 'tree/a/sub/2.txt']);
    expect(await storage.list('tree/none/')).toEqual([]);
    await expect(storage.copy('tree/missing', 'tree/b/x')).rejects.toBeInstanceOf(ObjectNotFound);
    await storage.copy('tree/a/sub/2.txt', 'tree/b/2.txt');
    expect((await readAll((await storage.get('tree/b/2.txt')).stream)).toString()).toBe('2');
    await deletePrefix(storage, 'tree/a/');
    expect(await storage.list('tree/a/')).toEqual([]);
    expect((await storage.list('tree/')).sort()).toEqual(['tree/ab/3.txt', 'tree/b/2.txt']);
  });

  test('copyPrefix and movePrefix: a folder with nested keys copied, then moved (replacing what is there, the source removed); repeating a move is harmless', async () => {
    await storage.put('mv/site-1/logo.txt', Buffer.from('logo'));
    await storage.put('mv/site-1/2026/11/a b.txt', Buffer.from('nested'));
    await copyPrefix(storage, 'mv/site-1/', 'mv/site-2/');
    expect((await storage.list('mv/site-2/')).sort()).toEqual(['mv/site-2/2026/11/a b.txt', 'mv/site-2/logo.txt']);
    expect((await storage.list('mv/site-1/')).length).toBe(2);
    await copyPrefix(storage, 'mv/none/', 'mv/site-3/'); // nothing to copy: nothing happens
    expect(await storage.list('mv/site-3/')).toEqual([]);

    await storage.put('mv/root/uploads/logo.txt', Buffer.from('old logo'));
    await movePrefix(storage, 'mv/site-1/', storage, 'mv/root/uploads/');
    expect(await storage.list('mv/site-1/')).toEqual([]);
    expect((await storage.list('mv/root/uploads/')).sort()).toEqual(['mv/root/uploads/2026/11/a b.txt', 'mv/root/uploads/logo.txt']);
    expect((await readAll((await storage.get('mv/root/uploads/logo.txt')).stream)).toString()).toBe('logo');
    await movePrefix(storage, 'mv/site-1/', storage, 'mv/root/uploads/');
    expect((await storage.list('mv/root/uploads/')).length).toBe(2);
    await expect(deletePrefix(storage, '')).rejects.toBeInstanceOf(InvalidObjectKey);
    await expect(copyPrefix(storage, '../', 'x/')).rejects.toBeInstanceOf(InvalidObjectKey);
  });

  test.each(HOSTILE_KEYS)('a hostile key (%s) is refused by every operation before any I/O', async (_name, key) => {
    const ops: (() => Promise<unknown>)[] = [
      () => storage.put(key, Buffer.from('evil')),
      () => storage.putFile(key, __filename),
      () => storage.get(key),
      () => storage.head(key),
      () => storage.delete(key),
      () => storage.copy('put/one.bin', key),
      () => storage.copy(key, 'hostile/copy'),
    ];
    for (const op of ops) await expect(op()).rejects.toBeInstanceOf(InvalidObjectKey);
    expect(await storage.head('hostile/copy')).toBeNull();
  });

  test('a prefix for list must be a folder (ending in /) and as safe as a key', async () => {
    for (const prefix of ['../', '/abs/', 'no-slash', 'a//']) await expect(storage.list(prefix)).rejects.toBeInstanceOf(InvalidObjectKey);
  });
});

describe('drivers: what only one of them does', () => {
  test('local: keys are paths under the folder (the files sit where they always did); nothing is written outside it', async () => {
    const root = path.join(localRoot, 'paths');
    const storage = new LocalObjectStorage(root);
    await storage.put('chat-attachments/ab/abcdef', Buffer.from('x'));
    expect(fs.readFileSync(path.join(root, 'chat-attachments', 'ab', 'abcdef'), 'utf8')).toBe('x');
    expect(fs.statSync(path.join(root, 'chat-attachments', 'ab', 'abcdef')).mode & 0o777).toBe(0o600);
    for (const [, key] of HOSTILE_KEYS) await expect(storage.put(key, Buffer.from('evil'))).rejects.toBeInstanceOf(InvalidObjectKey);
    expect(fs.existsSync(path.join(localRoot, 'x'))).toBe(false);
    expect(fs.readdirSync(root)).toEqual(['chat-attachments']);
    // No temporary file is left beside the object.
    expect(fs.readdirSync(path.join(root, 'chat-attachments', 'ab'))).toEqual(['abcdef']);
  });

  test('s3: S3_PREFIX puts every object under it in the bucket, and list answers keys without it', async () => {
    const storage = createObjectStorage(loadConfig({ ...moto.env(BUCKET, 'tenant-a/hostflow') })) as S3ObjectStorage;
    try {
      await storage.put('p/one.txt', Buffer.from('1'));
      const raw = await storage.client.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: 'tenant-a/' }));
      expect((raw.Contents ?? []).map((o) => o.Key)).toEqual(['tenant-a/hostflow/p/one.txt']);
      expect(await storage.list('p/')).toEqual(['p/one.txt']);
    } finally {
      storage.close();
    }
  });

  test('s3: an unreachable store is an error, not a missing object', async () => {
    const storage = createObjectStorage(loadConfig({ ...moto.env(BUCKET), S3_ENDPOINT: 'http://127.0.0.1:1' }));
    try {
      const err = await storage.get('x/y').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Error);
      expect(err).not.toBeInstanceOf(ObjectNotFound);
    } finally {
      storage.close();
    }
  });

  test('check says why a store cannot be used: no server, no such bucket, a server that never answers, a folder that cannot be made', async () => {
    const refused = createObjectStorage(loadConfig({ ...moto.env(BUCKET), S3_ENDPOINT: 'http://127.0.0.1:1' }));
    const missing = createObjectStorage(loadConfig({ ...moto.env('no-such-bucket-here') }));
    // Accepts connections and never answers.
    const silent = net.createServer(() => undefined);
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const mute = createObjectStorage(loadConfig({ ...moto.env(BUCKET), S3_ENDPOINT: `http://127.0.0.1:${(silent.address() as net.AddressInfo).port}` }));
    const file = path.join(localRoot, 'a-file');
    fs.writeFileSync(file, 'not a folder');
    const underFile = createObjectStorage(loadConfig({ DATA_DIR: file }));
    try {
      await expect(refused.check(2000)).rejects.toThrow();
      await expect(missing.check(2000)).rejects.toThrow();
      const started = Date.now();
      await expect(mute.check(300)).rejects.toThrow(`the bucket ${BUCKET} did not answer within 300 ms`);
      expect(Date.now() - started).toBeLessThan(2000);
      await expect(underFile.check(2000)).rejects.toThrow(/ENOTDIR|EEXIST/);
    } finally {
      for (const s of [refused, missing, mute, underFile]) s.close();
      silent.close();
    }
  });

  test('configuration: s3 needs a bucket; the access key and the secret go together; a bad bucket or prefix is named', () => {
    expect(() => loadConfig({ STORAGE_DRIVER: 's3' })).toThrow(/S3_BUCKET="": is required when STORAGE_DRIVER=s3/);
    expect(() => loadConfig({ STORAGE_DRIVER: 's3', S3_BUCKET: 'b-1', S3_ACCESS_KEY_ID: 'id' })).toThrow(/S3_SECRET_ACCESS_KEY="": .*go together/);
    // The secret never appears in the message.
    let message = '';
    try {
      loadConfig({ STORAGE_DRIVER: 's3', S3_BUCKET: 'b-1', S3_SECRET_ACCESS_KEY: 'very-secret-value' });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/S3_ACCESS_KEY_ID="": /);
    expect(message).not.toContain('very-secret-value');
    expect(() => loadConfig({ STORAGE_DRIVER: 's3', S3_BUCKET: 'Bad_Bucket' })).toThrow(/S3_BUCKET=/);
    expect(() => loadConfig({ STORAGE_DRIVER: 's3', S3_BUCKET: 'b-1', S3_PREFIX: '../up' })).toThrow(/S3_PREFIX=/);
    expect(() => loadConfig({ STORAGE_DRIVER: 'ftp' })).toThrow(/STORAGE_DRIVER=/);
    expect(loadConfig({}).STORAGE_DRIVER).toBe('local');
  });
});
