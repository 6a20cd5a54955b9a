import { useEffect, useState } from 'preact/hooks';

/**
 * Hash routes (`#/translations/jobs/5?search=x`): the server serves one page at /console/, deep
 * links and the back button work, and list state (search, filters, page) lives in the URL.
 */
export interface Location {
  path: string;
  query: URLSearchParams;
}

function current(): Location {
  const hash = location.hash.replace(/^#/, '') || '/';
  const [path, query = ''] = hash.split('?', 2);
  return { path: path || '/', query: new URLSearchParams(query) };
}

export function useLocation(): Location {
  const [loc, setLoc] = useState(current);
  useEffect(() => {
    const onChange = () => setLoc(current());
    window.addEventListener('hashchange', onChange);
    return () => window.removeEventListener('hashchange', onChange);
  }, []);
  return loc;
}

/** The href of a route, with its query (empty values left out). */
export function href(path: string, query: Record<string, string | number | undefined | null> = {}): string {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== '') params.set(k, String(v));
  const q = params.toString();
  return `#${path}${q ? `?${q}` : ''}`;
}

export function navigate(path: string, query: Record<string, string | number | undefined | null> = {}): void {
  location.hash = href(path, query);
}

/** Matches `/records/:resource/:id` against a path: the named parts, or null. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const p = pattern.split('/');
  const s = path.split('/');
  if (p.length !== s.length) return null;
  const out: Record<string, string> = {};
  for (let i = 0; i < p.length; i++) {
    if (p[i].startsWith(':')) out[p[i].slice(1)] = decodeURIComponent(s[i]);
    else if (p[i] !== s[i]) return null;
  }
  return out;
}
