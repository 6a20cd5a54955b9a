/** The widget's settings, read from its script tag's data- attributes. */
export interface Settings {
  /** The chat namespace's base URL (…/wp-json/<product>-support-tickets/v1). */
  api: string;
  title: string;
  /** The accent colour (a CSS hex colour). */
  color: string;
  locale: string;
  position: 'right' | 'left';
  siteId?: number;
  customerId?: number;
  customerHash?: string;
  customerName?: string;
  customerEmail?: string;
  /** Open the panel at once. */
  open: boolean;
  /** false: never open the WebSocket (poll only; the API then also keeps the chat as a ticket). */
  realtime: boolean;
}

/** Written by the API when it serves widget.js (src/chat/widget.ts): the chat's base path on that server. */
const SERVED_BASE = '__HOSTFLOW_CHAT_BASE__';

const positiveId = (v: string | undefined): number | undefined => (v && /^[1-9]\d{0,15}$/.test(v) ? Number(v) : undefined);

export function readSettings(script: HTMLScriptElement | null): Settings {
  const d = script?.dataset ?? {};
  const src = script?.src || location.href;
  const locale = d.locale && /^[A-Za-z]{2,3}([_-][A-Za-z0-9]{2,8})*$/.test(d.locale) ? d.locale : document.documentElement.lang || navigator.language || 'en';
  return {
    api: new URL(d.api || SERVED_BASE, src).href.replace(/\/$/, ''),
    title: (d.title || 'Support').slice(0, 80),
    // A colour only: the value goes into a CSS custom property.
    color: d.color && /^#([0-9a-f]{3}|[0-9a-f]{6})$/i.test(d.color) ? d.color : '#1d4ed8',
    locale,
    position: d.position === 'left' ? 'left' : 'right',
    siteId: positiveId(d.siteId),
    customerId: positiveId(d.customerId),
    customerHash: d.customerHash && /^[a-f0-9]{64}$/i.test(d.customerHash) ? d.customerHash : undefined,
    customerName: d.customerName?.slice(0, 200) || undefined,
    customerEmail: d.customerEmail || undefined,
    open: d.open === 'true',
    realtime: d.realtime !== 'false',
  };
}
