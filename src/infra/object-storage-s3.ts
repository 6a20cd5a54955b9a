import fs from 'node:fs';
import type { Readable } from 'node:stream';
import {
  CopyObjectCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { checkKey, checkPrefix, ObjectNotFound, RangeNotSatisfiable, within, type ObjectInfo, type ObjectRead, type ObjectStorage, type PutFileOptions, type PutOptions, type RangeRequest } from './object-storage';

/**
 * The s3 driver of object-storage.ts, in a file of its own so that only a process configured
 * for S3 loads the AWS SDK (createObjectStorage requires this file then).
 */

export interface S3Settings {
  bucket: string;
  /** Prepended to every key (`hostflow/` keeps hostflow's objects in a folder of a shared bucket). */
  prefix?: string;
  endpoint?: string;
  region: string;
  credentials?: { accessKeyId: string; secretAccessKey: string };
  forcePathStyle: boolean;
}

/** The s3 driver: one bucket (and optional key prefix) of an S3-compatible store. */
export class S3ObjectStorage implements ObjectStorage {
  readonly driver = 's3' as const;
  readonly client: S3Client;
  private readonly bucket: string;
  private readonly prefix: string;

  constructor(s: S3Settings) {
    this.bucket = s.bucket;
    this.prefix = s.prefix ? (s.prefix.endsWith('/') ? s.prefix : `${s.prefix}/`) : '';
    this.client = new S3Client({
      region: s.region,
      endpoint: s.endpoint,
      forcePathStyle: s.forcePathStyle,
      credentials: s.credentials,
      // Checksums only where the API requires them: S3-compatible stores other than AWS do not
      // all take the SDK's default trailing checksums on uploads.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      maxAttempts: 3,
      // A store that stops answering fails the request instead of holding it (and its socket) forever.
      requestHandler: { connectionTimeout: 5_000, requestTimeout: 60_000 },
    });
  }

  private name(key: string): string {
    return this.prefix + checkKey(key);
  }

  async put(key: string, body: Buffer, opts: PutOptions = {}): Promise<void> {
    await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: this.name(key), Body: body, ContentLength: body.length, ContentType: opts.contentType }));
  }

  async putFile(key: string, file: string, opts: PutFileOptions = {}): Promise<void> {
    const name = this.name(key);
    const { size } = await fs.promises.stat(file);
    // One PutObject with the length known up front (S3 takes up to 5 GB so): the stream is sent as it is read.
    const body = fs.createReadStream(file);
    try {
      await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: name, Body: body, ContentLength: size, ContentType: opts.contentType }));
    } finally {
      body.destroy();
    }
  }

  async get(key: string, opts: { range?: RangeRequest } = {}): Promise<ObjectRead> {
    const name = this.name(key);
    const r = opts.range;
    const header = r ? ('suffix' in r ? `bytes=-${r.suffix}` : `bytes=${r.start}-${r.end ?? ''}`) : undefined;
    if (r && 'suffix' in r && r.suffix <= 0) throw new RangeNotSatisfiable((await this.head(key))?.size ?? 0);
    try {
      const out = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: name, Range: header }));
      const stream = out.Body as Readable;
      let range: { start: number; end: number } | null = null;
      let size = Number(out.ContentLength ?? 0);
      const m = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(out.ContentRange ?? '');
      if (m) {
        range = { start: Number(m[1]), end: Number(m[2]) };
        size = Number(m[3]);
      }
      // A store that ignores ranges sends the whole object: answered as such (range null), as HTTP allows.
      return { stream, size, contentType: out.ContentType ?? null, range };
    } catch (err) {
      const status = (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
      if (status === 404) throw new ObjectNotFound(key);
      if (status === 416) {
        const info = await this.head(key);
        if (!info) throw new ObjectNotFound(key);
        throw new RangeNotSatisfiable(info.size);
      }
      throw err;
    }
  }

  async check(timeoutMs: number): Promise<void> {
    await within(timeoutMs, `the bucket ${this.bucket}`, (abortSignal) => this.client.send(new HeadBucketCommand({ Bucket: this.bucket }), { abortSignal }));
  }

  async head(key: string): Promise<ObjectInfo | null> {
    try {
      const out = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: this.name(key) }));
      return { size: Number(out.ContentLength ?? 0), contentType: out.ContentType ?? null };
    } catch (err) {
      if ((err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404) return null;
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.name(key) }));
  }

  async list(prefix: string): Promise<string[]> {
    const from = this.prefix + checkPrefix(prefix);
    const keys: string[] = [];
    let token: string | undefined;
    do {
      const out = await this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: from, ContinuationToken: token }));
      for (const o of out.Contents ?? []) if (o.Key) keys.push(o.Key.slice(this.prefix.length));
      token = out.IsTruncated ? out.NextContinuationToken : undefined;
    } while (token);
    return keys;
  }

  async copy(from: string, to: string): Promise<void> {
    const source = `${this.bucket}/${this.name(from).split('/').map(encodeURIComponent).join('/')}`;
    try {
      await this.client.send(new CopyObjectCommand({ Bucket: this.bucket, Key: this.name(to), CopySource: source }));
    } catch (err) {
      if ((err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404) throw new ObjectNotFound(from);
      throw err;
    }
  }

  locationOf(key: string): string {
    return `s3://${this.bucket}/${this.name(key)}`;
  }

  /** Removes many keys, 1000 a request (the API's limit). */
  async deleteMany(keys: string[]): Promise<void> {
    for (let i = 0; i < keys.length; i += 1000) {
      const batch = keys.slice(i, i + 1000).map((k) => ({ Key: this.name(k) }));
      const out = await this.client.send(new DeleteObjectsCommand({ Bucket: this.bucket, Delete: { Objects: batch, Quiet: true } }));
      if (out.Errors?.length) throw new Error(`could not delete ${out.Errors.length} object(s), e.g. ${out.Errors[0].Key}: ${out.Errors[0].Code}`);
    }
  }

  close(): void {
    this.client.destroy();
  }
}
