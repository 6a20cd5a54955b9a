import { z } from 'zod';
import { anyOfRequired, fields } from '../http/validation';
import { localeProblem, SLUG_PATTERN, VERSION_PATTERN, WORDPRESS_LOCALES } from './locales';
import { JOB_STATUSES, PACKAGE_STATUSES, PACKAGE_TYPES, PIPELINE_STEPS, SOURCES } from './types';

/** Batch limits of the original add-on. */
export const BATCH_MAX_PACKAGES = 100;
export const BATCH_MAX_LOCALES = 20;
/** Largest POT or PO text accepted in a body (BODY_LIMIT applies too). */
export const MAX_GETTEXT = 5_000_000;

export const slug = () =>
  z.string({ error: (i) => (i.input === undefined ? undefined : 'is not of type string.') }).regex(SLUG_PATTERN, {
    message: 'must be a plugin or theme slug: lower-case letters, digits, dashes and underscores (at most 100 characters), e.g. my-plugin.',
  });
export const packageType = () => z.enum(PACKAGE_TYPES);
/** One of the known WordPress locales (the document lists them). */
export const locale = () =>
  z
    .string({ error: (i) => (i.input === undefined ? undefined : 'is not of type string.') })
    .refine((v) => localeProblem(v) === null, { error: (i) => localeProblem(String(i.input)) ?? undefined })
    .meta({ enum: [...WORDPRESS_LOCALES] });
const version = () => z.string().regex(VERSION_PATTERN, { message: 'must be a version such as 1.2.3 (letters, digits, . + _ -; at most 40 characters).' });

/**
 * The URLs the document promises to take (the checks are z.url's parse and, at create and
 * update, urlRefusal of src/infra/outbound-http.ts): http(s), a host name (no IP address, not
 * localhost) and an optional port, then printable URL characters. Held to the checks by
 * test/document-rules.test.ts.
 */
const URL_START = [
  '^[Hh][Tt][Tt][Pp][Ss]?://',
  '(?![^/?#:]*[Ll][Oo][Cc][Aa][Ll][Hh][Oo][Ss][Tt]\\.?(?:[/?#:]|$))',
  '(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\\.)*[A-Za-z](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?',
  '(?::(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4}))?',
].join('');
const URL_CHARS = "[A-Za-z0-9._~!$&'()*+,;=:@%/?#-]";
const URL_PATTERN = `${URL_START}(?:[/?#]${URL_CHARS}*)?$`;
const TEMPLATE_CHARS = "[A-Za-z0-9._~!$&'()*+,;=:@%/?#{}-]";
const TEMPLATE_PATTERN = `${URL_START}[/?#]${TEMPLATE_CHARS}*\\{(?:glotpress_)?locale\\}${TEMPLATE_CHARS}*$`;
const httpUrl = () => z.url({ protocol: /^https?$/, error: () => 'must be an http or https URL.' }).max(2000);

/** A status check: the query of GET /translations/check, one item of a batch. */
export const checkSchema = z.strictObject({ slug: slug(), type: packageType(), locale: locale() });
export type CheckInput = z.output<typeof checkSchema>;

export const batchSchema = z.strictObject({
  packages: z.array(z.unknown()).min(1).max(BATCH_MAX_PACKAGES, { message: `must contain at most ${BATCH_MAX_PACKAGES} packages per call.` }),
});

/** For the document: what each item should look like (items are validated one by one). */
export const batchDocSchema = z.strictObject({ packages: z.array(checkSchema).min(1).max(BATCH_MAX_PACKAGES) });

const glotpressTemplate = () =>
  httpUrl()
    .refine((v) => v.includes('{glotpress_locale}') || v.includes('{locale}'), {
      message: 'must contain the {glotpress_locale} placeholder (and may use {slug} and {type}).',
    })
    // A template is no RFC 3986 URI (its braces): the pattern says what it is.
    .meta({ format: undefined, pattern: TEMPLATE_PATTERN });

const projectFields = {
  slug: slug(),
  type: packageType(),
  name: fields.label(200),
  version: version(),
  /** The source strings: a POT file as text... */
  pot: fields.text(MAX_GETTEXT, 1).optional(),
  /** ...or where to fetch it (at import). */
  pot_url: httpUrl().meta({ format: undefined, pattern: URL_PATTERN }).optional(),
  /** GlotPress export URL template; null: no GlotPress. Absent on create: TRANSLATION_GLOTPRESS_URL_TEMPLATE. */
  glotpress_url_template: glotpressTemplate().nullable().optional(),
  /** Human translations uploaded as PO files, by locale. */
  po_files: z
    .record(locale(), fields.text(MAX_GETTEXT, 1), { error: (i) => (i.code === 'invalid_key' ? i.issues[0]?.message : undefined) })
    .optional(),
  auto_approve: fields.flag().optional(),
};

export const createProjectSchema = z
  .strictObject(projectFields)
  .superRefine((v, ctx) => {
    if (v.pot === undefined && v.pot_url === undefined) ctx.addIssue({ code: 'custom', path: ['pot'], message: 'pot (the POT file as text) or pot_url is required.' });
  })
  .meta(anyOfRequired(['pot', 'pot_url']));
export const updateProjectSchema = z.strictObject({
  ...projectFields,
  slug: projectFields.slug.optional(),
  type: projectFields.type.optional(),
  name: projectFields.name.optional(),
  version: projectFields.version.optional(),
  pot: projectFields.pot.nullable(),
  pot_url: projectFields.pot_url.nullable(),
});
export type CreateProject = z.output<typeof createProjectSchema>;
export type UpdateProject = z.output<typeof updateProjectSchema>;

export const rejectSchema = z.strictObject({ reason: fields.label(1000) });

const APPROVE_FILTERS = ['locale', 'slug', 'type', 'version'];
/** Bulk approval: the pending jobs matching every given filter; `all: true` for every pending job. */
export const bulkApproveSchema = z
  .strictObject({
    locale: locale().optional(),
    slug: slug().optional(),
    type: packageType().optional(),
    version: version().optional(),
    all: z.literal(true, { error: () => 'must be true (approve every pending job) or left out.' }).optional(),
  })
  .superRefine((v, ctx) => {
    const filters = [v.locale, v.slug, v.type, v.version].filter((x) => x !== undefined).length;
    if (!v.all && filters === 0) ctx.addIssue({ code: 'custom', path: ['all'], message: 'give at least one filter (locale, slug, type, version) or all: true.' });
    if (v.all && filters > 0) ctx.addIssue({ code: 'custom', path: ['all'], message: 'all: true cannot be combined with filters.' });
  })
  .meta({ oneOf: [{ required: ['all'], not: anyOfRequired(APPROVE_FILTERS) }, { ...anyOfRequired(APPROVE_FILTERS), not: { required: ['all'] } }] });

// ---- responses ---------------------------------------------------------------------------------

export const statusSchema = z
  .object({
    slug: z.string(),
    type: z.enum(PACKAGE_TYPES),
    locale: z.string(),
    version: z.string().optional().describe('Version of the package (absent when missing).'),
    status: z.enum(PACKAGE_STATUSES),
    source: z.enum(SOURCES).describe('Origin of the translations: human (uploaded PO / GlotPress), ai, mixed, or none yet.'),
    remaining_strings: z.int(),
    total_strings: z.int(),
    translated_strings: z
      .int()
      .describe('Strings the pack translates (total_strings - remaining_strings). A pack with none is never ready: its job fails at import, saying why.'),
    download_url: z.url().optional().describe('Only when ready.'),
    retry_after: z.int().optional().describe('Suggested seconds before polling again (while not ready, failed or expired).'),
    failure_step: z.enum(PIPELINE_STEPS).optional().describe('When failed or expired: the step it stopped in.'),
    failure_reason: z.string().optional().describe('When failed or expired: why.'),
    job_id: z.int().optional(),
  })
  .strict();

export const batchItemSchema = z.union([
  statusSchema,
  z
    .object({
      index: z.int(),
      error: z.object({ code: z.string(), message: z.string(), data: z.object({ status: z.int(), params: z.record(z.string(), z.string()).optional(), detail: z.string().optional().describe('What the infrastructure said (503).') }) }),
    })
    .strict(),
]);

export const projectRecordSchema = z
  .object({
    id: z.int(),
    model: z.literal('translation_project'),
    slug: z.string(),
    type: z.enum(PACKAGE_TYPES),
    name: z.string(),
    version: z.string(),
    pot_url: z.string().nullable(),
    pot_size: z.int().nullable().describe('Bytes of the stored POT text (null when fetched from pot_url).'),
    glotpress_url_template: z.string().nullable(),
    po_locales: z.array(z.string()).describe('Locales with an uploaded PO file.'),
    auto_approve: z.boolean(),
    date_created: z.string(),
    date_modified: z.string(),
  })
  .strict();

export const jobRecordSchema = z
  .object({
    id: z.int(),
    model: z.literal('translation_job'),
    project_id: z.int().nullable(),
    slug: z.string(),
    type: z.enum(PACKAGE_TYPES),
    version: z.string(),
    locale: z.string(),
    status: z.enum(JOB_STATUSES),
    source: z.enum(SOURCES),
    total_strings: z.int(),
    remaining_strings: z.int(),
    human_strings: z.int(),
    ai_strings: z.int(),
    batches_done: z.int(),
    workflow_id: z.string(),
    failure_step: z.enum(PIPELINE_STEPS).nullable(),
    failure_kind: z.string().nullable().describe('validation, rejected, translation or packaging when failed; expired when nobody approved it in time.'),
    failure_reason: z.string().nullable(),
    rejection_reason: z.string().nullable(),
    approved_at: z.string().nullable(),
    approved_by: z.string().nullable(),
    download_url: z.string().nullable(),
    package_size: z.int().nullable(),
    package_sha256: z.string().nullable(),
    package_files: z.array(z.string()).nullable(),
    logs: z.array(z.object({ at: z.string(), step: z.string(), level: z.string(), message: z.string() })).optional().describe('Only on GET /translations/jobs/{id}.'),
    date_created: z.string(),
    date_modified: z.string(),
  })
  .strict();

/** One string of a job (GET /translations/jobs/{id}/strings). */
export const jobStringSchema = z
  .object({
    index: z.int().describe("Position among the job's strings (from 0)."),
    context: z.string().nullable().describe('msgctxt'),
    source: z.string().describe('msgid: the English text.'),
    plural: z.string().nullable().describe('msgid_plural'),
    references: z.array(z.string()).describe('Where the string is used (src/app.js:12).'),
    note: z.string().nullable().describe('Comment for translators.'),
    translation: z.array(z.string()).nullable().describe('The forms (one, or one per plural form); null while missing.'),
    state: z.enum(['human', 'ai', 'missing']),
  })
  .strict();
