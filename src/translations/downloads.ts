import type { Db } from '../db/knex';
import { packageKey } from './package';
import type { TranslationPackage } from './types';

/** URL of a package; `base` is the namespace URL (…/wp-json/wu/v2). */
export function downloadUrl(base: string, pkg: TranslationPackage): string {
  return `${base}/translations/packages/${pkg.type}/${pkg.slug}/${encodeURIComponent(pkg.version)}/${pkg.locale}.zip`;
}

/** The object key of a ready package's zip, or null. */
export async function packageFile(db: Db, pkg: TranslationPackage): Promise<{ key: string; size: number; sha256: string } | null> {
  const row = await db('translation_jobs').where({ ...pkg, status: 'ready' }).whereNotNull('package_path').first('package_path', 'package_size', 'package_sha256');
  if (!row) return null;
  return { key: packageKey(row.package_path), size: Number(row.package_size), sha256: row.package_sha256 };
}
