/**
 * A site's uploads while it lives in the shared estate (an isolated tenant keeps them in its own
 * root): the folder of the object storage (with the local driver, DATA_DIR/uploads/sites/<id>).
 */
export function siteUploadsPrefix(siteId: number): string {
  return `uploads/sites/${siteId}/`;
}
