import { cloneElement, type ComponentChildren, type VNode } from 'preact';
import { useEffect, useId, useRef } from 'preact/hooks';
import { href } from './router';

/** An API error in words, announced to screen readers. */
export function ErrorMessage({ error, title = 'Something went wrong' }: { error: string | null; title?: string }) {
  if (!error) return null;
  return (
    <div class="alert alert-error" role="alert">
      <strong>{title}</strong>
      {error.split('\n').map((line) => (
        <p key={line}>{line}</p>
      ))}
    </div>
  );
}

export function Notice({ children }: { children: ComponentChildren }) {
  return (
    <div class="alert alert-ok" role="status">
      {children}
    </div>
  );
}

/** Long work: an indeterminate spinner, or a bar when the share done is known. */
export function Progress({ label, value, max }: { label: string; value?: number; max?: number }) {
  if (value === undefined || !max) {
    return (
      <p class="progress-text" role="status" aria-live="polite">
        <span class="spinner" aria-hidden="true" /> {label}
      </p>
    );
  }
  return (
    <div class="progress" role="status" aria-live="polite">
      <label>
        {label} ({Math.round((value / max) * 100)} %)
        <progress value={value} max={max} />
      </label>
    </div>
  );
}

const STATUS_TONES: Record<string, string> = {
  ready: 'ok',
  done: 'ok',
  active: 'ok',
  completed: 'ok',
  pending_approval: 'wait',
  pending: 'wait',
  importing: 'busy',
  processing: 'busy',
  packaging: 'busy',
  'checking-dns': 'busy',
  'checking-ssl-cert': 'busy',
  failed: 'bad',
  expired: 'bad',
  'ssl-failed': 'bad',
  cancelled: 'bad',
};

export function StatusBadge({ status }: { status: string }) {
  return <span class={`badge badge-${STATUS_TONES[status] ?? 'plain'}`}>{status.replace(/_/g, ' ')}</span>;
}

/**
 * A labelled control: the label names it (`for`/`id`, so a select's name is not followed by its
 * chosen option's text); the hint, outside the label, describes it (aria-describedby).
 */
export function Field({ label, hint, children }: { label: string; hint?: string; children: VNode }) {
  const id = useId();
  return (
    <div class="field">
      <label class="field-label" for={`${id}-control`}>
        {label}
      </label>
      {cloneElement(children, { id: `${id}-control`, ...(hint ? { 'aria-describedby': `${id}-hint` } : {}) })}
      {hint ? (
        <span class="field-hint" id={`${id}-hint`}>
          {hint}
        </span>
      ) : null}
    </div>
  );
}

let pageName = 'hostflow';
let waitingCount = 0;
function applyTitle(): void {
  document.title = `${waitingCount > 0 ? `(${waitingCount}) ` : ''}${pageName} · hostflow console`;
}

/** The number of chats waiting for an agent, shown first in the tab's title so a new chat is seen from another tab. */
export function setTitleCount(n: number): void {
  waitingCount = n;
  applyTitle();
}

/** The page's heading, focused on navigation so keyboard and screen reader users land on it. */
export function PageTitle({ children }: { children: ComponentChildren }) {
  const ref = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    ref.current?.focus();
  }, []);
  // The tab's title names the page too (the heading's text once rendered), after the count of waiting chats.
  useEffect(() => {
    pageName = ref.current?.textContent?.trim() || 'hostflow';
    applyTitle();
  });
  return (
    <h1 tabIndex={-1} ref={ref}>
      {children}
    </h1>
  );
}

/** Paging through the list API's own links: page numbers, X-WP-Total, and its rel="next" (with the cursor). */
export function Pager({ page, totalPages, total, onPage, hasNext }: { page: number; totalPages: number | null; total: number | null; onPage: (page: number) => void; hasNext: boolean }) {
  return (
    <nav class="pager" aria-label="Pages">
      <button type="button" disabled={page <= 1} onClick={() => onPage(page - 1)}>
        Previous
      </button>
      <span>
        Page {page}
        {totalPages !== null ? ` of ${Math.max(totalPages, 1)}` : ''}
        {total !== null ? ` · ${total} in all` : ''}
      </span>
      <button type="button" disabled={!hasNext} onClick={() => onPage(page + 1)}>
        Next
      </button>
    </nav>
  );
}

export function Link({ to, query, children, class: className, 'aria-current': current }: { to: string; query?: Record<string, string | number | undefined | null>; children: ComponentChildren; class?: string; 'aria-current'?: 'page' }) {
  return (
    <a href={href(to, query)} class={className} aria-current={current}>
      {children}
    </a>
  );
}

/**
 * A table that scrolls sideways on a narrow screen instead of breaking the page; `stacked`: on a
 * phone each row becomes a card, each cell under its column's name (the cells' `data-label`).
 */
export function Table({ caption, children, stacked = false }: { caption: string; children: ComponentChildren; stacked?: boolean }) {
  return (
    <div class="table-wrap" role="region" aria-label={caption} tabIndex={0}>
      <table class={stacked ? 'stacked' : undefined}>
        <caption class="visually-hidden">{caption}</caption>
        {children}
      </table>
    </div>
  );
}

export function formatDate(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

/** A record's field as text: dates in the reader's time, booleans as yes/no, objects as JSON. */
export function displayValue(value: unknown): string {
  if (value === null || value === undefined || value === '') return '—';
  if (typeof value === 'boolean') return value ? 'yes' : 'no';
  if (typeof value === 'object') return JSON.stringify(value, null, 1);
  if (typeof value === 'string' && /^\d{4}-\d\d-\d\dT/.test(value)) return formatDate(value);
  return String(value);
}

/** Where the Temporal UI is (the server puts it in a meta tag when it knows), or null. */
export function temporalUi(): string | null {
  return document.querySelector<HTMLMetaElement>('meta[name="hostflow-temporal-ui"]')?.content ?? null;
}

/** A link to one workflow, or to a search of workflows, in the Temporal UI (plain text without one). */
export function WorkflowLink({ workflowId, query, children }: { workflowId?: string; query?: string; children: ComponentChildren }) {
  const base = temporalUi();
  if (!base) return <span class="muted">{workflowId ?? query} (no Temporal UI configured: TEMPORAL_UI_URL)</span>;
  const url = workflowId ? `${base}/workflows/${encodeURIComponent(workflowId)}` : `${base}/workflows?query=${encodeURIComponent(query ?? '')}`;
  return (
    <a href={url} target="_blank" rel="noopener noreferrer">
      {children}
      <span class="visually-hidden"> (opens the Temporal UI in a new tab)</span>
    </a>
  );
}
