import type { FunctionComponent } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import type { Api } from '../api';
import { ErrorMessage, PageTitle, Progress } from '../components';
import type { Location } from '../router';

type ReportsProps = { api: Api; loc: Location };
let loaded: FunctionComponent<ReportsProps> | null = null;

/**
 * The reports page, loaded on first use: it brings uPlot (22 KB gzipped), which no other page
 * needs, as a script of its own (same origin, so the CSP's script-src 'self' allows it).
 */
export function LazyReports(props: ReportsProps) {
  const [Page, setPage] = useState<FunctionComponent<ReportsProps> | null>(() => loaded);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    if (Page) return;
    import('./ReportsPage')
      .then((m) => {
        loaded = m.ReportsPage;
        setPage(() => m.ReportsPage);
      })
      .catch(() => setError('The reports page could not be loaded. Check your connection and reload the page.'));
  }, []);
  if (Page) return <Page {...props} />;
  return (
    <section>
      <PageTitle>Reports</PageTitle>
      <ErrorMessage error={error} title="Loading failed" />
      {error ? null : <Progress label="Loading the reports page…" />}
    </section>
  );
}
