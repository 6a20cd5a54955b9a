import crypto from 'node:crypto';
import gettextParser, { type GetTextTranslation, type GetTextTranslations } from 'gettext-parser';
import { pluralForms } from './locales';

/** One source string of a package and (once known) its translation. */
export interface Entry {
  /** msgctxt */
  ctx?: string;
  /** msgid */
  id: string;
  /** msgid_plural */
  plural?: string;
  /** `#:` references (`src/app.js:12`). */
  refs: string[];
  /** `#.` comments for translators. */
  note?: string;
  /** msgstr forms (one, or nplurals for a plural string); null while untranslated. */
  str: string[] | null;
  origin: 'human' | 'ai' | null;
}

export class GettextError extends Error {
  /** What is wrong, without quoting the file (for text fetched from elsewhere). */
  constructor(
    message: string,
    readonly problem: string,
  ) {
    super(message);
  }
}

function entriesOf(table: GetTextTranslations): GetTextTranslation[] {
  const out: GetTextTranslation[] = [];
  for (const [ctx, group] of Object.entries(table.translations)) {
    for (const [id, t] of Object.entries(group)) {
      if (ctx === '' && id === '') continue; // the header
      out.push(t);
    }
  }
  return out;
}

function parse(text: string, what: string): GetTextTranslations {
  if (!/^\s*(#|msgctxt|msgid)/m.test(text)) throw new GettextError(`${what} is not a gettext file (no msgid found).`, 'it holds no msgid');
  try {
    return gettextParser.po.parse(text, 'utf-8');
  } catch (err) {
    throw new GettextError(`${what} could not be parsed: ${(err as Error).message}`, 'it could not be parsed');
  }
}

/** The source strings of a POT file, in file order. */
export function parsePot(text: string): Entry[] {
  const entries = entriesOf(parse(text, 'The POT file')).map<Entry>((t) => ({
    ...(t.msgctxt ? { ctx: t.msgctxt } : {}),
    id: t.msgid,
    ...(t.msgid_plural ? { plural: t.msgid_plural } : {}),
    refs: splitRefs(t.comments?.reference),
    ...(t.comments?.extracted ? { note: t.comments.extracted } : {}),
    str: null,
    origin: null,
  }));
  if (entries.length === 0) throw new GettextError('The POT file has no strings.', 'it has no strings');
  return entries;
}

/** Checks a PO file parses (on upload). */
export function assertParsable(text: string, what: string): void {
  parse(text, what);
}

function splitRefs(ref: string | undefined): string[] {
  return ref ? ref.split(/\s+/).filter(Boolean) : [];
}

/** Matching key: context, text and plural together. */
export function entryKey(e: { ctx?: string; id: string; plural?: string }): string {
  return `${e.ctx ?? ''}\u0004${e.id}\u0000${e.plural ?? ''}`;
}

/**
 * Translations of a PO file by key: fuzzy entries and entries with an empty form are left out
 * (WordPress would not load them either); plural strings need exactly nplurals forms.
 */
export function poTranslations(text: string, nplurals: number, what: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const t of entriesOf(parse(text, what))) {
    if (t.comments?.flag?.split(',').map((f) => f.trim()).includes('fuzzy')) continue;
    const forms = t.msgstr ?? [];
    if (forms.length === 0 || forms.some((f) => f === '')) continue;
    if (t.msgid_plural && forms.length !== nplurals) continue;
    out.set(entryKey({ ctx: t.msgctxt || undefined, id: t.msgid, plural: t.msgid_plural || undefined }), t.msgid_plural ? forms : [forms[0]]);
  }
  return out;
}

/** Fills untranslated entries from the sources in order (the first that has a string wins). */
export function applyHuman(entries: Entry[], sources: Map<string, string[]>[]): Entry[] {
  return entries.map((e) => {
    if (e.str) return e;
    const key = entryKey(e);
    for (const s of sources) {
      const str = s.get(key);
      if (str) return { ...e, str, origin: 'human' };
    }
    return e;
  });
}

// ---- placeholders ---------------------------------------------------------------------------

/** printf placeholders as PHP's sprintf reads them (`%s`, `%1$d`, `%05.2f`, `%%`) and HTML tags. */
const PLACEHOLDER = /%(?:\d+\$)?[-+ 0#]*(?:'.)?\d*(?:\.\d+)?[bcdeEfFgGosuxX]|%%|<\/?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?\/?>/g;

export function placeholders(text: string): string[] {
  return (text.match(PLACEHOLDER) ?? []).map((p) => (p.startsWith('<') ? normaliseTag(p) : p)).sort();
}

/** A tag keeps its name and attributes' names; attribute values (titles, alt texts) may be translated. */
function normaliseTag(tag: string): string {
  const m = /^<(\/?)([A-Za-z][A-Za-z0-9-]*)([^>]*?)(\/?)>$/.exec(tag);
  if (!m) return tag;
  const attrs = [...m[3].matchAll(/([A-Za-z_:][-A-Za-z0-9_:.]*)\s*=\s*("[^"]*"|'[^']*'|[^\s"'=<>`]+)/g)].map((a) => {
    const name = a[1].toLowerCase();
    const value = a[2].replace(/^["']|["']$/g, '');
    // href/src and friends must stay as they are; texts may change.
    return ['title', 'alt', 'aria-label', 'placeholder'].includes(name) ? name : `${name}=${value}`;
  });
  return `<${m[1]}${m[2].toLowerCase()}${attrs.length ? ` ${attrs.sort().join(' ')}` : ''}${m[4]}>`;
}

function same(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/**
 * Why a translation breaks the source's placeholders, or null when it keeps them. A plural
 * form may follow either the singular or the plural source ("One file" / "%d files").
 */
export function placeholderProblem(e: Pick<Entry, 'id' | 'plural'>, forms: string[]): string | null {
  const single = placeholders(e.id);
  const plural = e.plural !== undefined ? placeholders(e.plural) : single;
  for (const [i, f] of forms.entries()) {
    const got = placeholders(f);
    if (same(got, single) || same(got, plural)) continue;
    const want = e.plural !== undefined && i > 0 ? plural : single;
    return `placeholders of "${truncate(e.id)}" are ${JSON.stringify(want)}, the translation${forms.length > 1 ? ` (form ${i})` : ''} has ${JSON.stringify(got)}`;
  }
  return null;
}

function truncate(s: string, n = 60): string {
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}

// ---- language pack files ----------------------------------------------------------------------

export interface PackMeta {
  slug: string;
  locale: string;
  projectName: string;
  version: string;
  /** ISO time of the build. */
  revisionDate: string;
}

/** Gettext's date form, as WordPress packs carry it: 2026-01-31 12:00:00+0000. */
export function gettextDate(iso: string): string {
  return `${new Date(iso).toISOString().slice(0, 19).replace('T', ' ')}+0000`;
}

function headers(meta: PackMeta): Record<string, string> {
  return {
    'Project-Id-Version': `${meta.projectName} ${meta.version}`,
    'PO-Revision-Date': gettextDate(meta.revisionDate),
    'Last-Translator': 'hostflow',
    'Language-Team': meta.locale,
    'MIME-Version': '1.0',
    'Content-Type': 'text/plain; charset=UTF-8',
    'Content-Transfer-Encoding': '8bit',
    'Plural-Forms': pluralForms(meta.locale).header,
    'X-Generator': 'hostflow',
    Language: meta.locale,
    'X-Domain': meta.slug,
  };
}

function table(entries: Entry[], meta: PackMeta, translatedOnly: boolean): GetTextTranslations {
  const { nplurals } = pluralForms(meta.locale);
  const h = headers(meta);
  const translations: GetTextTranslations['translations'] = {
    '': { '': { msgid: '', msgstr: [Object.entries(h).map(([k, v]) => `${k}: ${v}\n`).join('')] } },
  };
  for (const e of entries) {
    if (translatedOnly && !e.str) continue;
    const ctx = e.ctx ?? '';
    const group = (translations[ctx] ??= {});
    const comments: Record<string, string> = {};
    if (e.refs.length) comments.reference = e.refs.join(' ');
    if (e.note) comments.extracted = e.note;
    group[e.id] = {
      ...(e.ctx ? { msgctxt: e.ctx } : {}),
      msgid: e.id,
      ...(e.plural !== undefined ? { msgid_plural: e.plural } : {}),
      msgstr: e.str ?? Array.from({ length: e.plural !== undefined ? nplurals : 1 }, () => ''),
      ...(Object.keys(comments).length ? { comments: comments as unknown as GetTextTranslation['comments'] } : {}),
    };
  }
  return { charset: 'utf-8', headers: h, translations };
}

/** `{slug}-{locale}.po`: every string, untranslated ones with empty msgstr. */
export function buildPo(entries: Entry[], meta: PackMeta): Buffer {
  return gettextParser.po.compile(table(entries, meta, false), { foldLength: 0 });
}

/** `{slug}-{locale}.mo`: the translated strings, binary MO (little-endian, hashless). */
export function buildMo(entries: Entry[], meta: PackMeta): Buffer {
  return gettextParser.mo.compile(table(entries, meta, true));
}

/** A PHP single-quoted string; NUL and EOT (plural and context separators) as "\0" and "\4". */
function phpString(s: string): string {
  const parts = s.split(/([\u0000\u0004])/);
  return parts
    .map((p) => (p === '\u0000' ? '"\\0"' : p === '\u0004' ? '"\\4"' : `'${p.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`))
    .join('.');
}

/**
 * `{slug}-{locale}.l10n.php`, the PHP translation file of WordPress 6.5 (WP_Translation_File_PHP):
 * a returned array of lower-cased headers and `messages` keyed by msgid (msgctxt EOT msgid with
 * a context), plural forms joined by NUL.
 */
export function buildL10nPhp(entries: Entry[], meta: PackMeta): Buffer {
  const h = headers(meta);
  const lines: string[] = [];
  for (const [k, v] of Object.entries(h)) lines.push(`${phpString(k.toLowerCase())}=>${phpString(v)}`);
  const messages = entries
    .filter((e) => e.str)
    .map((e) => `${phpString(e.ctx ? `${e.ctx}\u0004${e.id}` : e.id)}=>${phpString(e.str!.join('\u0000'))}`);
  lines.push(`'messages'=>[${messages.join(',')}]`);
  return Buffer.from(`<?php\nreturn [${lines.join(',')}];\n`, 'utf8');
}

/** The JavaScript file a reference points at (`src/app.js:12` -> `src/app.js`), minified names unminified as wp i18n does. */
export function scriptOf(ref: string): string | null {
  const file = ref.replace(/:\d+$/, '');
  if (!/\.js$/.test(file)) return null;
  return file.replace(/\.min\.js$/, '.js');
}

/**
 * The per-script JSON files (Jed 1.x, as `wp i18n make-json` writes them):
 * `{slug}-{locale}-{md5 of the script path}.json`, for translated strings referenced from .js files.
 */
export function buildScriptJson(entries: Entry[], meta: PackMeta): { name: string; content: Buffer; script: string }[] {
  const byScript = new Map<string, Entry[]>();
  for (const e of entries) {
    if (!e.str) continue;
    for (const ref of e.refs) {
      const script = scriptOf(ref);
      if (!script) continue;
      const list = byScript.get(script) ?? [];
      if (!list.includes(e)) list.push(e);
      byScript.set(script, list);
    }
  }
  const plural = pluralForms(meta.locale).header;
  return [...byScript.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([script, list]) => {
      const messages: Record<string, unknown> = { '': { domain: 'messages', lang: meta.locale, 'plural-forms': plural } };
      for (const e of list) messages[e.ctx ? `${e.ctx}\u0004${e.id}` : e.id] = e.str;
      const json = {
        'translation-revision-date': gettextDate(meta.revisionDate),
        generator: 'hostflow',
        source: script,
        domain: 'messages',
        locale_data: { messages },
      };
      const md5 = crypto.createHash('md5').update(script).digest('hex');
      return { name: `${meta.slug}-${meta.locale}-${md5}.json`, content: Buffer.from(JSON.stringify(json), 'utf8'), script };
    });
}
