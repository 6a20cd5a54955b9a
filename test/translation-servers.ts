/**
 * Loopback fakes for the translation tests, speaking the real protocols over HTTP:
 * an OpenAI-compatible chat-completions endpoint and a GlotPress export endpoint.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface AiRequest {
  locale: string;
  strings: { text: string; plural?: string; context?: string }[];
  authorization: string | undefined;
  model: string;
}

export interface FakeAi {
  baseUrl: string;
  requests: AiRequest[];
  /** Behaviour knobs, changed by the tests between steps. */
  mode: {
    /** Answers with placeholders stripped for strings this matches. */
    corrupt?: (text: string, locale: string) => boolean;
    /** Answers one translation too few this many more times. */
    dropOneTimes?: number;
    /** For this locale, answers one translation too few on every other request (the 1st, 3rd, …): each batch fails once, then succeeds. */
    failEveryOther?: string;
    /** Waits this long before answering. */
    delayMs?: number;
    /** Answers 401 and echoes the Authorization header back (as some providers quote the key). */
    rejectKey?: boolean;
  };
  close(): Promise<void>;
}

/** A translation that keeps placeholders and tags: `[de_DE] Hello %s` (form n marked for plurals). */
export function fakeTranslation(locale: string, text: string, form?: number): string {
  return `[${locale}${form !== undefined ? `#${form}` : ''}] ${text}`;
}

export async function startFakeAi(expectedKey: string): Promise<FakeAi> {
  const fake: FakeAi = { baseUrl: '', requests: [], mode: {}, close: async () => undefined };
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (d) => (raw += String(d)));
    req.on('end', () => void answer());
    const answer = async () => {
      const send = (status: number, body: unknown) => {
        res.writeHead(status, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') return send(404, { error: { message: 'not found' } });
      if (fake.mode.rejectKey) {
        fake.requests.push({ locale: 'rejected', strings: [], authorization: req.headers.authorization, model: '' });
        return send(401, { error: { message: `Incorrect API key provided: ${req.headers.authorization}`, type: 'invalid_request_error' } });
      }
      if (req.headers.authorization !== `Bearer ${expectedKey}`) return send(401, { error: { message: 'Incorrect API key provided', type: 'invalid_request_error' } });
      const body = JSON.parse(raw);
      const system: string = body.messages.find((m: { role: string }) => m.role === 'system').content;
      const user = JSON.parse(body.messages.find((m: { role: string }) => m.role === 'user').content);
      const nplurals = Number(/exactly (\d+) strings/.exec(system)?.[1] ?? 2);
      const locale: string = user.target_locale;
      fake.requests.push({ locale, strings: user.strings, authorization: req.headers.authorization, model: body.model });
      if (fake.mode.delayMs) await new Promise((r) => setTimeout(r, fake.mode.delayMs));
      const strip = (s: string) => s.replace(/%(\d+\$)?[sd]/g, 'X').replace(/<[^>]+>/g, '');
      let translations: unknown[] = user.strings.map((s: { text: string; plural?: string }) => {
        const bad = fake.mode.corrupt?.(s.text, locale) ?? false;
        const fix = (t: string) => (bad ? strip(t) : t);
        if (s.plural === undefined) return fix(fakeTranslation(locale, s.text));
        return Array.from({ length: nplurals }, (_, i) => fix(fakeTranslation(locale, i === 0 ? s.text : s.plural!, i)));
      });
      if (fake.mode.failEveryOther === locale && fake.requests.filter((r) => r.locale === locale).length % 2 === 1) translations = translations.slice(1);
      if (fake.mode.dropOneTimes && fake.mode.dropOneTimes > 0) {
        fake.mode.dropOneTimes -= 1;
        translations = translations.slice(1);
      }
      send(200, {
        id: `chatcmpl-${fake.requests.length}`,
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model: body.model,
        choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: JSON.stringify({ translations }) } }],
        usage: { prompt_tokens: 10, completion_tokens: 10, total_tokens: 20 },
      });
    };
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  fake.baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  fake.close = () => new Promise((r) => server.close(() => r()));
  return fake;
}

export interface FakeGlotPress {
  /** URL template with {type}, {slug} and {glotpress_locale}. */
  template: string;
  /** Paths asked, in order. */
  requests: string[];
  close(): Promise<void>;
}

/**
 * GlotPress' export route: /projects/wp-{type}s/{slug}/stable/{glotpress locale}/default/export-translations/?format=po
 * answers the PO file of `files["{slug}/{glotpress locale}"]`, 404 otherwise.
 */
export async function startFakeGlotPress(files: Record<string, string>): Promise<FakeGlotPress> {
  const fake: FakeGlotPress = { template: '', requests: [], close: async () => undefined };
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    fake.requests.push(url.pathname);
    const m = /^\/projects\/wp-(plugin|theme)s\/([^/]+)\/stable\/(.+)\/default\/export-translations\/$/.exec(url.pathname);
    const file = m && url.searchParams.get('format') === 'po' ? files[`${m[2]}/${m[3]}`] : undefined;
    if (!file) {
      res.writeHead(404, { 'Content-Type': 'text/html' });
      res.end('<h1>Not found</h1>');
      return;
    }
    res.writeHead(200, { 'Content-Type': 'text/x-gettext-translation; charset=utf-8', 'Content-Disposition': 'attachment; filename=export.po' });
    res.end(file);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  fake.template = `http://127.0.0.1:${port}/projects/wp-{type}s/{slug}/stable/{glotpress_locale}/default/export-translations/?format=po`;
  fake.close = () => new Promise((r) => server.close(() => r()));
  return fake;
}

export interface FakeMetrics {
  url: string;
  /** Requests received: 0 proves a refused fetch never reached it. */
  requests: number;
  /** Names in the body that must never appear in an answer or a job. */
  secrets: string[];
  close(): Promise<void>;
}

/** An internal service an SSRF would aim at: Prometheus metrics on loopback (/metrics). */
export async function startFakeMetrics(): Promise<FakeMetrics> {
  const secrets = ['hostflow_internal_secret_total', 'tenant="acme-internal"'];
  const fake: FakeMetrics = { url: '', requests: 0, secrets, close: async () => undefined };
  const server = http.createServer((_req, res) => {
    fake.requests += 1;
    res.writeHead(200, { 'Content-Type': 'text/plain; version=0.0.4' });
    res.end(`# HELP ${secrets[0]} Internal counter.\n# TYPE ${secrets[0]} counter\n${secrets[0]}{${secrets[1]}} 42\n`);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`;
  fake.close = () => new Promise((r) => server.close(() => r()));
  return fake;
}

/** A POT file with the kinds of strings a plugin has. `n` extra plain strings pad it out. */
export function samplePot(n = 0): string {
  const extra = Array.from({ length: n }, (_, i) => `#: includes/extra.php:${i + 1}\nmsgid "Extra string number %d of the list ${i + 1}"\nmsgstr ""\n`).join('\n');
  return `# Copyright (C) 2026 Example
msgid ""
msgstr ""
"Project-Id-Version: Example Plugin 1.0.0\\n"
"Content-Type: text/plain; charset=UTF-8\\n"
"X-Domain: example\\n"

#: includes/admin.php:10
msgid "Settings"
msgstr ""

#: includes/admin.php:12
msgid "Hello, %s!"
msgstr ""

#: includes/admin.php:14
msgctxt "verb"
msgid "Post"
msgstr ""

#: includes/admin.php:15
msgctxt "noun"
msgid "Post"
msgstr ""

#: includes/admin.php:20
msgid "%d file"
msgid_plural "%d files"
msgstr[0] ""
msgstr[1] ""

#: includes/admin.php:30
msgid "Read the <a href=\\"https://example.com/docs\\">documentation</a>."
msgstr ""

#: includes/admin.php:31
msgid "%1$s of %2$d items (100%%)"
msgstr ""

#: assets/js/editor.js:5 assets/js/editor.min.js:1
msgid "Save draft"
msgstr ""

#: assets/js/editor.js:9
msgid "%d block"
msgid_plural "%d blocks"
msgstr[0] ""
msgstr[1] ""

#: build/sidebar.js:2
msgctxt "button"
msgid "Close"
msgstr ""
${extra ? `\n${extra}` : ''}`;
}

/** A German PO export as GlotPress gives it: three strings translated, one fuzzy (ignored). */
export const GERMAN_PO = `msgid ""
msgstr ""
"Language: de\\n"
"Plural-Forms: nplurals=2; plural=n != 1;\\n"
"Content-Type: text/plain; charset=UTF-8\\n"

msgid "Settings"
msgstr "Einstellungen"

msgctxt "verb"
msgid "Post"
msgstr "Veröffentlichen"

#, fuzzy
msgctxt "noun"
msgid "Post"
msgstr "Beitrag?"

msgid "%d file"
msgid_plural "%d files"
msgstr[0] "%d Datei"
msgstr[1] "%d Dateien"

msgid "Not in the POT"
msgstr "Nicht im POT"
`;
