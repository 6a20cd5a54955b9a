import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import yazl from 'yazl';
import { buildL10nPhp, buildMo, buildPo, buildScriptJson, type Entry, type PackMeta } from './gettext';

export interface BuiltPackage {
  /** Path relative to the packages folder: {type}/{slug}/{version}/{slug}-{locale}.zip */
  relativePath: string;
  size: number;
  sha256: string;
  files: string[];
}

/** The packages folder under DATA_DIR. */
export function packagesDir(dataDir: string): string {
  return path.join(dataDir, 'translations', 'packages');
}

export function packageRelativePath(type: string, slug: string, version: string, locale: string): string {
  return path.join(type, slug, version, `${slug}-${locale}.zip`);
}

/** The files of a WordPress language pack, as the zip holds them (flat, as translate.wordpress.org ships them). */
export function languagePackFiles(entries: Entry[], meta: PackMeta): { name: string; content: Buffer }[] {
  const base = `${meta.slug}-${meta.locale}`;
  return [
    { name: `${base}.po`, content: buildPo(entries, meta) },
    { name: `${base}.mo`, content: buildMo(entries, meta) },
    { name: `${base}.l10n.php`, content: buildL10nPhp(entries, meta) },
    ...buildScriptJson(entries, meta).map(({ name, content }) => ({ name, content })),
  ];
}

function zip(files: { name: string; content: Buffer }[], mtime: Date): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const z = new yazl.ZipFile();
    for (const f of files) z.addBuffer(f.content, f.name, { mtime, mode: 0o100644 });
    const chunks: Buffer[] = [];
    z.outputStream.on('data', (c: Buffer) => chunks.push(c));
    z.outputStream.on('error', reject);
    z.outputStream.on('end', () => resolve(Buffer.concat(chunks)));
    z.end();
  });
}

/**
 * Builds the zip and stores it (written to a temporary name, then renamed: a reader never sees
 * half a file, and rebuilding the same package replaces it atomically).
 */
export async function buildPackage(
  dataDir: string,
  type: string,
  entries: Entry[],
  meta: PackMeta,
): Promise<BuiltPackage> {
  const files = languagePackFiles(entries, meta);
  const content = await zip(files, new Date(meta.revisionDate));
  const relativePath = packageRelativePath(type, meta.slug, meta.version, meta.locale);
  const full = path.join(packagesDir(dataDir), relativePath);
  await fs.promises.mkdir(path.dirname(full), { recursive: true });
  const tmp = `${full}.${process.pid}.${crypto.randomBytes(4).toString('hex')}.tmp`;
  await fs.promises.writeFile(tmp, content);
  await fs.promises.rename(tmp, full);
  return { relativePath, size: content.length, sha256: crypto.createHash('sha256').update(content).digest('hex'), files: files.map((f) => f.name) };
}
