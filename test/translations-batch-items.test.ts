import { parseBatchItem, plainCheckInput } from '../src/translations/batches';
import { WORDPRESS_LOCALES } from '../src/translations/locales';
import { checkSchema } from '../src/translations/schema';

/**
 * The batch's items are checked without zod when they are plain valid packages
 * (plainCheckInput, src/translations/batches.ts). It must take exactly what checkSchema takes,
 * and give what checkSchema gives; anything else goes to zod, whose messages answer.
 */
describe('translation batch items: the check without zod takes what checkSchema takes', () => {
  // A small deterministic generator (the same inputs every run).
  let seed = 20261129;
  const next = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  const pick = <T>(list: readonly T[]): T => list[Math.floor(next() * list.length)];
  const slugChars = 'abcz09-_AZ. /é😀\u0000';
  const randomSlug = () => Array.from({ length: Math.floor(next() * 6) }, () => pick([...slugChars])).join('');
  const slugs = ['my-plugin', 'a', 'a1', 'old_theme', 'x'.repeat(100), 'x'.repeat(101), '-a', 'a-', '_a', 'A', 'a b', '', 'é', 'a\u0000', ' a'];
  const types = ['plugin', 'theme', 'Plugin', 'core', '', 'plugin '];
  const locales = [...WORDPRESS_LOCALES.slice(0, 20), 'de_de', 'en_US', 'xx_XX', '', 'de_DE ', 'de-DE', 'DE_DE', 'ja\u0000'];
  const values = (strings: string[]) => [...strings, 1, null, true, undefined, ['a'], { a: 1 }];

  function agree(raw: object): 'plain' | 'zod' {
    const plain = plainCheckInput(raw);
    const parsed = checkSchema.safeParse(raw);
    if (plain) {
      // Never takes what zod refuses, and gives the same object.
      expect(parsed.success).toBe(true);
      expect(plain).toEqual(parsed.data);
      expect(Object.keys(plain)).toEqual(Object.keys(parsed.data!));
      return 'plain';
    }
    // A plain object of exactly the three keys that zod takes must not be left to zod.
    const own = Object.keys(raw).sort().join(',') === 'locale,slug,type' && Object.getPrototypeOf(raw) === Object.prototype;
    if (parsed.success && own) throw new Error(`zod takes ${JSON.stringify(raw)} but the check without zod does not`);
    return 'zod';
  }

  test('every known locale, both types, valid slugs: taken without zod, as zod gives them', () => {
    for (const locale of WORDPRESS_LOCALES) for (const type of ['plugin', 'theme']) expect(agree({ slug: 'my-plugin', type, locale })).toBe('plain');
    for (const slug of ['a', 'a1', 'old_theme', 'x'.repeat(100), '0-0']) expect(agree({ slug, type: 'plugin', locale: 'de_DE' })).toBe('plain');
    // Key order does not matter.
    expect(agree({ locale: 'fr_FR', type: 'theme', slug: 'twentytwenty' })).toBe('plain');
  });

  test('5,000 generated items, valid and not (wrong types, bad slugs, unknown locales, extra and missing keys): the two agree', () => {
    const seen = { plain: 0, zod: 0 };
    for (let i = 0; i < 5000; i++) {
      const raw: Record<string, unknown> = {
        slug: next() < 0.3 ? randomSlug() : pick(values(slugs)),
        type: pick(values(types)),
        locale: pick(values(locales)),
      };
      const r = next();
      if (r < 0.1) delete raw[pick(['slug', 'type', 'locale'])];
      else if (r < 0.2) raw[pick(['extra', 'version', '__proto__', 'constructor'])] = 'x';
      seen[agree(raw)]++;
    }
    // Both paths were taken, so the comparison meant something.
    expect(seen.plain).toBeGreaterThan(50);
    expect(seen.zod).toBeGreaterThan(100);
  });

  test('inherited keys, a null prototype, a __proto__ key from JSON, arrays: never taken without zod', () => {
    const inherited = Object.create({ slug: 'a', type: 'plugin', locale: 'de_DE' }) as object;
    expect(plainCheckInput(inherited)).toBeNull();
    const extraInherited = Object.assign(Object.create({ extra: 1 }) as object, { slug: 'a', type: 'plugin', locale: 'de_DE' });
    expect(plainCheckInput(extraInherited)).toBeNull();
    const withProto = JSON.parse('{"slug":"a","type":"plugin","locale":"de_DE","__proto__":{"x":1}}') as object;
    expect(plainCheckInput(withProto)).toBeNull();
    expect(checkSchema.safeParse(withProto).success).toBe(false);
    expect(plainCheckInput(['a', 'plugin', 'de_DE'])).toBeNull();
    // A null prototype is taken by both (no inherited key can hide there).
    const bare = Object.assign(Object.create(null) as object, { slug: 'a', type: 'plugin', locale: 'de_DE' });
    expect(plainCheckInput(bare)).toEqual(checkSchema.parse(bare));
  });

  test('parseBatchItem: a refused item still gets zod\'s messages, at its index', () => {
    expect(parseBatchItem({ slug: 'a', type: 'plugin', locale: 'de_DE' }, 0)).toEqual({ slug: 'a', type: 'plugin', locale: 'de_DE' });
    const refused = parseBatchItem({ slug: 'Bad Slug', type: 'core', locale: 'xx_XX' }, 7);
    expect(refused).toMatchObject({ index: 7, error: { code: 'wu_rest_invalid_parameter', data: { status: 400 } } });
    const params = (refused as { error: { data: { params: Record<string, string> } } }).error.data.params;
    expect(Object.keys(params).sort()).toEqual(['packages.7.locale', 'packages.7.slug', 'packages.7.type']);
    expect(params['packages.7.slug']).toMatch(/plugin or theme slug/);
    expect(params['packages.7.locale']).toMatch(/not a known WordPress locale/);
  });
});
