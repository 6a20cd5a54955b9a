/**
 * WordPress locales: what a valid one looks like, its GlotPress slug, and its plural forms.
 * Pure functions (the workflow bundle never imports this; activities and routes do).
 */

/**
 * The WordPress locales translate.wordpress.org makes language packs for: GlotPress' wp_locale
 * codes, and the variants de_DE_formal, de_CH_informal, nl_NL_formal, pt_PT_ao90 and
 * ca_valencia. en_US is the source language (no pack). A value outside this list would start
 * a pipeline for a language no WordPress site asks for.
 */
export const WORDPRESS_LOCALES: readonly string[] = [
  'af', 'am', 'ar', 'arg', 'arq', 'art_xemoji', 'art_xpirate', 'ary', 'as', 'ast', 'az', 'az_TR', 'azb', 'ba', 'bal',
  'bcc', 'bel', 'bg_BG', 'bho', 'bn_BD', 'bo', 'bre', 'brx', 'bs_BA', 'ca', 'ca_valencia', 'ceb', 'ckb', 'co', 'cs_CZ',
  'cy', 'da_DK', 'de_AT', 'de_CH', 'de_CH_informal', 'de_DE', 'de_DE_formal', 'dsb', 'dv', 'dzo', 'el', 'en_AU',
  'en_CA', 'en_GB', 'en_NZ', 'en_ZA', 'eo', 'es_AR', 'es_CL', 'es_CO', 'es_CR', 'es_DO', 'es_EC', 'es_ES', 'es_GT',
  'es_HN', 'es_MX', 'es_PE', 'es_PR', 'es_UY', 'es_VE', 'et', 'eu', 'ewe', 'fa_AF', 'fa_IR', 'fi', 'fo', 'fr_BE',
  'fr_CA', 'fr_FR', 'frp', 'fuc', 'fur', 'fy', 'ga', 'gax', 'gd', 'gl_ES', 'gu', 'hat', 'hau', 'haw_US', 'haz',
  'he_IL', 'hi_IN', 'hr', 'hsb', 'hu_HU', 'hy', 'ibo', 'id_ID', 'ido', 'is_IS', 'it_IT', 'ja', 'jv_ID', 'ka_GE', 'kaa',
  'kab', 'kal', 'kin', 'kir', 'kk', 'km', 'kmr', 'kn', 'ko_KR', 'lb_LU', 'li', 'lin', 'lmo', 'lo', 'lt_LT', 'lug',
  'lv', 'mai', 'me_ME', 'mfe', 'mg_MG', 'mk_MK', 'ml_IN', 'mlt', 'mn', 'mr', 'mri', 'ms_MY', 'my_MM', 'nb_NO', 'ne_NP',
  'nl_BE', 'nl_NL', 'nl_NL_formal', 'nn_NO', 'nqo', 'oci', 'ory', 'os', 'pa_IN', 'pap_AW', 'pap_CW', 'pcd', 'pcm',
  'pl_PL', 'ps', 'pt_AO', 'pt_BR', 'pt_PT', 'pt_PT_ao90', 'rhg', 'ro_RO', 'roh', 'ru_RU', 'sa_IN', 'sah', 'scn',
  'si_LK', 'sk_SK', 'skr', 'sl_SI', 'sna', 'snd', 'so_SO', 'sq', 'sq_XK', 'sr_RS', 'srd', 'ssw', 'su_ID', 'sv_SE',
  'sw', 'syr', 'szl', 'ta_IN', 'ta_LK', 'tah', 'te', 'tg', 'th', 'tir', 'tl', 'tr_TR', 'tt_RU', 'tuk', 'twd', 'tzm',
  'ug_CN', 'uk', 'ur', 'uz_UZ', 'vi', 'wol', 'xho', 'yor', 'zh_CN', 'zh_HK', 'zh_SG', 'zh_TW', 'zul',
];
const KNOWN_LOCALES = new Set(WORDPRESS_LOCALES);

/** Why a value is not a WordPress locale, as the end of a sentence naming the field; null when it is one. */
export function localeProblem(value: string): string | null {
  if (KNOWN_LOCALES.has(value)) return null;
  if (value === 'en_US') return 'is en_US, the language WordPress strings are written in: it has no translation.';
  const language = value.split(/[_-]/)[0].toLowerCase();
  const near = WORDPRESS_LOCALES.filter((l) => l.split('_')[0] === language);
  const hint = near.length ? `did you mean ${near.length > 1 ? `${near.slice(0, -1).join(', ')} or ` : ''}${near[near.length - 1]}?` : 'e.g. de_DE, pt_BR, ja, de_DE_formal';
  return `is not a known WordPress locale (${hint}).`;
}
/** WordPress.org slugs: lower-case letters, digits and dashes (and the underscore some old themes use). */
export const SLUG_PATTERN = /^[a-z0-9](?:[a-z0-9_-]{0,98}[a-z0-9])?$/;
/** Versions as WordPress shows them: 1.2.3, 2.0-beta1. Used in the package URL. */
export const VERSION_PATTERN = /^[0-9A-Za-z][0-9A-Za-z.+_-]{0,39}$/;

/**
 * GlotPress drops the region where it is the language's main one (fr_FR -> fr) and keeps it,
 * lower-cased with a dash, elsewhere (pt_BR -> pt-br, en_GB -> en-gb). These are the
 * WordPress locales whose GlotPress slug is the bare language.
 */
const MAIN_REGION: Record<string, string> = {
  af: 'ZA', am: 'ET', ar: '', as: 'IN', az: 'AZ', be: 'BY', bg: 'BG', bn: 'BD', bo: 'CN', bs: 'BA', ca: '', cs: 'CZ',
  cy: '', da: 'DK', de: 'DE', el: '', eo: '', es: 'ES', et: '', eu: '', fa: 'IR', fi: '', fr: 'FR', ga: '', gl: 'ES',
  gu: '', he: 'IL', hi: 'IN', hr: '', hu: 'HU', hy: '', id: 'ID', is: 'IS', it: 'IT', ja: '', ka: 'GE', kk: '', km: '',
  kn: '', ko: 'KR', lo: '', lt: 'LT', lv: '', mk: 'MK', ml: 'IN', mn: '', mr: '', ms: 'MY', my: 'MM', nb: 'NO', ne: 'NP',
  nl: 'NL', nn: 'NO', pa: 'IN', pl: 'PL', ps: '', pt: 'PT', ro: 'RO', ru: 'RU', si: 'LK', sk: 'SK', sl: 'SI', sq: '',
  sr: 'RS', sv: 'SE', sw: '', ta: 'IN', te: '', th: '', tl: '', tr: 'TR', ug: 'CN', uk: '', ur: '', uz: 'UZ', vi: '',
};

/** fr_FR -> fr, pt_BR -> pt-br, de_DE_formal -> de/formal, ja -> ja, en_GB -> en-gb. */
export function glotpressLocale(locale: string): string {
  const [lang, second, third] = locale.split('_');
  let region: string | undefined;
  let variant: string | undefined;
  if (second && /^[A-Z]{2}$/.test(second)) {
    region = second;
    variant = third;
  } else {
    variant = second;
  }
  let slug = lang;
  if (region && MAIN_REGION[lang] !== region) slug = `${lang}-${region.toLowerCase()}`;
  return variant ? `${slug}/${variant}` : slug;
}

/** `{slug}`, `{type}`, `{glotpress_locale}` (and `{locale}`) of a GlotPress export URL template. */
export function glotpressUrl(template: string, slug: string, type: string, locale: string): string {
  return template
    .replaceAll('{slug}', encodeURIComponent(slug))
    .replaceAll('{type}', type)
    .replaceAll('{glotpress_locale}', glotpressLocale(locale))
    .replaceAll('{locale}', locale);
}

const RU = '(n % 10 == 1 && n % 100 != 11) ? 0 : ((n % 10 >= 2 && n % 10 <= 4 && (n % 100 < 12 || n % 100 > 14)) ? 1 : 2)';
const PLURALS: Record<string, { n: number; expr: string }> = {
  // one form
  ja: { n: 1, expr: '0' }, zh: { n: 1, expr: '0' }, ko: { n: 1, expr: '0' }, vi: { n: 1, expr: '0' }, th: { n: 1, expr: '0' },
  id: { n: 1, expr: '0' }, ms: { n: 1, expr: '0' }, lo: { n: 1, expr: '0' }, km: { n: 1, expr: '0' }, ka: { n: 1, expr: '0' },
  bo: { n: 1, expr: '0' }, my: { n: 1, expr: '0' },
  // singular for 0 and 1
  fr: { n: 2, expr: 'n > 1' }, pt_BR: { n: 2, expr: 'n > 1' }, tr: { n: 2, expr: 'n > 1' }, fa: { n: 2, expr: 'n > 1' },
  hy: { n: 2, expr: 'n > 1' }, tl: { n: 2, expr: 'n > 1' }, uz: { n: 2, expr: 'n > 1' },
  // Slavic and Baltic
  ru: { n: 3, expr: RU }, uk: { n: 3, expr: RU }, be: { n: 3, expr: RU }, sr: { n: 3, expr: RU }, hr: { n: 3, expr: RU }, bs: { n: 3, expr: RU },
  pl: { n: 3, expr: '(n == 1) ? 0 : ((n % 10 >= 2 && n % 10 <= 4 && (n % 100 < 12 || n % 100 > 14)) ? 1 : 2)' },
  cs: { n: 3, expr: '(n == 1) ? 0 : ((n >= 2 && n <= 4) ? 1 : 2)' },
  sk: { n: 3, expr: '(n == 1) ? 0 : ((n >= 2 && n <= 4) ? 1 : 2)' },
  lt: { n: 3, expr: '(n % 10 == 1 && (n % 100 < 11 || n % 100 > 19)) ? 0 : ((n % 10 >= 2 && n % 10 <= 9 && (n % 100 < 11 || n % 100 > 19)) ? 1 : 2)' },
  lv: { n: 3, expr: '(n % 10 == 1 && n % 100 != 11) ? 0 : ((n != 0) ? 1 : 2)' },
  ro: { n: 3, expr: '(n == 1) ? 0 : ((n == 0 || n % 100 >= 2 && n % 100 <= 19) ? 1 : 2)' },
  sl: { n: 4, expr: '(n % 100 == 1) ? 0 : ((n % 100 == 2) ? 1 : ((n % 100 == 3 || n % 100 == 4) ? 2 : 3))' },
  ga: { n: 5, expr: '(n == 1) ? 0 : ((n == 2) ? 1 : ((n >= 3 && n <= 6) ? 2 : ((n >= 7 && n <= 10) ? 3 : 4)))' },
  cy: { n: 4, expr: '(n == 1) ? 0 : ((n == 2) ? 1 : ((n != 8 && n != 11) ? 2 : 3))' },
  ar: { n: 6, expr: '(n == 0) ? 0 : ((n == 1) ? 1 : ((n == 2) ? 2 : ((n % 100 >= 3 && n % 100 <= 10) ? 3 : ((n % 100 >= 11 && n % 100 <= 99) ? 4 : 5))))' },
};

export interface PluralForms {
  nplurals: number;
  /** The C expression of the Plural-Forms header. */
  plural: string;
  /** The whole header value: `nplurals=2; plural=n != 1;` */
  header: string;
}

/** Plural-Forms of a locale (language_REGION first, then the language; default: two forms, n != 1). */
export function pluralForms(locale: string): PluralForms {
  const [lang, region] = locale.split('_');
  const rule = PLURALS[`${lang}_${region}`] ?? PLURALS[lang] ?? { n: 2, expr: 'n != 1' };
  return { nplurals: rule.n, plural: rule.expr, header: `nplurals=${rule.n}; plural=${rule.expr};` };
}

/** Evaluates a Plural-Forms expression as written above (for tests and checks; no eval of input). */
export function pluralIndex(locale: string, n: number): number {
  const { plural } = pluralForms(locale);
  // The expressions are our own constants, so building a function from them is safe.
  // eslint-disable-next-line no-new-func
  return Number(new Function('n', `return (${plural});`)(n));
}

/** The human name of a language, for the AI prompt. */
export function languageName(locale: string): string {
  const tag = locale.split('_').slice(0, 2).join('-');
  try {
    const name = new Intl.DisplayNames(['en'], { type: 'language' }).of(tag);
    return name ? `${name} (${locale})` : locale;
  } catch {
    return locale;
  }
}
