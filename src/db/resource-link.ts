/**
 * A record this one points at: the reference field and the model of the record it names,
 * the record's `_links` entry (src/http/embed.ts builds it). Declared here, beside the resources' configuration,
 * so the table services name their links without importing the HTTP layer.
 */
export interface ResourceLink {
  field: string;
  model: string;
  /** `_embed` may embed it (WordPress' `embeddable: true`). */
  embeddable?: boolean;
}
