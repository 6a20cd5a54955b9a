import type { Request } from 'express';
import { type FieldSet } from '../db/resource';
import type { ResourceLink } from '../db/resource-link';
import { applyFields, keeps, subTree, topLevel, type FieldTree, type View } from './fields';
import { publicBase } from './public-url';
import type { RouteRegistry } from './route-registry';

export type { ResourceLink };

/**
 * WordPress' `_links` and `_embed` for the records of the resources (src/http/resource.ts):
 * every record links to itself, its collection and the records its reference fields name;
 * `_embed` puts the embeddable ones under `_embedded`, fetched with one query per link
 * relation for a whole page.
 */

type Rec = Record<string, any>;

/** What embedding needs of a resource: where its records live and how to read many at once. */
export interface LinkedResource {
  model: string;
  plural: string;
  namespace: string;
  links: Record<string, ResourceLink>;
  getMany(ids: number[], read?: { fields?: FieldSet }): Promise<Rec[]>;
}

/** The resources of an app (by model), so a record can link to and embed another resource's records. */
const directories = new WeakMap<RouteRegistry, Map<string, LinkedResource>>();

export function registerLinkedResource(registry: RouteRegistry, resource: LinkedResource): void {
  let dir = directories.get(registry);
  if (!dir) directories.set(registry, (dir = new Map()));
  dir.set(resource.model, resource);
}

/** The component name of a model's records in the document (customer -> Customer). */
export function componentName(model: string): string {
  return model.charAt(0).toUpperCase() + model.slice(1);
}

/** The answer of a record route without `_fields` nor `_embed`: the record with its `_links`. */
export const FULL_VIEW: View = { fields: null, embed: null };

const isId = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v > 0;

export class RecordPresenter {
  constructor(
    private readonly registry: RouteRegistry,
    private readonly model: string,
  ) {}

  private get directory(): Map<string, LinkedResource> {
    return directories.get(this.registry) ?? new Map();
  }

  private resource(model = this.model): LinkedResource {
    const found = this.directory.get(model);
    if (!found) throw new Error(`no resource registered for the model ${model}`);
    return found;
  }

  /**
   * The fields a service must read for a view: those asked for, and the reference fields when
   * `_links` or `_embedded` are (undefined: everything).
   */
  readFields(view: View): FieldSet | undefined {
    return fieldsFor(this.resource(), view.fields);
  }

  /** The records as the answer shows them: `_links`, `_embedded` when asked, then `_fields`. */
  async present(req: Request, recs: Rec[], view: View): Promise<Rec[]> {
    const resource = this.resource();
    const base = `${publicBase(req)}${this.registry.prefix}/${resource.namespace}`;
    const withLinks = keeps(view, '_links');
    const embeddedTree = subTree(view.fields, '_embedded');
    const rels = view.embed && embeddedTree !== undefined ? this.embeddable(resource, view.embed, embeddedTree) : [];

    // One query per link relation for every record of the page.
    const embedded = new Map<string, Map<number, Rec>>();
    await Promise.all(
      rels.map(async (rel) => {
        const link = resource.links[rel];
        const ids = [...new Set(recs.map((r) => r[link.field]).filter(isId))];
        if (ids.length === 0) return;
        const target = this.resource(link.model);
        const relTree = subTree(embeddedTree ?? null, rel) ?? null;
        const found = await target.getMany(ids, { fields: fieldsFor(target, relTree) });
        const linksToo = relTree === null || relTree.has('_links');
        const linking = linksToo ? this.linker(target, base) : undefined;
        embedded.set(rel, new Map(found.map((record) => [Number(record.id), linking ? { ...record, _links: linking(record) } : record])));
      }),
    );

    // The records are the answer's own (the services make them for it): `_links` and
    // `_embedded` are added to them in place, after their fields, as a copy would have them.
    const linking = withLinks ? this.linker(resource, base) : undefined;
    return recs.map((out) => {
      if (linking) out._links = linking(out);
      if (rels.length > 0) {
        const found: Rec = {};
        for (const rel of rels) {
          const hit = embedded.get(rel)?.get(out[resource.links[rel].field]);
          if (hit) found[rel] = [hit];
        }
        if (Object.keys(found).length > 0) out._embedded = found;
      }
      return applyFields(out, view.fields);
    });
  }

  /** Builds a record's `_links` for this answer (the links' targets looked up once, not for every record). */
  private linker(resource: LinkedResource, base: string): (rec: Rec) => Rec {
    const dir = this.directory;
    const own = `${base}/${resource.plural}`;
    const rels = Object.entries(resource.links).flatMap(([rel, link]) => {
      const target = dir.get(link.model);
      return target ? [{ rel, field: link.field, embeddable: Boolean(link.embeddable), href: `${base}/${target.plural}/` }] : [];
    });
    return (rec) => {
      const links: Rec = { self: [{ href: `${own}/${rec.id}` }], collection: [{ href: own }] };
      for (const r of rels) {
        const id = rec[r.field];
        if (isId(id)) links[r.rel] = [r.embeddable ? { embeddable: true, href: `${r.href}${id}` } : { href: `${r.href}${id}` }];
      }
      return links;
    };
  }

  /** The record of a write's answer (no `_fields`, no `_embed`): with its `_links`. */
  async presentOne(req: Request, rec: Rec): Promise<Rec> {
    return (await this.present(req, [rec], FULL_VIEW))[0];
  }

  /** The link relations to embed: the embeddable ones `_embed` names, and `_fields` keeps. */
  private embeddable(resource: LinkedResource, asked: ReadonlySet<string> | 'all', embeddedTree: FieldTree | null): string[] {
    return Object.entries(resource.links)
      .filter(([rel, link]) => link.embeddable && (asked === 'all' || asked.has(rel)) && (embeddedTree === null || embeddedTree.has(rel)))
      .map(([rel]) => rel);
  }
}

function fieldsFor(resource: LinkedResource, tree: FieldTree | null): FieldSet | undefined {
  const fields = topLevel(tree);
  if (!fields) return undefined;
  if (fields.has('_links') || fields.has('_embedded')) for (const link of Object.values(resource.links)) fields.add(link.field);
  return fields;
}
