import { useState } from 'preact/hooks';
import { newIdempotencyKey, type Api } from '../api';
import { ErrorMessage, Field, Link, Notice, PageTitle, Progress } from '../components';
import { useAction } from '../hooks';

interface PoFile {
  name: string;
  locale: string;
  text: string;
}

/** The locale a PO file is for: the name's suffix (`my-plugin-de_DE.po`, as WordPress names them), else its `Language:` header. */
function guessLocale(name: string, text: string): string {
  const fromName = /[-.]([a-z]{2,3}(?:_[A-Z]{2})?(?:_[a-z0-9]+)?)\.po$/.exec(name)?.[1];
  return fromName ?? /^"Language:\s*([A-Za-z_]+)\\n"/m.exec(text)?.[1] ?? '';
}

/**
 * Registers a plugin or theme from its POT file and the PO files of its human translations,
 * then asks for each PO file's locale pack (GET /translations/check), which starts its pipeline:
 * the jobs show up in the queue.
 */
export function RegisterPage({ api }: { api: Api }) {
  const [pot, setPot] = useState<{ name: string; text: string } | null>(null);
  const [poFiles, setPoFiles] = useState<PoFile[]>([]);
  const [extraLocales, setExtraLocales] = useState('');
  const [done, setDone] = useState<{ project: string; jobs: { locale: string; status: string; job_id?: number }[] } | null>(null);
  const [step, setStep] = useState('');
  const action = useAction();

  const readPo = async (files: FileList | null) => {
    const read = await Promise.all([...(files ?? [])].map(async (f) => ({ name: f.name, text: await f.text() })));
    setPoFiles(read.map((f) => ({ ...f, locale: guessLocale(f.name, f.text) })));
  };

  const submit = (e: Event) => {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    setDone(null);
    void action.run(async () => {
      if (!pot) throw new Error('Choose the POT file (the source strings).');
      const missing = poFiles.find((f) => !f.locale);
      if (missing) throw new Error(`Say which locale ${missing.name} is for.`);
      const slug = String(form.get('slug')).trim();
      const type = String(form.get('type'));
      setStep('Registering the project…');
      const body: Record<string, unknown> = {
        slug,
        type,
        name: String(form.get('name')).trim(),
        version: String(form.get('version')).trim(),
        pot: pot.text,
        auto_approve: form.get('auto_approve') === 'on',
      };
      if (poFiles.length) body.po_files = Object.fromEntries(poFiles.map((f) => [f.locale, f.text]));
      if (form.get('glotpress') !== 'on') body.glotpress_url_template = null;
      await api.wu('/translations/projects', { method: 'POST', body, idempotencyKey: newIdempotencyKey() });
      const locales = [...new Set([...poFiles.map((f) => f.locale), ...extraLocales.split(/[\s,]+/).filter(Boolean)])];
      const jobs: { locale: string; status: string; job_id?: number }[] = [];
      for (const [i, locale] of locales.entries()) {
        setStep(`Starting the ${locale} pack (${i + 1} of ${locales.length})…`);
        const status = await api.wu<{ status: string; job_id?: number }>(`/translations/check?${new URLSearchParams({ slug, type, locale }).toString()}`);
        jobs.push({ locale, status: status.status, job_id: status.job_id });
      }
      setDone({ project: `${type} ${slug}`, jobs });
    });
  };

  return (
    <section>
      <p>
        <Link to="/translations">← Back to the queue</Link>
      </p>
      <PageTitle>Register a project</PageTitle>
      <p class="lead">A plugin or theme to translate: its POT file, and PO files of the human translations you have. Each locale then gets a job in the queue.</p>
      <form class="stack panel" onSubmit={submit}>
        <div class="grid">
          <Field label="Slug" hint="Lower-case letters, digits, - and _ (e.g. my-plugin).">
            <input name="slug" required pattern="[a-z0-9_\-]{1,100}" autoComplete="off" />
          </Field>
          <Field label="Type">
            <select name="type">
              <option value="plugin">plugin</option>
              <option value="theme">theme</option>
            </select>
          </Field>
          <Field label="Name">
            <input name="name" required maxLength={200} />
          </Field>
          <Field label="Version" hint="e.g. 1.4.0">
            <input name="version" required pattern="[A-Za-z0-9.+_\-]{1,40}" />
          </Field>
        </div>
        <Field label="POT file (source strings)">
          <input
            type="file"
            name="pot"
            accept=".pot,.po,text/x-gettext-translation"
            required
            onChange={(e) => {
              const f = e.currentTarget.files?.[0];
              if (f) void f.text().then((text) => setPot({ name: f.name, text }));
            }}
          />
        </Field>
        <Field label="PO files (human translations, optional)" hint="Each file's locale is read from its name (my-plugin-de_DE.po) or its Language header; correct it below if needed.">
          <input type="file" name="po" accept=".po" multiple onChange={(e) => void readPo(e.currentTarget.files)} />
        </Field>
        {poFiles.map((f, i) => (
          <Field key={f.name} label={`Locale of ${f.name}`}>
            <input
              value={f.locale}
              required
              onInput={(e) => {
                const locale = e.currentTarget.value;
                setPoFiles(poFiles.map((p, j) => (j === i ? { ...p, locale } : p)));
              }}
            />
          </Field>
        ))}
        <Field label="Other locales to prepare (optional)" hint="WordPress locales separated by spaces or commas, e.g. fr_FR ja. Translated by AI where there is no human translation.">
          <input value={extraLocales} onInput={(e) => setExtraLocales(e.currentTarget.value)} />
        </Field>
        <label class="check">
          <input type="checkbox" name="glotpress" /> Also import from the GlotPress server configured on the service
        </label>
        <label class="check">
          <input type="checkbox" name="auto_approve" /> Approve its jobs automatically
        </label>
        <button type="submit" class="primary" disabled={action.busy}>
          {action.busy ? 'Registering…' : 'Register'}
        </button>
        {action.busy ? <Progress label={step || 'Working…'} /> : null}
        <ErrorMessage error={action.error} title="The project was not registered" />
        {done ? (
          <Notice>
            <p>Registered {done.project}.</p>
            {done.jobs.length ? (
              <ul>
                {done.jobs.map((j) => (
                  <li key={j.locale}>
                    {j.locale}: {j.status.replace(/_/g, ' ')}{' '}
                    {j.job_id ? (
                      <Link to={`/translations/jobs/${j.job_id}`}>
                        open job #{j.job_id}
                      </Link>
                    ) : null}
                  </li>
                ))}
              </ul>
            ) : (
              <p>No locale asked for yet: a site asking for a pack starts its job.</p>
            )}
          </Notice>
        ) : null}
      </form>
    </section>
  );
}
