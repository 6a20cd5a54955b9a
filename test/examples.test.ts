import { customerExamples } from '../src/customers/examples';
import type { ResourceExamples } from '../src/db/resource';
import { discountCodeExamples } from '../src/discount-codes/examples';
import { domainExamples } from '../src/domains/examples';
import { membershipExamples } from '../src/memberships/examples';
import { paymentExamples } from '../src/payments/examples';
import { productExamples } from '../src/products/examples';
import { siteExamples } from '../src/sites/examples';
import { BASE, createTestContext, type TestContext } from './helpers';

/**
 * The document's examples are real answers: replayed in a fresh database (so the ids are the
 * examples' own), each create and update answers its example, but for the times and the
 * server's address in the links. openapi.test.ts checks each example against its schema.
 */
describe('the OpenAPI examples are what the server answers', () => {
  let ctx: TestContext;
  const auth = () => ({ Authorization: ctx.basic });
  beforeAll(async () => {
    ctx = await createTestContext();
  });
  afterAll(() => ctx.close());

  /** Times and the origin of links vary from run to run. */
  const normalized = (value: unknown): unknown =>
    JSON.parse(JSON.stringify(value), (key, v) => {
      if (typeof v !== 'string') return v;
      if (/^date_|_at$/.test(key) || key === 'date_registered' || key === 'last_login') return 'TIME';
      return v.replace(/^http:\/\/127\.0\.0\.1:\d+\//, 'ORIGIN/');
    });

  const resources: [string, ResourceExamples][] = [
    ['customers', customerExamples],
    ['products', productExamples],
    ['discount-codes', discountCodeExamples],
    ['memberships', membershipExamples],
    ['payments', paymentExamples],
    ['sites', siteExamples],
    ['domains', domainExamples],
  ];

  test('create and update of every resource, in the order the examples refer to each other', async () => {
    for (const [plural, ex] of resources) {
      const created = await ctx.http.post(`${BASE}/${plural}`).set(auth()).send(ex.create);
      expect({ plural, status: created.status, body: normalized(created.body) }).toEqual({ plural, status: 200, body: normalized(ex.record) });
      if (plural === 'products') {
        // The add-on the membership and payment examples name (product 2).
        const addon = await ctx.http.post(`${BASE}/products`).set(auth()).send({ slug: 'backups', name: 'Daily backups', amount: '3.00', type: 'service' });
        expect(addon.body.id).toBe(2);
      }
    }
    for (const [plural, ex] of resources) {
      const id = ex.record.id as number;
      const updated = await ctx.http.put(`${BASE}/${plural}/${id}`).set(auth()).send(ex.update);
      expect({ plural, status: updated.status, body: normalized(updated.body) }).toEqual({ plural, status: 200, body: normalized({ ...ex.record, ...ex.update }) });
      const one = await ctx.http.get(`${BASE}/${plural}/${id}`).set(auth()).query({ _fields: 'id,model,date_created' });
      expect(normalized(one.body)).toEqual(normalized({ id, model: ex.record.model, date_created: ex.record.date_created }));
    }
  });
});
