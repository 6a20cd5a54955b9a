import { BASE, type TestContext } from './helpers';

/**
 * Checks every resource answers alike (src/http/resource.ts): the record on the plural and
 * the singular path and through the list's `id` filter; unknown ids 404
 * `wu_rest_{model}_invalid_id` on every method and path; a non-numeric id matches no route.
 */
export async function expectGetOnBothPaths(ctx: TestContext, paths: { plural: string; singular: string }, record: { id: number }): Promise<void> {
  const auth = { Authorization: ctx.basic };
  const plural = await ctx.http.get(`${BASE}/${paths.plural}/${record.id}`).set(auth);
  const singular = await ctx.http.get(`${BASE}/${paths.singular}/${record.id}`).set(auth);
  expect(plural.status).toBe(200);
  expect(plural.body).toEqual(record);
  expect(singular.body).toEqual(record);
  expect((await ctx.http.get(`${BASE}/${paths.singular}`).set(auth).query({ id: record.id })).body).toEqual([record]);
}

export async function expectUnknownIds(ctx: TestContext, paths: { plural: string; singular: string }, model: string): Promise<void> {
  const auth = { Authorization: ctx.basic };
  for (const method of ['get', 'put', 'patch', 'post', 'delete'] as const) {
    for (const base of [paths.plural, paths.singular]) {
      const res = await ctx.http[method](`${BASE}/${base}/999999`).set(auth).send({});
      expect({ method, base, status: res.status, body: res.body }).toMatchObject({ status: 404, body: { code: `wu_rest_${model}_invalid_id`, message: 'Item not found.' } });
    }
  }
  for (const id of ['abc', '1x']) expect((await ctx.http.get(`${BASE}/${paths.plural}/${id}`).set(auth)).body.code).toBe('rest_no_route');
}
