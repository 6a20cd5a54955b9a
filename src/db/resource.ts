import type { z } from 'zod';
import type { ListPage, ListQuery, ListSpec } from './list';
import type { ResourceLink } from './resource-link';

/** The top-level fields a read must produce (unknown names are ignored by the services); undefined: all. */
export type FieldSet = ReadonlySet<string>;

/** What a read must produce: `fields`, the top-level fields asked for (undefined: all of them; unknown names are ignored). */
export interface ReadOptions {
  fields?: FieldSet;
}

/** What a resource folder provides; the HTTP behaviour is the same for every resource. */
export interface ResourceService<Rec> {
  /** With `read.fields`, only the columns those fields need are read (id always). */
  list(q: ListQuery, read?: ReadOptions): Promise<ListPage<Rec>>;
  get(id: number, read?: ReadOptions): Promise<Rec | null>;
  /** The records of these ids (those that exist), in one query: what `_embed` embeds. */
  getMany(ids: number[], read?: ReadOptions): Promise<Rec[]>;
  create(input: any): Promise<Rec>;
  /** null when the id is unknown */
  update(id: number, input: any): Promise<Rec | null>;
  /** false when the id is unknown */
  remove(id: number): Promise<boolean>;
}

export interface ResourceDefinition<Rec> {
  /** Model name used in error codes: wu_rest_{model}_invalid_id */
  model: string;
  /** Plural path segment from the contract; the model name is the singular path. */
  plural: string;
  listSpec: ListSpec;
  createSchema: z.ZodType;
  updateSchema: z.ZodObject;
  /** What a record looks like in a response (the OpenAPI document's schema of the model). */
  recordSchema: z.ZodType;
  service: ResourceService<Rec>;
  /** What the document says of create and update beyond the body's schema (references, uniqueness, rules across fields). */
  description?: string;
  /** The records a record points at, by link relation: its `_links`, and what `_embed` embeds. */
  links?: Record<string, ResourceLink>;
  /** Examples for the document, from a real run (test/examples.test.ts replays them). */
  examples?: ResourceExamples;
  /** false: list and get only (a log the service writes itself); create, update and delete match no route. */
  writable?: boolean;
}

/**
 * A create body and the record it was answered with, and an update body whose fields the
 * record answers as they were sent.
 */
export interface ResourceExamples {
  create: Record<string, unknown>;
  record: Record<string, unknown>;
  update: Record<string, unknown>;
}
