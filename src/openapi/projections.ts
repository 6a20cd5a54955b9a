/**
 * What the document says of WordPress' `_links`, `_embedded` and `_fields` (src/http/fields.ts,
 * src/http/embed.ts): record components get their `_links` and `_embedded`; an answer that
 * honours `_fields` is the record, or (`x-fields-projection`) the same record with every field
 * optional, at any depth: `{Name}Fields`.
 */
type Json = Record<string, unknown>;

const REF = '#/components/schemas/';

/** The marker of an answer's projection branch (test/contract.ts checks the record itself when no `_fields` was sent). */
export const PROJECTION_MARKER = 'x-fields-projection';

const LINK = {
  type: 'object',
  required: ['href'],
  properties: {
    href: { type: 'string', format: 'uri' },
    embeddable: { type: 'boolean', description: 'true: _embed can embed the record it points at.' },
  },
  additionalProperties: false,
};
const LINK_LIST = { type: 'array', items: LINK, minItems: 1 };

/** `_links` and `_embedded` on the record components that link to others. */
export function withRecordLinks(schemas: Record<string, Json>, links: ReadonlyMap<string, Record<string, { component: string; embeddable: boolean }>>): void {
  for (const [name, rels] of links) {
    const schema = schemas[name];
    if (!schema?.properties) continue;
    const relProps = Object.fromEntries(Object.keys(rels).map((rel) => [rel, LINK_LIST]));
    const embeddable = Object.entries(rels).filter(([, r]) => r.embeddable);
    const properties: Json = {
      ...(schema.properties as Json),
      _links: {
        type: 'object',
        description: 'Links, as WordPress: self, collection, and the records the reference fields name (when set).',
        required: ['self', 'collection'],
        properties: { self: LINK_LIST, collection: LINK_LIST, ...relProps },
        additionalProperties: false,
      },
    };
    if (embeddable.length > 0) {
      properties._embedded = {
        type: 'object',
        description: 'With _embed: the linked records, each under its link relation (a list of one record).',
        properties: Object.fromEntries(embeddable.map(([rel, r]) => [rel, { type: 'array', items: { $ref: `${REF}${r.component}` }, minItems: 1, maxItems: 1 }])),
        additionalProperties: false,
      };
    }
    schemas[name] = { ...schema, properties };
  }
}

/** Keywords whose values are data, not schemas. */
const DATA = new Set(['const', 'enum', 'default', 'examples', 'example', 'required', 'description', 'pattern', 'format', 'type']);

export class Projections {
  constructor(private readonly schemas: Record<string, Json>) {}

  /** The answer of an operation that honours `_fields`: the record (of a list: each) or its projection. */
  answer(schema: Json): Json {
    if (schema.type === 'array' && schema.items) return { ...schema, items: this.answer(schema.items as Json) };
    return { anyOf: [schema, this.partial(schema)], [PROJECTION_MARKER]: true };
  }

  /** The top-level fields of an answer (of a list: of its items), for the `_fields` parameter's description. */
  fieldNames(schema: Json): string[] {
    let s = schema.type === 'array' && schema.items ? (schema.items as Json) : schema;
    if (typeof s.$ref === 'string' && s.$ref.startsWith(REF)) s = this.schemas[s.$ref.slice(REF.length)] ?? {};
    return Object.keys((s.properties as Json | undefined) ?? {});
  }

  /** The name of the projection component of `name`, made on first use. */
  private component(name: string): string {
    const projected = `${name}Fields`;
    if (!this.schemas[projected]) {
      this.schemas[projected] = {}; // a placeholder while it is made (refs to itself)
      this.schemas[projected] = { ...(this.partial(this.schemas[name]) as Json), description: `A ${name} as _fields leaves it: only the fields asked for.` };
    }
    return projected;
  }

  /** The schema with every object's fields optional, at any depth. */
  private partial(node: unknown): unknown {
    if (Array.isArray(node)) return node.map((n) => this.partial(n));
    if (!node || typeof node !== 'object') return node;
    const s = node as Json;
    if (typeof s.$ref === 'string' && s.$ref.startsWith(REF)) {
      const name = s.$ref.slice(REF.length);
      // JsonValue takes any value already.
      return name === 'JsonValue' ? s : { ...s, $ref: `${REF}${this.component(name)}` };
    }
    const out: Json = {};
    for (const [k, v] of Object.entries(s)) {
      if (k === 'required' && Array.isArray(v)) continue;
      if (k === 'properties' && v && typeof v === 'object') out[k] = Object.fromEntries(Object.entries(v as Json).map(([p, ps]) => [p, this.partial(ps)]));
      else out[k] = DATA.has(k) ? v : this.partial(v);
    }
    return out;
  }
}
