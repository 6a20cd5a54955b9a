import type { Config } from '../config';
import { isPgError, PG_UNIQUE_VIOLATION } from '../db/errors';
import type { Db } from '../db/knex';
import { runList, type ListQuery, type ListSpec } from '../db/list';
import { isoDate } from '../db/timestamps';
import { conflict, invalidParams } from '../http/errors';
import { OutboundPolicy, urlRefusal } from '../infra/outbound-http';
import { assertParsable, GettextError } from './gettext';
import { glotpressUrl } from './locales';
import type { CreateProject, UpdateProject } from './schema';
import { IN_FLIGHT_STATUSES, PACKAGE_TYPES } from './types';

export const projectListSpec: ListSpec = {
  idColumn: 'translation_projects.id',
  dateCreatedColumn: 'translation_projects.date_created',
  searchable: ['translation_projects.slug', 'translation_projects.name'],
  searchTable: 'translation_projects',
  sortable: {
    id: 'translation_projects.id',
    slug: 'translation_projects.slug',
    name: 'translation_projects.name',
    date_created: 'translation_projects.date_created',
    date_modified: 'translation_projects.date_modified',
  },
  filters: {
    slug: { column: 'translation_projects.slug', type: 'string' },
    type: { column: 'translation_projects.type', type: { enum: PACKAGE_TYPES } },
    auto_approve: { column: 'translation_projects.auto_approve', type: 'bool' },
  },
};

const PROJECT_COLUMNS = [
  'translation_projects.id', 'slug', 'type', 'name', 'version', 'pot_url', 'glotpress_url_template', 'auto_approve', 'date_created', 'date_modified',
].map((column) => (column.includes('.') ? column : `translation_projects.${column}`));

function projectRecord(row: Record<string, any>) {
  return {
    id: Number(row.id),
    model: 'translation_project' as const,
    slug: row.slug,
    type: row.type,
    name: row.name,
    version: row.version,
    pot_url: row.pot_url ?? null,
    pot_size: row.pot_size === null || row.pot_size === undefined ? null : Number(row.pot_size),
    glotpress_url_template: row.glotpress_url_template ?? null,
    po_locales: (row.po_locales ?? []).slice().sort(),
    auto_approve: row.auto_approve,
    date_created: isoDate(row.date_created)!,
    date_modified: isoDate(row.date_modified)!,
  };
}

/** The plugins and themes registered for translation: their data access and the checks of what is written. */
export class TranslationProjects {
  private readonly outbound: OutboundPolicy;

  constructor(
    private readonly db: Db,
    private readonly config: Pick<Config, 'TRANSLATION_GLOTPRESS_URL_TEMPLATE' | 'OUTBOUND_ALLOWED_HOSTS'>,
  ) {
    this.outbound = new OutboundPolicy(config.OUTBOUND_ALLOWED_HOSTS);
  }

  private projectQuery() {
    return this.db('translation_projects').select([
      ...PROJECT_COLUMNS,
      this.db.raw('octet_length(translation_projects.pot) as pot_size'),
      this.db.raw('array(select jsonb_object_keys(translation_projects.po_files)) as po_locales'),
    ]);
  }

  async list(q: ListQuery) {
    const page = await runList<Record<string, any>>(this.db, () => this.projectQuery(), q, projectListSpec);
    return { ...page, rows: page.rows.map(projectRecord) };
  }

  async get(id: number) {
    const row = await this.projectQuery().where('translation_projects.id', id).first();
    return row ? projectRecord(row) : null;
  }

  /**
   * What create and update can tell before anything runs: the POT and PO texts parse, and the
   * URLs do not name an address the server refuses to fetch from (names are checked after DNS,
   * at fetch time). All problems at once, naming each field.
   */
  private checkInput(input: { pot?: string | null; po_files?: Record<string, string>; pot_url?: string | null; glotpress_url_template?: string | null }): void {
    const params: Record<string, string> = {};
    const checkUrl = (raw: string | null | undefined, name: string) => {
      const refusal = raw ? urlRefusal(this.outbound, raw) : null;
      if (refusal) params[name] = refusal.kind === 'invalid_url' ? `${name} ${refusal.message}` : `${name}: ${refusal.message}`;
    };
    checkUrl(input.pot_url, 'pot_url');
    // A sample package stands in for the placeholders.
    if (input.glotpress_url_template) checkUrl(glotpressUrl(input.glotpress_url_template, 'example', 'plugin', 'de_DE'), 'glotpress_url_template');
    const checkGettext = (text: string, name: string, what: string) => {
      try {
        assertParsable(text, what);
      } catch (err) {
        if (err instanceof GettextError) params[name] = `${name}: ${err.message}`;
        else throw err;
      }
    };
    if (input.pot) checkGettext(input.pot, 'pot', 'The POT file');
    for (const [locale, text] of Object.entries(input.po_files ?? {})) checkGettext(text, `po_files.${locale}`, `The PO file for ${locale}`);
    if (Object.keys(params).length) throw invalidParams(params);
  }

  private taken(err: unknown): never {
    if (isPgError(err, PG_UNIQUE_VIOLATION)) throw invalidParams({ slug: 'slug: a translation project with this slug and type already exists.' });
    throw err;
  }

  async create(input: CreateProject) {
    this.checkInput(input);
    const row = {
      slug: input.slug,
      type: input.type,
      name: input.name,
      version: input.version,
      pot: input.pot ?? null,
      pot_url: input.pot_url ?? null,
      glotpress_url_template: input.glotpress_url_template === undefined ? this.config.TRANSLATION_GLOTPRESS_URL_TEMPLATE : input.glotpress_url_template,
      po_files: JSON.stringify(input.po_files ?? {}),
      auto_approve: input.auto_approve ?? false,
    };
    const [created] = await this.db('translation_projects').insert(row).returning('id').catch((err) => this.taken(err));
    return (await this.get(Number(created.id)))!;
  }

  async update(id: number, input: UpdateProject) {
    this.checkInput(input);
    return this.db.transaction(async (trx) => {
      const current = await trx('translation_projects').where({ id }).forUpdate().first('pot', 'pot_url', 'po_files');
      if (!current) return null;
      const pot = input.pot === undefined ? current.pot : input.pot;
      const potUrl = input.pot_url === undefined ? current.pot_url : input.pot_url;
      if (!pot && !potUrl) throw invalidParams({ pot: 'pot (the POT file as text) or pot_url is required: a project cannot have neither.' });
      const patch: Record<string, unknown> = { date_modified: trx.fn.now() };
      for (const field of ['slug', 'type', 'name', 'version', 'glotpress_url_template', 'auto_approve', 'pot', 'pot_url'] as const) {
        if (input[field] !== undefined) patch[field] = input[field];
      }
      // Uploaded PO files are merged by locale (send a locale again to replace its file).
      if (input.po_files) patch.po_files = JSON.stringify({ ...(current.po_files ?? {}), ...input.po_files });
      await trx('translation_projects').where({ id }).update(patch).catch((err) => this.taken(err));
      return true;
    }).then(async (found) => (found ? this.get(id) : null));
  }

  /** Refused while a job of the project is in flight; finished packages stay downloadable. */
  async remove(id: number): Promise<boolean> {
    return this.db.transaction(async (trx) => {
      const project = await trx('translation_projects').where({ id }).forUpdate().first('id');
      if (!project) return false;
      const [busy] = await trx('translation_jobs').where({ project_id: id }).whereIn('status', IN_FLIGHT_STATUSES).count({ n: '*' });
      if (Number(busy.n) > 0) {
        throw conflict('wu_rest_translation_project_in_use', `This project has ${busy.n} translation job(s) in progress; wait for them, or reject them, before deleting it.`, {
          referenced_by: 'translation_jobs',
        });
      }
      await trx('translation_projects').where({ id }).delete();
      return true;
    });
  }
}
