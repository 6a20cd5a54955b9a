/**
 * Contract checking for the tests: every JSON response a test provokes is validated against
 * the OpenAPI document (its status must be documented for the operation, its body must match
 * the documented schema). Violations are collected and fail the test file at close().
 */
import type { ValidateFunction } from 'ajv';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { openApiPath } from '../src/openapi/document';
import { PROJECTION_MARKER } from '../src/openapi/projections';

type Doc = Record<string, any>;

/** Replace $refs to components by the components themselves (our schemas are not recursive). */
export function inlineRefs(node: unknown, doc: Doc): unknown {
  if (Array.isArray(node)) return node.map((n) => inlineRefs(n, doc));
  if (node && typeof node === 'object') {
    const obj = node as Record<string, unknown>;
    if (typeof obj.$ref === 'string' && obj.$ref.startsWith('#/components/schemas/')) {
      return inlineRefs(doc.components.schemas[obj.$ref.slice('#/components/schemas/'.length)], doc);
    }
    return Object.fromEntries(Object.entries(obj).map(([k, v]) => [k, inlineRefs(v, doc)]));
  }
  return node;
}

/** The answer's schema without `_fields`: where the document allows a projection, the record itself. */
export function withoutProjections(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(withoutProjections);
  if (node && typeof node === 'object') {
    const obj = node as Record<string, unknown>;
    if (obj[PROJECTION_MARKER] === true && Array.isArray(obj.anyOf)) return withoutProjections(obj.anyOf[0]);
    return Object.fromEntries(Object.entries(obj).map(([k, v]) => [k, withoutProjections(v)]));
  }
  return node;
}

const FIELDS_KEY = /^_fields(\[\d*\])?$/;

export class ContractChecker {
  readonly violations: string[] = [];
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true });
  private readonly cache = new Map<string, ValidateFunction | null>();

  constructor(private readonly doc: () => Doc) {
    addFormats(this.ajv);
  }

  /** `query`: the request's; without `_fields`, a record answer must be the whole record (not a projection). */
  check(r: { method: string; route: string | null; status: number; body: unknown; query?: Record<string, unknown> }): void {
    if (r.route === null) return; // no route matched: the generic 404, not an operation
    const doc = this.doc();
    const path = openApiPath(r.route);
    const op = doc.paths?.[path]?.[r.method.toLowerCase()];
    if (!op) {
      this.violations.push(`${r.method} ${path}: not in the OpenAPI document`);
      return;
    }
    const resp = op.responses?.[String(r.status)];
    if (!resp) {
      this.violations.push(`${r.method} ${path}: status ${r.status} is not documented`);
      return;
    }
    const projected = Object.keys(r.query ?? {}).some((k) => FIELDS_KEY.test(k));
    const key = `${r.method} ${path} ${r.status}${projected ? ' _fields' : ''}`;
    if (!this.cache.has(key)) {
      const schema = resp.content?.['application/json']?.schema;
      this.cache.set(key, schema ? this.ajv.compile((projected ? inlineRefs(schema, doc) : withoutProjections(inlineRefs(schema, doc))) as object) : null);
    }
    const validate = this.cache.get(key);
    if (validate && !validate(r.body)) {
      this.violations.push(`${key}: ${this.ajv.errorsText(validate.errors)} in ${JSON.stringify(r.body).slice(0, 300)}`);
    }
  }
}
