/** The status of each (slug, type, locale) of a check, in the order asked (bench/translations.ts's bare server sends it too, so it lives apart from the service). */
export const CHECK_SQL = `select i.ord::int as ord, p.id as project_id, p.version, j.id as job_id, j.status, j.source,
        j.total_strings, j.remaining_strings, j.failure_step, j.failure_reason, j.status_changed_at
   from unnest($1::text[], $2::text[], $3::text[]) with ordinality as i(slug, type, locale, ord)
   left join translation_projects p on p.slug = i.slug and p.type = i.type
   left join translation_jobs j on j.slug = i.slug and j.type = i.type and j.locale = i.locale and j.version = p.version
  order by i.ord`;
