import type { Api } from '../api';
import { displayValue, ErrorMessage, Field, Link, PageTitle, Pager, Progress, Table } from '../components';
import { useLoad } from '../hooks';
import { navigate, type Location } from '../router';
import { RESOURCES, type ResourceName, type Row } from './resources';


/** The cursor of one of the API's paging links (it keeps deep pages as cheap as page 2). */
function cursorOf(link: string | null): string | undefined {
  if (!link) return undefined;
  return new URL(link, location.href).searchParams.get('cursor') ?? undefined;
}

/**
 * A resource's list through its own API parameters: search, filters, orderby/order, per_page,
 * page (with the cursor of the API's Link rel="next"/"prev"), and the total from X-WP-Total.
 */
export function ListPage({ api, name, loc }: { api: Api; name: ResourceName; loc: Location }) {
  const resource = RESOURCES[name];
  const q = loc.query;
  const page = Math.max(1, Number(q.get('page')) || 1);
  // The API takes 1 to 100 (its error says so otherwise).
  const perPage = Number(q.get('per_page')) || 20;
  const state: Record<string, string> = {};
  for (const key of ['search', 'orderby', 'order', 'date_created[after]', 'date_created[before]', ...resource.filters.map((f) => f.name)]) {
    const v = q.get(key);
    if (v) state[key] = v;
  }
  const go = (changes: Record<string, string | number | undefined>) => navigate(`/records/${name}`, { ...state, per_page: perPage, page, cursor: q.get('cursor') ?? undefined, ...changes });

  const params = new URLSearchParams({ ...state, per_page: String(perPage), page: String(page) });
  const cursor = q.get('cursor');
  if (cursor) params.set('cursor', cursor);
  const list = useLoad((signal) => api.page<Row>(`/wp-json/wu/v2/${name}?${params.toString()}`, { signal }), `${name}?${params.toString()}`);

  return (
    <section>
      <PageTitle>{resource.title}</PageTitle>
      <form
        class="toolbar wrap"
        role="search"
        aria-label={`Search and filter ${resource.title.toLowerCase()}`}
        onSubmit={(e) => {
          e.preventDefault();
          const form = new FormData(e.currentTarget);
          const next: Record<string, string | number | undefined> = { page: 1, cursor: undefined };
          for (const [k, v] of form.entries()) next[k] = String(v) || undefined;
          navigate(`/records/${name}`, next);
        }}
      >
        <Field label="Search" hint={resource.searchHint}>
          <input name="search" type="search" defaultValue={state.search ?? ''} maxLength={200} />
        </Field>
        {resource.filters.map((f) => (
          <Field key={f.name} label={f.label}>
            {f.options || f.kind === 'bool' ? (
              <select name={f.name}>
                <option value="" selected={!state[f.name]}>
                  any
                </option>
                {(f.options ?? ['true', 'false']).map((o) => (
                  <option key={o} value={o} selected={state[f.name] === o}>
                    {f.kind === 'bool' ? (o === 'true' ? 'yes' : 'no') : o}
                  </option>
                ))}
              </select>
            ) : (
              <input name={f.name} inputMode="numeric" pattern="[0-9]{1,15}" defaultValue={state[f.name] ?? ''} size={8} />
            )}
          </Field>
        ))}
        <Field label="Created after">
          <input name="date_created[after]" type="date" defaultValue={state['date_created[after]'] ?? ''} />
        </Field>
        <Field label="Created before">
          <input name="date_created[before]" type="date" defaultValue={state['date_created[before]'] ?? ''} />
        </Field>
        <Field label="Order by">
          <select name="orderby">
            <option value="" selected={!state.orderby}>
              default (id)
            </option>
            {resource.orderby.map((o) => (
              <option key={o} value={o} selected={state.orderby === o}>
                {o.replace(/_/g, ' ')}
              </option>
            ))}
          </select>
        </Field>
        <Field label="Order">
          <select name="order">
            <option value="" selected={!state.order}>
              newest first
            </option>
            <option value="asc" selected={state.order === 'asc'}>
              ascending
            </option>
            <option value="desc" selected={state.order === 'desc'}>
              descending
            </option>
          </select>
        </Field>
        <Field label="Per page">
          <input name="per_page" type="number" min={1} max={100} defaultValue={String(perPage)} size={4} />
        </Field>
        <button type="submit">Apply</button>
      </form>
      <ErrorMessage error={list.error} title={`The ${resource.title.toLowerCase()} could not be loaded`} />
      {list.loading && !list.data ? <Progress label={`Loading ${resource.title.toLowerCase()}…`} /> : null}
      {list.data ? (
        <>
          {list.data.items.length === 0 ? (
            <p class="empty">No {resource.title.toLowerCase()} match.</p>
          ) : (
            <Table caption={resource.title}>
              <thead>
                <tr>
                  {resource.columns.map((c) => (
                    <th key={c.key} scope="col">
                      {c.label}
                    </th>
                  ))}
                </tr>
              </thead>
              <tbody>
                {list.data.items.map((row) => (
                  <tr key={row.id}>
                    {resource.columns.map((c, i) => (
                      <td key={c.key}>
                        {i === 0 ? (
                          <Link to={`/records/${name}/${row.id}`}>
                            #{row.id}
                            <span class="visually-hidden"> {resource.label(row)}</span>
                          </Link>
                        ) : c.format ? (
                          c.format(row)
                        ) : (
                          displayValue(row[c.key])
                        )}
                      </td>
                    ))}
                  </tr>
                ))}
              </tbody>
            </Table>
          )}
          <Pager
            page={page}
            total={list.data.total}
            totalPages={list.data.totalPages}
            hasNext={list.data.next !== null}
            onPage={(p) => go({ page: p, cursor: p > page ? cursorOf(list.data!.next) : p > 1 ? cursorOf(list.data!.prev) : undefined })}
          />
          {list.loading ? <Progress label="Refreshing…" /> : null}
        </>
      ) : null}
    </section>
  );
}
