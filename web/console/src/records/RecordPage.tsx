import { ApiError, type Api, type Page } from '../api';
import { displayValue, ErrorMessage, Link, PageTitle, Progress, StatusBadge, Table, WorkflowLink } from '../components';
import { useLoad } from '../hooks';
import { EMBED_RESOURCE, RESOURCES, type Related, type ResourceName, type Row } from './resources';

type Embedded = Row & { _embedded?: Record<string, Row[]> };

/** One record with what it links to (`_embed`) and the lists that name it (a customer's memberships, sites…). */
export function RecordPage({ api, name, id }: { api: Api; name: ResourceName; id: number }) {
  const resource = RESOURCES[name];
  const query = resource.embed.length ? `?_embed=${resource.embed.join(',')}` : '';
  const record = useLoad((signal) => api.wu<Embedded>(`/${name}/${id}${query}`, { signal }), `${name}/${id}`);
  const row = record.data;
  const workflows = row ? resource.workflows?.(row) : null;
  return (
    <section>
      <p>
        <Link to={`/records/${name}`}>← {resource.title}</Link>
      </p>
      <PageTitle>
        {resource.singular} #{id}
        {row ? <span class="subtitle"> {resource.label(row)}</span> : null}
      </PageTitle>
      <ErrorMessage error={record.error} title={`The ${resource.singular.toLowerCase()} could not be loaded`} />
      {record.loading && !row ? <Progress label="Loading…" /> : null}
      {row ? (
        <>
          {workflows ? (
            <p class="panel">
              <WorkflowLink workflowId={workflows.workflowId} query={workflows.query}>
                {workflows.label}
              </WorkflowLink>
            </p>
          ) : null}
          <dl class="facts record">
            {Object.entries(row)
              .filter(([k]) => !k.startsWith('_'))
              .map(([k, v]) => (
                <div key={k}>
                  <dt>{k.replace(/_/g, ' ')}</dt>
                  <dd>{typeof v === 'object' && v !== null ? <pre>{displayValue(v)}</pre> : displayValue(v)}</dd>
                </div>
              ))}
          </dl>
          {Object.entries(row._embedded ?? {}).map(([rel, items]) => (
            <EmbeddedRecord key={rel} rel={rel} item={items[0]} />
          ))}
          {name === 'sites' ? <TenantPanel api={api} siteId={id} /> : null}
          {resource.related.map((rel) => (
            <RelatedList key={rel.label} api={api} rel={rel} id={id} />
          ))}
        </>
      ) : null}
    </section>
  );
}

function EmbeddedRecord({ rel, item }: { rel: string; item: Row | undefined }) {
  if (!item || typeof item.id !== 'number') return null;
  const target = EMBED_RESOURCE[rel];
  const label = target ? RESOURCES[target].label(item) : String(item.name ?? item.slug ?? `#${item.id}`);
  return (
    <section class="panel" aria-labelledby={`rel-${rel}`}>
      <h2 id={`rel-${rel}`}>{rel.charAt(0).toUpperCase() + rel.slice(1)}</h2>
      <p>{target ? <Link to={`/records/${target}/${item.id}`}>{label}</Link> : label}</p>
    </section>
  );
}

function RelatedList({ api, rel, id }: { api: Api; rel: Related; id: number }) {
  const url = `/wp-json/wu/v2/${rel.resource}?${rel.filter}=${id}&per_page=10`;
  const list = useLoad((signal) => api.page<Row>(url, { signal }), url);
  return (
    <section aria-labelledby={`related-${rel.resource}`}>
      <h2 id={`related-${rel.resource}`}>
        {rel.label}
        {list.data?.total !== null && list.data?.total !== undefined ? ` (${list.data.total})` : ''}
      </h2>
      <ErrorMessage error={list.error} title={`The ${rel.label.toLowerCase()} could not be loaded`} />
      {list.loading && !list.data ? <Progress label={`Loading ${rel.label.toLowerCase()}…`} /> : null}
      {list.data ? <RelatedTable page={list.data} resource={rel.resource} /> : null}
      {list.data && list.data.next ? (
        <p>
          <Link to={`/records/${rel.resource}`} query={{ [rel.filter]: id }}>
            All {rel.label.toLowerCase()}
          </Link>
        </p>
      ) : null}
      {list.data && list.data.items.length === 0 ? <p class="empty">None.</p> : null}
    </section>
  );
}

function RelatedTable({ page, resource }: { page: Page<Row>; resource: ResourceName }) {
  const r = RESOURCES[resource];
  if (page.items.length === 0) return null;
  return (
    <Table caption={r.title}>
      <thead>
        <tr>
          {r.columns.map((c) => (
            <th key={c.key} scope="col">
              {c.label}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>
        {page.items.map((row) => (
          <tr key={row.id}>
            {r.columns.map((c, i) => (
              <td key={c.key}>{i === 0 ? <Link to={`/records/${resource}/${row.id}`}>#{row.id}</Link> : c.format ? c.format(row) : displayValue(row[c.key])}</td>
            ))}
          </tr>
        ))}
      </tbody>
    </Table>
  );
}

interface TenantStatus {
  state: string;
  step: string | null;
  ready: boolean;
  workflow_id: string | null;
  database_host: string | null;
  checks: Record<string, { status: string; message: string }>;
  error?: { message?: string } | string | null;
}

/** A site isolated into its own database: the tenant's state, step, checks and its latest workflow (GET /tenants/{id}/migration-status). */
function TenantPanel({ api, siteId }: { api: Api; siteId: number }) {
  const status = useLoad(
    async (signal) => {
      try {
        return await api.wu<TenantStatus>(`/tenants/${siteId}/migration-status`, { signal });
      } catch (err) {
        // Not an isolated tenant: the site lives in the shared database.
        if (err instanceof ApiError && err.code === 'wu_rest_tenant_not_found') return null;
        throw err;
      }
    },
    `tenant-${siteId}`,
  );
  return (
    <section class="panel" aria-labelledby="tenant-title">
      <h2 id="tenant-title">Isolated tenant</h2>
      <ErrorMessage error={status.error} title="The tenant status could not be loaded" />
      {status.loading && status.data === undefined ? <Progress label="Loading the tenant status…" /> : null}
      {status.data === null ? <p>Not isolated: the site lives in the shared database.</p> : null}
      {status.data ? (
        <>
          <p>
            <StatusBadge status={status.data.state} /> {status.data.ready ? 'ready' : 'not ready'}
            {status.data.step ? `, step ${status.data.step}` : ''}
            {status.data.database_host ? ` on ${status.data.database_host}` : ''}
          </p>
          <ul>
            {Object.entries(status.data.checks).map(([check, c]) => (
              <li key={check}>
                {check.replace(/_/g, ' ')}: {c.status} — {c.message}
              </li>
            ))}
          </ul>
          {status.data.workflow_id ? (
            <p>
              <WorkflowLink workflowId={status.data.workflow_id}>Its latest tenant workflow in the Temporal UI</WorkflowLink>
            </p>
          ) : null}
        </>
      ) : null}
    </section>
  );
}
