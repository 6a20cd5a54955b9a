import type { Response } from 'supertest';
import type { TestContext } from './helpers';

/** The URL a `Link` header gives for `rel`. */
export const linkOf = (link: string | undefined, rel: 'next' | 'prev'): string | undefined => new RegExp(`<([^>]+)>; rel="${rel}"`).exec(link ?? '')?.[1];

/** A `Link` URL, asked as the context's caller (its path: the test server's host is its own). */
export const followLink = (ctx: TestContext, url: string) => ctx.http.get(url.replace(/^https?:\/\/[^/]+/, '')).set('Authorization', ctx.basic);

const idsOf = (res: Response) => res.body.map((r: { id: number }) => r.id) as number[];

/**
 * From a list's first answer, every page through rel="next", then back through rel="prev" to the
 * first, each page expected to be the one seen going forward, and the first with no rel="prev". `followed`: checks on each answer
 * reached through rel="next". Resolves with the pages' ids, in order.
 */
export async function pagesBothWays(ctx: TestContext, first: Response, followed?: (res: Response) => void): Promise<number[][]> {
  const pages: number[][] = [];
  let res = first;
  for (;;) {
    expect(res.status).toBe(200);
    pages.push(idsOf(res));
    const next = linkOf(res.headers.link, 'next');
    if (!next) break;
    res = await followLink(ctx, next);
    followed?.(res);
  }
  for (let i = pages.length - 2; i >= 0; i--) {
    res = await followLink(ctx, linkOf(res.headers.link, 'prev')!);
    expect(idsOf(res)).toEqual(pages[i]);
  }
  // And none before the first.
  expect(linkOf(res.headers.link, 'prev')).toBeUndefined();
  return pages;
}
