import crypto from 'node:crypto';
import yazl from 'yazl';
import type { ObjectStorage } from '../infra/object-storage';
import { buildL10nPhp, buildMo, buildPo, buildScriptJson, type Entry, type PackMeta } from './gettext';

export interface BuiltPackage {
  /** Path relative to the packages folder: {type}/{slug}/{version}/{slug}-{locale}.zip (translation_jobs.package_path) */
  relativePath: string;
  size: number;
  sha256: string;
  files: string[];
}

/** The object key of a package path: under translations/packages/ (with the local driver, DATA_DIR/translations/packages as before). */
export function packageKey(relativePath: string): string {
  return `translations/packages/${relativePath}`;
}

export function packageRelativePath(type: string, slug: string, version: string, locale: string): string {
  return [type, slug, version, `${slug}-${locale}.zip`].join('/');
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
 * Builds the zip and stores it (a reader never sees half a package, and rebuilding the same
 * package replaces it whole: both storage drivers put objects atomically).
 */
export async function buildPackage(
  storage: ObjectStorage,
  type: string,
  entries: Entry[],
  meta: PackMeta,
): Promise<BuiltPackage> {
  const files = languagePackFiles(entries, meta);
  const content = await zip(files, new Date(meta.revisionDate));
  const relativePath = packageRelativePath(type, meta.slug, meta.version, meta.locale);
  await storage.put(packageKey(relativePath), content, { contentType: 'application/zip' });
  return { relativePath, size: content.length, sha256: crypto.createHash('sha256').update(content).digest('hex'), files: files.map((f) => f.name) };
}
