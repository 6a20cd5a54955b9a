import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import type { Express } from 'express';
import { Decimal } from '../src/db/money';
import { openApiPath } from '../src/openapi/document';
import { ContractChecker } from './contract';
import { BASE, createTestContext, type TestContext } from './helpers';

/** Every route Express really serves, walking the router stacks (method + OpenAPI path). */
function servedRoutes(app: Express): Set<string> {
  const out = new Set<string>();
  const walk = (stack: any[], prefix: string) => {
    for (const layer of stack) {
      if (layer.route) {
        const paths = Array.isArray(layer.route.path) ? layer.route.path : [layer.route.path];
        for (const p of paths) {
          const full = `${prefix}${p === '/' && prefix ? '' : p}` || '/';
          for (const m of Object.keys(layer.route.methods)) if (m !== '_all') out.add(`${m.toUpperCase()} ${openApiPath(full)}`);
        }
      } else if (layer.handle?.stack && typeof layer.rawPath === 'string') {
        walk(layer.handle.stack, `${prefix}${layer.rawPath}`);
      }
    }
  };
  walk((app as any).router.stack, '');
  return out;
}

describe('OpenAPI document', () => {
  let ctx: TestContext;
  let doc: any;
  beforeAll(async () => {
    ctx = await createTestContext();
    const res = await ctx.http.get(`${BASE}/openapi.json`);
    expect(res.status).toBe(200);
    doc = res.body;
  });
  afterAll(() => ctx.close());

  test('is served without authentication as OpenAPI 3.1 with the security schemes', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.components.securitySchemes).sort()).toEqual(['apiKeyQuery', 'apiSecretQuery', 'basicAuth', 'bearerAuth']);
    expect(doc.components.schemas.Error.required).toEqual(['code', 'message', 'data']);
    for (const model of ['Customer', 'Product', 'Membership', 'Payment', 'Site', 'Domain']) expect(doc.components.schemas[model]).toBeDefined();
  });

  test('every route the app serves is documented, and every documented operation is served', () => {
    const served = [...servedRoutes(ctx.app)].filter((r) => !r.includes(' /docs'));
    const documented = Object.entries(doc.paths).flatMap(([p, item]: [string, any]) => Object.keys(item).map((m) => `${m.toUpperCase()} ${p}`));
    expect(served.length).toBeGreaterThan(50);
    expect(served.filter((r) => !documented.includes(r))).toEqual([]);
    expect(documented.filter((r) => !served.includes(r))).toEqual([]);
  });

  test('the support chat namespace is documented: its 19 contract routes, Bearer security, public availability', () => {
    const chat = '/wp-json/ultimate-multisite-support-tickets/v1';
    const contract = [
      'GET /chat/availability', 'POST /chat/sessions', 'GET /chat/sessions/{session_id}/messages', 'POST /chat/sessions/{session_id}/messages',
      'POST /chat/sessions/{session_id}/attachments', 'GET /chat/attachments/{attachment_id}/download', 'POST /chat/sessions/{session_id}/context',
      'POST /chat/sessions/{session_id}/token', 'GET /chat/agent/sessions', 'GET /chat/agent/availability', 'POST /chat/agent/availability',
      'GET /chat/agent/reports', 'GET /chat/agent/canned-replies', 'POST /chat/sessions/{session_id}/assign', 'POST /chat/sessions/{session_id}/metadata',
      'POST /chat/sessions/{session_id}/link-ticket', 'POST /chat/sessions/{session_id}/agent-time', 'POST /chat/sessions/{session_id}/convert-ticket',
      'POST /chat/sessions/{session_id}/satisfaction',
    ];
    expect(contract).toHaveLength(19);
    for (const r of contract) {
      const [method, p] = r.split(' ');
      expect(doc.paths[`${chat}${p}`]?.[method.toLowerCase()]).toBeDefined();
    }
    expect(doc.paths[`${chat}/chat/availability`].get.security).toEqual([]);
    expect(doc.paths[`${chat}/chat/agent/sessions`].get.security).toContainEqual({ bearerAuth: [] });
    expect(doc.paths[`${chat}/chat/sessions/{session_id}/satisfaction`].post.security).toEqual([{ bearerAuth: [] }]);
    expect(Object.keys(doc.paths[`${chat}/chat/sessions/{session_id}/attachments`].post.requestBody.content)).toEqual(['multipart/form-data']);
  });

  test('request bodies come from the validating schemas (enumerations, required fields, no unknown keys)', () => {
    const create = doc.paths['/wp-json/wu/v2/memberships'].post.requestBody.content['application/json'].schema;
    expect(create.required).toEqual(expect.arrayContaining(['customer_id', 'plan_id']));
    expect(create.properties.status.enum).toEqual(['pending', 'active', 'trialing', 'expired', 'on-hold', 'cancelled']);
    expect(create.additionalProperties).toBe(false);
    const list = doc.paths['/wp-json/wu/v2/customers'].get;
    const perPage = list.parameters.find((p: any) => p.name === 'per_page');
    expect(perPage.schema).toMatchObject({ minimum: 1, maximum: 100, default: 20 });
    expect(list.responses['200'].headers['X-WP-Total']).toBeDefined();
    expect(list.responses['401'].content['application/json'].schema.$ref).toBe('#/components/schemas/Error');
  });

  test('wu/v2 bodies may be form-encoded (same schema), chat bodies are JSON only; the new error statuses and limits are documented', () => {
    const create = doc.paths['/wp-json/wu/v2/products'].post;
    expect(Object.keys(create.requestBody.content)).toEqual(['application/json', 'application/x-www-form-urlencoded']);
    // The same schema, but that a form spells an array by index (price_variations[0][amount]=…).
    const { price_variations: formVariations, ...formRest } = create.requestBody.content['application/x-www-form-urlencoded'].schema.properties;
    const { price_variations: jsonVariations, ...jsonRest } = create.requestBody.content['application/json'].schema.properties;
    expect(formRest).toEqual(jsonRest);
    expect(jsonVariations.type).toBe('array');
    expect(formVariations.anyOf ?? [formVariations]).toEqual(expect.arrayContaining([expect.objectContaining({ type: 'object', maxProperties: 20 })]));
    expect(Object.keys(doc.paths['/wp-json/ultimate-multisite-support-tickets/v1/chat/agent/agents'].post.requestBody.content)).toEqual(['application/json']);
    expect(create.responses['403'].description).toMatch(/rest_cross_site_forbidden/);
    expect(create.responses['415'].description).toMatch(/rest_unsupported_media_type/);
    for (const op of [create, doc.paths['/wp-json/wu/v2/openapi.json'].get]) expect(op.responses['431'].description).toMatch(/rest_request_header_too_large/);
    expect(doc.info.description).toMatch(/at most 16 KiB \(else 431: put long inputs in a body/);
    expect(doc.info.description).toMatch(/nested at most 32 levels and holding at most 10000 values/);
    expect(doc.info.description).toMatch(/application\/x-www-form-urlencoded/);
  });

  test('creates link to the operations on what they created (for generated clients and stateful fuzzing)', () => {
    const customers = doc.paths['/wp-json/wu/v2/customers'].post.responses['200'].links;
    expect(customers.getWuV2CustomersById).toEqual({ operationId: 'getWuV2CustomersById', parameters: { id: '$response.body#/id' } });
    expect(Object.keys(customers)).toEqual(expect.arrayContaining(['putWuV2CustomersById', 'patchWuV2CustomersById', 'deleteWuV2CustomersById']));
    // A nested record's id feeds {session_id}; deeper paths with another parameter get no link.
    const chat = '/wp-json/ultimate-multisite-support-tickets/v1';
    const session = doc.paths[`${chat}/chat/sessions`].post.responses['201'].links;
    expect(session.getUltimateMultisiteSupportTicketsV1ChatSessionsBySessionIdMessages.parameters).toEqual({ session_id: '$response.body#/session/id' });
    const sites = doc.paths['/wp-json/wu/v2/sites'].post.responses['200'].links;
    expect(sites.postWuV2SitesByIdUsers.parameters).toEqual({ id: '$response.body#/id' });
    expect(sites.deleteWuV2SitesByIdUsersByUserId).toBeUndefined();
    // Every link names an operation of the document.
    const ids = new Set(Object.values(doc.paths).flatMap((item: any) => Object.values(item).map((op: any) => op.operationId)));
    const linked = Object.values(doc.paths).flatMap((item: any) =>
      Object.values(item).flatMap((op: any) => Object.values(op.responses).flatMap((r: any) => Object.values(r.links ?? {}).map((l: any) => l.operationId))),
    );
    expect(linked.length).toBeGreaterThan(50);
    expect(linked.filter((id) => !ids.has(id))).toEqual([]);
  });

  const RESOURCES = ['customers', 'products', 'memberships', 'payments', 'sites', 'domains'];
  const EMBEDDABLE: Record<string, string[]> = { customers: [], products: [], memberships: ['customer', 'plan'], payments: ['customer', 'membership', 'product'], sites: ['customer', 'membership'], domains: ['site', 'customer'] };
  const component = (plural: string) => `${plural.charAt(0).toUpperCase()}${plural.slice(1, -1)}`;

  test('_fields and _embed are query parameters of every record GET; the answer is the record or its projection', () => {
    for (const plural of RESOURCES) {
      for (const path of [`/wp-json/wu/v2/${plural}`, `/wp-json/wu/v2/${plural}/{id}`, `/wp-json/wu/v2/${plural.slice(0, -1)}/{id}`]) {
        const op = doc.paths[path].get;
        const names = op.parameters.map((p: { name: string }) => p.name);
        const fields = op.parameters.find((p: { name: string }) => p.name === '_fields');
        expect({ path, fields: fields?.schema.type, explode: fields?.explode }).toEqual({ path, fields: 'array', explode: true });
        expect(fields.description).toMatch(/date_created/);
        expect({ path, embed: names.includes('_embed') }).toEqual({ path, embed: EMBEDDABLE[plural].length > 0 });
        if (EMBEDDABLE[plural].length) expect(op.parameters.find((p: { name: string }) => p.name === '_embed').description).toContain(EMBEDDABLE[plural].join(', '));
        const schema = op.responses['200'].content['application/json'].schema;
        const answer = path.endsWith('{id}') ? schema : schema.items;
        expect(answer).toEqual({ anyOf: [{ $ref: `#/components/schemas/${component(plural)}` }, { $ref: `#/components/schemas/${component(plural)}Fields` }], 'x-fields-projection': true });
      }
      // Writes answer the whole record.
      expect(doc.paths[`/wp-json/wu/v2/${plural}`].post.responses['200'].content['application/json'].schema).toEqual({ $ref: `#/components/schemas/${component(plural)}` });
      // The projection: the record's fields, none of them required, at any depth.
      const record = doc.components.schemas[component(plural)];
      const projection = doc.components.schemas[`${component(plural)}Fields`];
      expect(Object.keys(projection.properties)).toEqual(Object.keys(record.properties));
      expect(record.required).toContain('id');
      expect(JSON.stringify(projection)).not.toMatch(/"required":\[/);
    }
  });

  test('records carry _links, and _embedded with the linked records their schemas', () => {
    const membership = doc.components.schemas.Membership.properties;
    expect(Object.keys(membership._links.properties)).toEqual(['self', 'collection', 'customer', 'plan']);
    expect(membership._links.properties.customer.items.properties.embeddable).toEqual(expect.objectContaining({ type: 'boolean' }));
    expect(membership._embedded.properties).toEqual({
      customer: { type: 'array', items: { $ref: '#/components/schemas/Customer' }, minItems: 1, maxItems: 1 },
      plan: { type: 'array', items: { $ref: '#/components/schemas/Product' }, minItems: 1, maxItems: 1 },
    });
    // A site links to its template and a payment to its parent, without embedding them.
    expect(Object.keys(doc.components.schemas.Site.properties._links.properties)).toEqual(['self', 'collection', 'customer', 'membership', 'template']);
    expect(Object.keys(doc.components.schemas.Site.properties._embedded.properties)).toEqual(['customer', 'membership']);
    expect(Object.keys(doc.components.schemas.Payment.properties._embedded.properties)).toEqual(['customer', 'membership', 'product']);
    expect(doc.components.schemas.Customer.properties._links.required).toEqual(['self', 'collection']);
    expect(doc.components.schemas.Customer.properties._embedded).toBeUndefined();
    for (const name of ['Customer', 'Membership']) expect(doc.components.schemas[name].required).not.toContain('_links');
  });

  test('addon_products and line_items have their item schemas (no unknown[])', () => {
    const addon = doc.components.schemas.Membership.properties.addon_products;
    expect(addon).toEqual({
      type: 'array',
      items: { type: 'object', properties: { product_id: expect.objectContaining({ type: 'integer' }), quantity: expect.objectContaining({ type: 'integer' }) }, required: ['product_id', 'quantity'], additionalProperties: false },
    });
    const line = doc.components.schemas.Payment.properties.line_items;
    expect(line.type).toBe('array');
    expect(line.items.required).toEqual(['name', 'quantity', 'unit_price']);
    expect(line.items.properties.unit_price).toEqual({ type: 'number' });
    expect(line.items.properties.product_id).toEqual({ anyOf: [expect.objectContaining({ type: 'integer' }), { type: 'null' }] });
    expect(line.items.additionalProperties).toBe(false);
    for (const name of ['Membership', 'Payment']) expect(JSON.stringify(doc.components.schemas[name]).includes('"items":{}')).toBe(false);
  });

  test('every example in the document (request bodies, answers, parameters) validates against its schema', () => {
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats(ajv);
    // multipleOf on the number as JSON writes it (as test/document-rules.test.ts).
    ajv.removeKeyword('multipleOf');
    ajv.addKeyword({ keyword: 'multipleOf', type: 'number', schemaType: 'number', validate: (step: number, data: number) => new Decimal(String(data)).mod(String(step)).isZero() });
    // The components once, under an id the schemas' $refs are pointed at.
    const toDoc = (schema: object) => JSON.parse(JSON.stringify(schema).replaceAll('"$ref":"#/components/', '"$ref":"doc#/components/'));
    ajv.addSchema({ $id: 'doc', components: toDoc(doc.components) });
    const valid = (schema: object, value: unknown) => {
      const validate = ajv.compile(toDoc(schema));
      return validate(value) ? true : ajv.errorsText(validate.errors);
    };
    const checked: string[] = [];
    const failures: string[] = [];
    const media = (where: string, content: Record<string, any> | undefined) => {
      for (const [type, m] of Object.entries(content ?? {})) {
        const values = [...(m.example !== undefined ? [['example', m.example]] : []), ...Object.entries(m.examples ?? {}).map(([k, e]: [string, any]) => [k, e.value])];
        for (const [name, value] of values) {
          const verdict = valid(m.schema, value);
          checked.push(`${where} ${type} ${name}`);
          if (verdict !== true) failures.push(`${where} ${type} ${name}: ${verdict}`);
        }
      }
    };
    for (const [path, item] of Object.entries(doc.paths) as [string, any][]) {
      for (const [method, op] of Object.entries(item) as [string, any][]) {
        const where = `${method.toUpperCase()} ${path}`;
        media(`${where} body`, op.requestBody?.content);
        for (const [status, r] of Object.entries(op.responses) as [string, any][]) media(`${where} ${status}`, r.content);
        for (const p of op.parameters ?? []) {
          if (p.example === undefined) continue;
          const verdict = valid(p.schema, p.example);
          checked.push(`${where} ${p.name}`);
          if (verdict !== true) failures.push(`${where} parameter ${p.name}: ${verdict}`);
        }
      }
    }
    expect(failures).toEqual([]);
    // Every resource: create body and answer, one record (whole and with _fields), a page, update body and answer, on both paths.
    for (const plural of RESOURCES) {
      for (const [method, path] of [['POST', ''], ['GET', '/{id}'], ['GET', ''], ['PUT', '/{id}'], ['PATCH', '/{id}']]) {
        expect(checked.filter((c) => c.startsWith(`${method} /wp-json/wu/v2/${plural}${path} `)).length).toBeGreaterThanOrEqual(method === 'GET' && path === '' ? 2 : 2);
      }
    }
    expect(checked.length).toBeGreaterThan(150);
    // And a wrong example would be caught.
    const record = doc.paths['/wp-json/wu/v2/memberships/{id}'].get.responses['200'].content['application/json'];
    expect(valid(record.schema, { ...record.examples.record.value, addon_products: [{ product_id: 'two' }] })).not.toBe(true);
  });

  test('the contract checker catches a response that does not match', () => {
    const checker = new ContractChecker(() => doc);
    checker.check({ method: 'GET', route: '/wp-json/wu/v2/customers/:id', status: 200, body: { id: 'one' } });
    checker.check({ method: 'GET', route: '/wp-json/wu/v2/customers/:id', status: 418, body: {} });
    checker.check({ method: 'GET', route: '/wp-json/wu/v2/nowhere', status: 200, body: {} });
    checker.check({ method: 'GET', route: '/wp-json/wu/v2/auth', status: 200, body: { success: true, label: 'x', message: 'y' } });
    expect(checker.violations).toHaveLength(3);
    expect(checker.violations[0]).toMatch(/customers\/\{id\} 200/);
    expect(checker.violations[1]).toMatch(/status 418 is not documented/);
    expect(checker.violations[2]).toMatch(/not in the OpenAPI document/);
  });

  test('passes the Spectral OpenAPI linter with no errors or warnings', () => {
    const dir = path.resolve(__dirname, '..', '.tmp');
    fs.mkdirSync(dir, { recursive: true });
    const file = path.join(dir, `openapi-${process.pid}.json`);
    fs.writeFileSync(file, JSON.stringify(doc, null, 2));
    const bin = path.resolve(__dirname, '..', 'node_modules', '.bin', 'spectral');
    const r = spawnSync(bin, ['lint', file, '--ruleset', path.resolve(__dirname, '..', '.spectral.yaml'), '--fail-severity', 'warn', '--format', 'text'], { encoding: 'utf8' });
    fs.rmSync(file, { force: true });
    if (r.status !== 0) throw new Error(`spectral lint failed:\n${r.stdout}\n${r.stderr}`);
    expect(r.status).toBe(0);
  });

  test('/docs serves the interactive reference from local assets (no CDN)', async () => {
    const page = await ctx.http.get('/docs');
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toMatch(/text\/html/);
    expect(page.text).not.toMatch(/https?:\/\//);
    const init = await ctx.http.get('/docs/init.js');
    expect(init.text).toContain(`${BASE}/openapi.json`);
    const bundle = await ctx.http.get('/docs/assets/swagger-ui-bundle.js');
    expect(bundle.status).toBe(200);
    expect(bundle.text.length).toBeGreaterThan(100_000);
  });
});
