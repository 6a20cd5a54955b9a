/**
 * What the records pages know of each resource: its wu/v2 path, the columns of its list, the
 * filters and orderings its list API takes (the same names as the API's parameters), and the
 * records related to one of it (embedded links and filtered lists).
 */
export type Row = Record<string, unknown> & { id: number };

export interface Filter {
  name: string;
  label: string;
  /** A choice (the API's enum), yes/no, or a number (an id). */
  options?: readonly string[];
  kind?: 'bool' | 'id';
}

export interface Related {
  label: string;
  resource: ResourceName;
  /** The filter naming this record in the related list (customer_id=…). */
  filter: string;
}

export interface Resource {
  name: ResourceName;
  title: string;
  singular: string;
  columns: { key: string; label: string; format?: (row: Row) => string }[];
  orderby: readonly string[];
  filters: Filter[];
  searchHint: string;
  /** The link relations `_embed` adds to one record. */
  embed: readonly string[];
  related: Related[];
  /** A Temporal UI search for this record's workflows (registration, tenant, domain check). */
  workflows?: (row: Row) => { label: string; workflowId?: string; query?: string } | null;
  /** One line naming a record. */
  label: (row: Row) => string;
}

export type ResourceName = 'customers' | 'sites' | 'memberships' | 'payments' | 'domains';

const money = (field: string) => (row: Row) => `${String(row[field] ?? '')} ${String(row.currency ?? '')}`.trim();
const ref = (field: string) => (row: Row) => (row[field] ? `#${String(row[field])}` : '—');

export const RESOURCES: Record<ResourceName, Resource> = {
  customers: {
    name: 'customers',
    title: 'Customers',
    singular: 'Customer',
    columns: [
      { key: 'id', label: 'ID' },
      { key: 'username', label: 'User name' },
      { key: 'email', label: 'E-mail' },
      { key: 'display_name', label: 'Name' },
      { key: 'vip', label: 'VIP', format: (r) => (r.vip ? 'yes' : 'no') },
      { key: 'email_verification', label: 'E-mail check' },
      { key: 'date_registered', label: 'Registered' },
    ],
    orderby: ['id', 'username', 'email', 'display_name', 'date_registered', 'last_login', 'date_created', 'date_modified'],
    filters: [
      { name: 'vip', label: 'VIP', kind: 'bool' },
      { name: 'email_verification', label: 'E-mail verification', options: ['none', 'pending', 'verified'] },
      { name: 'has_trialed', label: 'Has trialed', kind: 'bool' },
    ],
    searchHint: 'user name, e-mail or name',
    embed: [],
    related: [
      { label: 'Memberships', resource: 'memberships', filter: 'customer_id' },
      { label: 'Sites', resource: 'sites', filter: 'customer_id' },
      { label: 'Payments', resource: 'payments', filter: 'customer_id' },
      { label: 'Domains', resource: 'domains', filter: 'customer_id' },
    ],
    workflows: (r) => ({ label: "This customer's workflows (registrations, domain checks, chat follow-ups)", query: `HostflowCustomerId = ${r.id}` }),
    label: (r) => `${String(r.display_name || r.username)} <${String(r.email)}>`,
  },
  sites: {
    name: 'sites',
    title: 'Sites',
    singular: 'Site',
    columns: [
      { key: 'id', label: 'ID' },
      { key: 'title', label: 'Title' },
      { key: 'domain', label: 'Domain' },
      { key: 'path', label: 'Path' },
      { key: 'type', label: 'Type' },
      { key: 'customer_id', label: 'Customer', format: ref('customer_id') },
      { key: 'active', label: 'Active', format: (r) => (r.active ? 'yes' : 'no') },
    ],
    orderby: ['id', 'title', 'domain', 'path', 'type', 'customer_id', 'membership_id', 'date_created', 'date_modified'],
    filters: [
      { name: 'type', label: 'Type', options: ['default', 'site_template', 'customer_owned', 'pending', 'external', 'main', 'demo'] },
      { name: 'customer_id', label: 'Customer id', kind: 'id' },
      { name: 'membership_id', label: 'Membership id', kind: 'id' },
      { name: 'active', label: 'Active', kind: 'bool' },
    ],
    searchHint: 'title, domain or description',
    embed: ['customer', 'membership'],
    related: [{ label: 'Domains', resource: 'domains', filter: 'blog_id' }],
    workflows: (r) => ({ label: "This site's workflows (tenant bootstrap and checks, domain checks)", query: `HostflowSiteId = ${r.id}` }),
    label: (r) => `${String(r.title)} (${String(r.domain)}${String(r.path ?? '')})`,
  },
  memberships: {
    name: 'memberships',
    title: 'Memberships',
    singular: 'Membership',
    columns: [
      { key: 'id', label: 'ID' },
      { key: 'customer_id', label: 'Customer', format: ref('customer_id') },
      { key: 'plan_id', label: 'Plan', format: ref('plan_id') },
      { key: 'status', label: 'Status' },
      { key: 'amount', label: 'Amount', format: money('amount') },
      { key: 'date_expiration', label: 'Expires' },
    ],
    orderby: ['id', 'status', 'date_created', 'date_modified', 'date_expiration'],
    filters: [
      { name: 'status', label: 'Status', options: ['pending', 'active', 'trialing', 'expired', 'on-hold', 'cancelled'] },
      { name: 'customer_id', label: 'Customer id', kind: 'id' },
      { name: 'plan_id', label: 'Plan id', kind: 'id' },
      { name: 'auto_renew', label: 'Auto-renew', kind: 'bool' },
    ],
    searchHint: 'gateway or gateway ids',
    embed: ['customer', 'plan'],
    related: [
      { label: 'Payments', resource: 'payments', filter: 'membership_id' },
      { label: 'Sites', resource: 'sites', filter: 'membership_id' },
    ],
    workflows: (r) => (r.customer_id ? { label: "The customer's workflows (its registration among them)", query: `HostflowCustomerId = ${String(r.customer_id)}` } : null),
    label: (r) => `Membership #${r.id} (${String(r.status)})`,
  },
  payments: {
    name: 'payments',
    title: 'Payments',
    singular: 'Payment',
    columns: [
      { key: 'id', label: 'ID' },
      { key: 'customer_id', label: 'Customer', format: ref('customer_id') },
      { key: 'membership_id', label: 'Membership', format: ref('membership_id') },
      { key: 'status', label: 'Status' },
      { key: 'total', label: 'Total', format: money('total') },
      { key: 'invoice_number', label: 'Invoice' },
      { key: 'date_created', label: 'Created' },
    ],
    orderby: ['id', 'total', 'status', 'invoice_number', 'date_created', 'date_modified', 'customer_id'],
    filters: [
      { name: 'status', label: 'Status', options: ['pending', 'completed', 'refunded', 'partially-refunded', 'partially-paid', 'failed', 'cancelled', 'draft'] },
      { name: 'customer_id', label: 'Customer id', kind: 'id' },
      { name: 'membership_id', label: 'Membership id', kind: 'id' },
    ],
    searchHint: 'gateway or gateway payment id',
    embed: ['customer', 'membership', 'product'],
    related: [],
    label: (r) => `Payment #${r.id} (${String(r.total)} ${String(r.currency)}, ${String(r.status)})`,
  },
  domains: {
    name: 'domains',
    title: 'Domains',
    singular: 'Domain',
    columns: [
      { key: 'id', label: 'ID' },
      { key: 'domain', label: 'Domain' },
      { key: 'blog_id', label: 'Site', format: ref('blog_id') },
      { key: 'stage', label: 'Stage' },
      { key: 'primary_domain', label: 'Primary', format: (r) => (r.primary_domain ? 'yes' : 'no') },
      { key: 'secure', label: 'HTTPS', format: (r) => (r.secure ? 'yes' : 'no') },
    ],
    orderby: ['id', 'domain', 'stage', 'blog_id', 'customer_id', 'date_created', 'date_modified'],
    filters: [
      { name: 'stage', label: 'Stage', options: ['domain-mapping', 'checking-dns', 'checking-ssl-cert', 'done', 'done-without-ssl', 'failed', 'ssl-failed'] },
      { name: 'blog_id', label: 'Site id', kind: 'id' },
      { name: 'customer_id', label: 'Customer id', kind: 'id' },
    ],
    searchHint: 'domain name',
    embed: ['site', 'customer'],
    related: [],
    workflows: (r) => (typeof r.workflow_id === 'string' && r.workflow_id ? { label: 'Its domain check in the Temporal UI', workflowId: r.workflow_id } : null),
    label: (r) => String(r.domain),
  },
};

export const RESOURCE_NAMES = Object.keys(RESOURCES) as ResourceName[];

/** The resource a link relation of `_embed` points at. */
export const EMBED_RESOURCE: Record<string, ResourceName | undefined> = { customer: 'customers', membership: 'memberships', site: 'sites' };
