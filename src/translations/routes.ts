import type { Request, Response, Router } from 'express';
import { z } from 'zod';
import type { Config } from '../config';
import type { Db } from '../db/knex';
import { type ListQuery } from '../db/list';
import { ACCEPT_RANGES, CONTENT_RANGE, RANGE_NOT_SATISFIABLE, sendStoredFile } from '../http/download';
import { ApiError, invalidParams, noRoute, notFoundItem } from '../http/errors';
import { applyFields, parseView, parseWithView } from '../http/fields';
import { LIST_HEADERS, listQueryParams, parseListQuery, setPagingHeaders } from '../http/list';
import { publicBase } from '../http/public-url';
import type { RouteRegistry } from '../http/route-registry';
import { bodyObject, codePointLength, MAX_QUERY_INTEGER, parseOrThrow } from '../http/validation';
import type { ObjectStorage } from '../infra/object-storage';
import type { TemporalGateway } from '../temporal/gateway';
import { PackageStatusChecks, parseBatchItem, type BatchError, type PackageStatus } from './batches';
import { packageFile } from './downloads';
import { jobListSpec, STRING_STATES, TranslationJobs, type StringsQuery } from './jobs';
import { localeProblem, SLUG_PATTERN, VERSION_PATTERN, WORDPRESS_LOCALES } from './locales';
import { projectListSpec, TranslationProjects } from './projects';
import {
  BATCH_MAX_LOCALES,
  BATCH_MAX_PACKAGES,
  batchDocSchema,
  batchItemSchema,
  batchSchema,
  bulkApproveSchema,
  checkSchema,
  createProjectSchema,
  jobRecordSchema,
  jobStringSchema,
  projectRecordSchema,
  rejectSchema,
  statusSchema,
  updateProjectSchema,
} from './schema';
import { PACKAGE_TYPES } from './types';

export interface TranslationDeps {
  db: Db;
  temporal: TemporalGateway;
  config: Config;
  /** Where the packs are (built by a worker, served by any API replica). */
  storage: ObjectStorage;
}

const TAGS = ['translations'];
const ERROR_REF = { $ref: '#/components/schemas/Error' };
const RETRY_AFTER = { 'Retry-After': { description: 'While a package is not ready (nor failed): seconds before polling again; grows with the time the package has spent in its state.', schema: { type: 'integer' } } };

/** A package's parts as the routes check them (paths and queries). */
const PACKAGE_PARAMS = {
  type: { type: 'string', enum: [...PACKAGE_TYPES] },
  slug: { type: 'string', pattern: SLUG_PATTERN.source },
  version: { type: 'string', pattern: VERSION_PATTERN.source },
  locale: { type: 'string', enum: [...WORDPRESS_LOCALES] },
};

function namespaceUrl(req: Request): string {
  return `${publicBase(req)}${req.baseUrl}`;
}

function parseId(req: Request, model: string): number {
  const raw = String(req.params.id);
  if (!/^\d{1,15}$/.test(raw)) throw noRoute();
  const id = Number.parseInt(raw, 10);
  if (id < 1) throw notFoundItem(model);
  return id;
}

/** Query parameters no route validates (credentials, WordPress' underscore parameters, context). */
function ownQuery(query: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(query).filter(([k]) => !k.startsWith('_') && k !== 'context' && !/^api[_-](key|secret)$/.test(k)));
}

/** The jobs list's locale filters name known WordPress locales only (a typo would list nothing). */
function checkLocaleFilters(q: ListQuery): void {
  const params: Record<string, string> = {};
  for (const condition of q.conditions) {
    if (condition.column !== jobListSpec.filters.locale.column) continue;
    const name = condition.op === 'eq' ? 'locale' : `locale__${condition.op}`;
    const bad = condition.values.map(String).find((value) => localeProblem(value) !== null);
    if (bad !== undefined) params[name] = condition.op === 'eq' ? `locale ${localeProblem(bad)}` : `${name}: ${bad.slice(0, 40)} ${localeProblem(bad)}`;
  }
  if (Object.keys(params).length) throw invalidParams(params);
}

const STRINGS_PER_PAGE_MAX = 100;

/** The strings list's query: page, per_page, search, state; anything else is a 400 naming it. */
function parseStringsQuery(query: Record<string, unknown>): StringsQuery {
  const params: Record<string, string> = {};
  const text = (name: string): string | undefined => {
    const v = query[name];
    if (v === undefined) return undefined;
    if (typeof v !== 'string') params[name] = `${name} is not of type string.`;
    return typeof v === 'string' ? v : undefined;
  };
  const int = (name: string, fallback: number, max: number): number => {
    const v = text(name);
    if (v === undefined) return fallback;
    if (!/^\d{1,15}$/.test(v) || Number(v) < 1 || Number(v) > max) {
      params[name] = `${name} must be an integer from 1 to ${max}.`;
      return fallback;
    }
    return Number(v);
  };
  const out: StringsQuery = { page: int('page', 1, MAX_QUERY_INTEGER), perPage: int('per_page', 20, STRINGS_PER_PAGE_MAX) };
  const search = text('search');
  if (search !== undefined && codePointLength(search) > 200) params.search = 'search must be at most 200 characters long.';
  else if (search) out.search = search;
  const state = text('state');
  if (state !== undefined && !(STRING_STATES as readonly string[]).includes(state)) params.state = `state must be one of: ${STRING_STATES.join(', ')}.`;
  else if (state) out.origin = state as StringsQuery['origin'];
  for (const name of Object.keys(query)) if (!['page', 'per_page', 'search', 'state'].includes(name)) params[name] = `${name} is not a parameter of this route.`;
  if (Object.keys(params).length) throw invalidParams(params);
  return out;
}

/** Paging headers of a list paged by number (as WordPress): X-WP-Total, X-WP-TotalPages, Link prev/next. */
function setPageNumberHeaders(req: Request, res: Response, q: { page: number; perPage: number }, total: number): void {
  const pages = Math.ceil(total / q.perPage);
  res.setHeader('X-WP-Total', String(total));
  res.setHeader('X-WP-TotalPages', String(pages));
  res.setHeader('X-WP-Total-Exact', 'true');
  const url = (page: number) => {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(req.query)) {
      if (k === 'page' || /^api[_-](key|secret)$/.test(k)) continue;
      for (const item of Array.isArray(v) ? v : [v]) if (typeof item === 'string') params.append(k, item);
    }
    params.set('page', String(page));
    return `${publicBase(req)}${req.baseUrl}${req.path}?${params.toString()}`;
  };
  const links: string[] = [];
  if (q.page > 1 && q.page - 1 <= Math.max(pages, 1)) links.push(`<${url(q.page - 1)}>; rel="prev"`);
  if (q.page < pages) links.push(`<${url(q.page + 1)}>; rel="next"`);
  if (links.length) res.setHeader('Link', links.join(', '));
}

/** Who acted, for the job's log (the API has one credential pair: the key's prefix). */
function actor(req: Request): string {
  const auth = req.get('authorization');
  if (auth?.startsWith('Basic ')) {
    const key = Buffer.from(auth.slice(6), 'base64').toString('utf8').split(':')[0];
    return `api:${key.slice(0, 8)}`;
  }
  return 'api';
}

const packageNotFound = () => new ApiError(404, 'wu_rest_translation_package_not_found', 'No ready language pack for this package, version and locale.');

/**
 * The public download of a language pack. Public on purpose: WordPress downloads the
 * `package` URL of a translation update without credentials, the packs hold nothing secret
 * (the strings ship with the plugin), and the URL is versioned, so a new version never
 * replaces an old pack. Mount before the API authentication.
 */
export function mountTranslationDownloads(router: Router, registry: RouteRegistry, namespace: string, deps: TranslationDeps): void {
  registry.operation(namespace, 'GET', '/translations/packages/:type/:slug/:version/:locale.zip', {
    summary: 'Download a ready language pack (zip of .po, .mo, .l10n.php and per-script .json)',
    description:
      'The download_url of a ready package. Versioned: a new version of the plugin or theme gets new packs, old ones stay. Answers application/zip with an ETag (sha256 of the zip). ' +
      'One byte range (`Range: bytes=a-b`, `bytes=a-`, `bytes=-n`; with `If-Range`, only while the ETag matches) answers 206; several ranges or a malformed header get the whole file.',
    tags: TAGS,
    public: true,
    pathParams: PACKAGE_PARAMS,
    responses: {
      200: { description: 'The zip (application/zip).', headers: { ETag: { description: 'sha256 of the zip', schema: { type: 'string' } }, 'Accept-Ranges': ACCEPT_RANGES } },
      206: { description: 'The bytes of the range asked for (application/zip).', headers: { ETag: { description: 'sha256 of the zip', schema: { type: 'string' } }, 'Content-Range': CONTENT_RANGE, 'Accept-Ranges': ACCEPT_RANGES } },
      416: RANGE_NOT_SATISFIABLE,
      400: { description: 'A path part is not a valid type, slug, version or locale (`wu_rest_invalid_parameter`).', schema: ERROR_REF },
      404: { description: 'No ready package there (`wu_rest_translation_package_not_found`).', schema: ERROR_REF },
    },
  });
  router.get('/translations/packages/:type/:slug/:version/:locale.zip', async (req: Request, res: Response) => {
    const pkg = { type: String(req.params.type), slug: String(req.params.slug), version: String(req.params.version), locale: String(req.params.locale) };
    const params: Record<string, string> = {};
    if (!(PACKAGE_TYPES as readonly string[]).includes(pkg.type)) params.type = 'type is not one of plugin and theme.';
    if (!SLUG_PATTERN.test(pkg.slug)) params.slug = 'slug is not a valid plugin or theme slug.';
    if (!VERSION_PATTERN.test(pkg.version)) params.version = 'version is not a valid version.';
    const badLocale = localeProblem(pkg.locale);
    if (badLocale) params.locale = `locale ${badLocale}`;
    if (Object.keys(params).length) throw invalidParams(params);
    const found = await packageFile(deps.db, pkg);
    if (!found) throw packageNotFound();
    const etag = `"${found.sha256}"`;
    const caching = { ETag: etag, 'Cache-Control': 'public, max-age=300' };
    if (req.get('if-none-match') === etag) {
      res.set(caching).status(304).end();
      return;
    }
    await sendStoredFile(req, res, deps.storage, found.key, {
      headers: { ...caching, 'Content-Type': 'application/zip', 'Content-Disposition': `attachment; filename="${pkg.slug}-${pkg.locale}.zip"` },
      etag,
      missing: packageNotFound,
    });
  });
}

/** Status checks, projects and jobs (behind the API authentication). */
export function mountTranslations(router: Router, registry: RouteRegistry, namespace: string, deps: TranslationDeps): void {
  const checks = new PackageStatusChecks(deps.db, deps.temporal, deps.config);
  const projects = new TranslationProjects(deps.db, deps.config);
  const jobs = new TranslationJobs(deps.db, deps.temporal, deps.config);
  document(registry, namespace, {
    status: registry.component('TranslationPackageStatus', statusSchema),
    project: registry.component('TranslationProject', projectRecordSchema),
    job: registry.component('TranslationJob', jobRecordSchema),
  });

  const sendRetryAfter = (res: Response, items: (PackageStatus | BatchError)[]) => {
    const waits = items.map((item) => ('retry_after' in item ? item.retry_after : undefined)).filter((n): n is number => n !== undefined);
    if (waits.length) res.setHeader('Retry-After', String(Math.min(...waits)));
  };

  router.get('/translations/check', async (req, res) => {
    const input = parseOrThrow(checkSchema, ownQuery(req.query as Record<string, unknown>));
    const [out] = await checks.check([input], namespaceUrl(req), req.log);
    if ('error' in out) throw new ApiError(out.error.data.status, out.error.code, out.error.message);
    sendRetryAfter(res, [out]);
    res.json(out);
  });

  router.post('/translations/check/batch', async (req, res) => {
    const raw = bodyObject(req.body);
    if (Array.isArray(raw.packages) && raw.packages.length > BATCH_MAX_PACKAGES) {
      throw invalidParams({ packages: `packages must contain at most ${BATCH_MAX_PACKAGES} packages per call (this one has ${raw.packages.length}); split it into several calls.` });
    }
    const body = parseOrThrow(batchSchema, raw);
    const items = body.packages.map((raw, i) => parseBatchItem(raw, i));
    const locales = new Set(items.filter((it): it is Exclude<typeof it, BatchError> => !('error' in it)).map((it) => it.locale));
    if (locales.size > BATCH_MAX_LOCALES) {
      throw invalidParams({ packages: `packages must cover at most ${BATCH_MAX_LOCALES} different locales per call (this one has ${locales.size}).` });
    }
    const out = await checks.check(items, namespaceUrl(req), req.log);
    sendRetryAfter(res, out);
    res.json(out);
  });

  // ---- projects ----
  router.get('/translations/projects', async (req, res) => {
    const { q, view } = parseWithView(req.query as Record<string, unknown>, (query) => parseListQuery(query, projectListSpec));
    const page = await projects.list(q);
    setPagingHeaders(req, res, q, page);
    res.json(page.rows.map((r) => applyFields(r, view.fields)));
  });
  router.post('/translations/projects', async (req, res) => {
    res.json(await projects.create(parseOrThrow(createProjectSchema, bodyObject(req.body))));
  });
  router.get('/translations/projects/:id', async (req, res) => {
    const { fields } = parseView(req.query as Record<string, unknown>);
    const project = await projects.get(parseId(req, 'translation_project'));
    if (!project) throw notFoundItem('translation_project');
    res.json(applyFields(project, fields));
  });
  router.put('/translations/projects/:id', async (req, res) => {
    const id = parseId(req, 'translation_project');
    const input = parseOrThrow(updateProjectSchema, bodyObject(req.body));
    const project = await projects.update(id, input);
    if (!project) throw notFoundItem('translation_project');
    res.json(project);
  });
  router.delete('/translations/projects/:id', async (req, res) => {
    if (!(await projects.remove(parseId(req, 'translation_project')))) throw notFoundItem('translation_project');
    res.json(true);
  });

  // ---- jobs ----
  router.get('/translations/jobs', async (req, res) => {
    const { q, view } = parseWithView(req.query as Record<string, unknown>, (query) => parseListQuery(query, jobListSpec));
    checkLocaleFilters(q);
    const page = await jobs.list(q, namespaceUrl(req));
    setPagingHeaders(req, res, q, page);
    res.json(page.rows.map((r) => applyFields(r, view.fields)));
  });
  router.post('/translations/jobs/approve', async (req, res) => {
    const filter = parseOrThrow(bulkApproveSchema, bodyObject(req.body));
    res.json(await jobs.approveMany(filter, actor(req)));
  });
  const getJob = async (req: Request, id: number) => {
    const job = await jobs.get(id, namespaceUrl(req));
    if (!job) throw notFoundItem('translation_job');
    return job;
  };
  router.get('/translations/jobs/:id', async (req, res) => {
    const { fields } = parseView(req.query as Record<string, unknown>);
    res.json(applyFields(await getJob(req, parseId(req, 'translation_job')), fields));
  });
  router.get('/translations/jobs/:id/strings', async (req, res) => {
    const id = parseId(req, 'translation_job');
    const q = parseStringsQuery(ownQuery(req.query as Record<string, unknown>));
    const page = await jobs.strings(id, q);
    if (!page) throw notFoundItem('translation_job');
    setPageNumberHeaders(req, res, q, page.total);
    res.json(page.rows);
  });
  router.post('/translations/jobs/:id/approve', async (req, res) => {
    const id = parseId(req, 'translation_job');
    parseOrThrow(z.strictObject({}), bodyObject(req.body));
    await jobs.approve(id, actor(req));
    res.json(await getJob(req, id));
  });
  router.post('/translations/jobs/:id/reject', async (req, res) => {
    const id = parseId(req, 'translation_job');
    const { reason } = parseOrThrow(rejectSchema, bodyObject(req.body));
    await jobs.reject(id, reason, actor(req));
    res.json(await getJob(req, id));
  });
  router.post('/translations/jobs/:id/retry', async (req, res) => {
    const id = parseId(req, 'translation_job');
    parseOrThrow(z.strictObject({}), bodyObject(req.body));
    await jobs.retry(id, namespaceUrl(req));
    res.json(await getJob(req, id));
  });
}

function document(registry: RouteRegistry, namespace: string, refs: { status: { $ref: string }; project: { $ref: string }; job: { $ref: string } }): void {
  const checkParams = [
    { name: 'slug', required: true, description: 'Plugin or theme slug.', schema: PACKAGE_PARAMS.slug },
    { name: 'type', required: true, description: 'plugin or theme.', schema: PACKAGE_PARAMS.type },
    { name: 'locale', required: true, description: 'A WordPress locale: de_DE, pt_BR, ja, de_DE_formal (one of the list).', schema: PACKAGE_PARAMS.locale },
  ];
  registry.operation(namespace, 'GET', '/translations/check', {
    summary: 'Status of one translation package (slug + type + locale, current version of its project)',
    description:
      'missing when no project matches. The first check of a registered package starts its pipeline (importing); a check never starts a second one. ' +
      'download_url only when ready; Retry-After while importing, pending_approval, processing or packaging. ' +
      'A ready pack translates at least one string (translated_strings of total_strings; the rest fall back to English): a package with no translation at all ' +
      '(no human translation and no AI provider) is failed at importing with a failure_reason saying so, never ready. ' +
      'expired when nobody approved it within TRANSLATION_APPROVAL_TIMEOUT_DAYS (failure_step pending_approval, failure_reason saying so; POST .../retry waits again). ' +
      'locale must be a known WordPress locale (400 naming it otherwise, and nothing is created).',
    tags: TAGS,
    query: checkParams,
    responses: { 200: { description: 'The package status.', schema: refs.status, headers: RETRY_AFTER } },
  });
  registry.operation(namespace, 'POST', '/translations/check/batch', {
    summary: `Status of up to ${BATCH_MAX_PACKAGES} packages in one call (one database round trip)`,
    description:
      `One answer per package in request order; each item is handled on its own: an invalid one carries its own error ({index, error}). More than ${BATCH_MAX_PACKAGES} packages ` +
      `or more than ${BATCH_MAX_LOCALES} different locales is a 400. Retry-After: the shortest suggested delay of the packages not ready yet.`,
    tags: TAGS,
    body: batchDocSchema,
    responses: { 200: { description: 'One status (or error) per package.', schema: z.array(batchItemSchema), headers: RETRY_AFTER } },
  });

  registry.operation(namespace, 'GET', '/translations/projects', {
    summary: 'List translation projects',
    tags: TAGS,
    query: listQueryParams(projectListSpec),
    fields: {},
    responses: { 200: { description: 'A page of projects (a bare array).', schema: { type: 'array', items: refs.project }, headers: LIST_HEADERS } },
  });
  registry.operation(namespace, 'POST', '/translations/projects', {
    summary: 'Register a plugin or theme for translation',
    description:
      'Source strings as a POT file (pot, as text) or pot_url (fetched at import); human translations from a GlotPress export URL template ({slug}, {type}, ' +
      '{glotpress_locale}; absent: TRANSLATION_GLOTPRESS_URL_TEMPLATE; null: none) and/or uploaded PO files by locale (po_files). A new version starts new packages. ' +
      'pot_url and glotpress_url_template are http(s) URLs; one naming a loopback, private, link-local or otherwise internal address is a 400 naming the field ' +
      '(unless OUTBOUND_ALLOWED_HOSTS allows it); host names are checked after DNS when fetched, on every redirect. pot and po_files must be gettext files that parse ' +
      '(400 naming the field otherwise); slug and type together must be new (400 otherwise).',
    tags: TAGS,
    body: createProjectSchema,
    responses: { 200: { description: 'The project.', schema: refs.project } },
  });
  registry.operation(namespace, 'GET', '/translations/projects/:id', { summary: 'Get a translation project', tags: TAGS, fields: {}, responses: { 200: { description: 'The project.', schema: refs.project } } });
  registry.operation(namespace, 'PUT', '/translations/projects/:id', {
    summary: 'Update a translation project (a new version starts new packages; po_files are merged by locale)',
    description:
      'The same rules as on create: pot_url and glotpress_url_template naming a refused address are a 400 naming the field. The project keeps pot or pot_url: setting the one it has to null without giving the other is a 400.',
    tags: TAGS,
    body: updateProjectSchema,
    responses: { 200: { description: 'The project.', schema: refs.project } },
  });
  registry.operation(namespace, 'DELETE', '/translations/projects/:id', {
    summary: 'Delete a translation project',
    description: 'Refused (409 wu_rest_translation_project_in_use) while one of its jobs is in progress. Built packages stay downloadable.',
    tags: TAGS,
    responses: { 200: { description: 'Deleted: the literal true.', schema: { type: 'boolean', const: true } } },
  });

  registry.operation(namespace, 'GET', '/translations/jobs', {
    summary: 'List translation jobs (filter by status, slug, locale, type, version, project_id)',
    description: 'locale, locale__in and locale__not_in take known WordPress locales only (400 naming the parameter otherwise).',
    tags: TAGS,
    query: listQueryParams(jobListSpec),
    fields: {},
    responses: { 200: { description: 'A page of jobs (a bare array, without logs).', schema: { type: 'array', items: refs.job }, headers: LIST_HEADERS } },
  });
  registry.operation(namespace, 'GET', '/translations/jobs/:id', {
    summary: 'Get a translation job with its logs',
    tags: TAGS,
    fields: {},
    responses: { 200: { description: 'The job.', schema: refs.job } },
  });
  registry.operation(namespace, 'GET', '/translations/jobs/:id/strings', {
    summary: "A page of a job's strings: source, translation, and whether it is human, AI or still missing",
    description:
      'In the order the job keeps them (the POT\'s, grouped by context; index: the position in it, the same on every page). state keeps the human, AI or missing (untranslated: the pack falls back to English) strings; ' +
      'search finds a text in the source, plural, context or translation (case-insensitive). A job still importing has no strings yet (an empty page). ' +
      'Paged by number (page, per_page up to 100) with X-WP-Total, X-WP-TotalPages and Link rel="next"/"prev".',
    tags: TAGS,
    query: [
      { name: 'page', description: 'Page number (from 1).', schema: { type: 'integer', minimum: 1, maximum: MAX_QUERY_INTEGER } },
      { name: 'per_page', description: `Strings per page (1 to ${STRINGS_PER_PAGE_MAX}, default 20).`, schema: { type: 'integer', minimum: 1, maximum: STRINGS_PER_PAGE_MAX } },
      { name: 'search', description: 'A text to find (case-insensitive), at most 200 characters.', schema: { type: 'string', maxLength: 200 }, example: 'hello' },
      { name: 'state', description: 'human, ai or missing.', schema: { type: 'string', enum: [...STRING_STATES] } },
    ],
    responses: {
      200: {
        description: 'A page of strings (a bare array).',
        schema: z.array(jobStringSchema),
        headers: {
          'X-WP-Total': { description: 'Number of matching strings (exact).', schema: { type: 'integer' } },
          'X-WP-TotalPages': LIST_HEADERS['X-WP-TotalPages'],
          'X-WP-Total-Exact': { description: 'Always true here: the count is exact.', schema: { type: 'string', enum: ['true'] } },
          Link: { description: 'rel="next" / rel="prev" page links (page numbers).', schema: { type: 'string' } },
        },
        examples: {
          page: {
            summary: 'A human translation, an AI one and a missing one',
            value: [
              { index: 0, context: null, source: 'Hello %s', plural: null, references: ['src/app.php:12'], note: null, translation: ['Hallo %s'], state: 'human' },
              { index: 1, context: 'menu', source: 'Settings', plural: null, references: [], note: 'Admin menu entry', translation: ['Einstellungen'], state: 'ai' },
              { index: 2, context: null, source: '%d file', plural: '%d files', references: [], note: null, translation: null, state: 'missing' },
            ],
          },
        },
      },
    },
  });
  const bulkResult = {
    type: 'object',
    required: ['approved', 'failed'],
    additionalProperties: false,
    properties: {
      approved: { type: 'array', items: { type: 'integer' }, description: 'Ids of the jobs approved.' },
      failed: { type: 'array', items: { type: 'object', required: ['id', 'error'], properties: { id: { type: 'integer' }, error: { type: 'string' } }, additionalProperties: false } },
    },
  };
  registry.operation(namespace, 'POST', '/translations/jobs/approve', {
    summary: 'Approve many pending jobs at once (by locale, slug, type, version, or all)',
    description:
      'At least one filter (the jobs matching all of them), or all: true alone. Each job is approved through its pipeline (update approve-<job id>, as POST .../approve): ' +
      'a job whose pipeline refused (decided meanwhile), has ended, or did not answer is listed in failed with the reason; running it again is safe.',
    tags: TAGS,
    body: bulkApproveSchema,
    responses: { 200: { description: 'What was approved.', schema: bulkResult } },
  });
  registry.operation(namespace, 'POST', '/translations/jobs/:id/approve', {
    summary: 'Approve a job waiting in pending_approval (approving it again changes nothing)',
    description:
      'Recorded by the job\'s pipeline (a Temporal update, id approve-<job id>), answered once recorded. ' +
      'An expired job (nobody approved it within TRANSLATION_APPROVAL_TIMEOUT_DAYS): 409 wu_rest_translation_job_expired; POST .../retry makes it wait for approval again. Other states: 409 wu_rest_translation_job_not_pending. ' +
      'No answer from the pipeline in time: 503 wu_rest_temporal_unavailable; sending the same request again is safe (the approval is recorded at most once).',
    tags: TAGS,
    body: z.strictObject({}),
    responses: { 200: { description: 'The job.', schema: refs.job } },
  });
  registry.operation(namespace, 'POST', '/translations/jobs/:id/reject', {
    summary: 'Reject a job waiting in pending_approval: it ends failed with the reason',
    description:
      'Recorded by the job\'s pipeline (a Temporal update, id reject-<job id>), answered once recorded. An expired job: 409 wu_rest_translation_job_expired. Other states (approved, already rejected): 409 wu_rest_translation_job_not_pending. ' +
      'No answer from the pipeline in time: 503 wu_rest_temporal_unavailable; sending the same request again is safe (the rejection is recorded at most once; once it is, the job is failed and a repeat answers 409).',
    tags: TAGS,
    body: rejectSchema,
    responses: { 200: { description: 'The job, failed.', schema: refs.job } },
  });
  registry.operation(namespace, 'POST', '/translations/jobs/:id/retry', {
    summary: 'Retry a failed job from the step it failed in (an expired one waits for approval again)',
    description: 'A job in progress whose workflow no longer runs (terminated) is restarted from its current step. Other states, and a job whose pipeline still waits to be started (the workflow start outbox), 409 wu_rest_translation_job_not_failed. The new run is written with the job (it is started at once, or by the start relay once Temporal answers).',
    tags: TAGS,
    body: z.strictObject({}),
    responses: { 200: { description: 'The job, restarted.', schema: refs.job } },
  });
}
