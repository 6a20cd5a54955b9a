/**
 * What the service exposes, for the WordPress-style route index (GET /wp-json/ and
 * GET /wp-json/{namespace}). Every router registers its routes here as it mounts them.
 */
export interface RouteInfo {
  namespace: string;
  /** WordPress-style path, e.g. /wu/v2/customers/(?P<id>[\d]+) */
  path: string;
  methods: string[];
  public?: boolean;
}

export class RouteRegistry {
  readonly routes: RouteInfo[] = [];
  readonly namespaces = new Set<string>();

  add(info: RouteInfo): void {
    this.namespaces.add(info.namespace);
    const existing = this.routes.find((r) => r.path === info.path);
    if (existing) {
      for (const m of info.methods) if (!existing.methods.includes(m)) existing.methods.push(m);
    } else {
      this.routes.push({ ...info, methods: [...info.methods] });
    }
  }

  /** Express path (`/customers/:id`) to WordPress' regex form. */
  static wpPath(namespace: string, expressPath: string): string {
    const p = expressPath.replace(/:([A-Za-z_]+)/g, (_m, name: string) => (name.endsWith('id') ? `(?P<${name}>[\\d]+)` : `(?P<${name}>[\\w-]+)`));
    return `/${namespace}${p === '/' ? '' : p}`;
  }
}
