// The host-name rule, kept beside the config because the config validates host names with it;
// domains and sites build their request schemas on it (src/domains/hostname.ts).

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/** Why a (trimmed, lower-cased, trailing-dot-stripped) name is not a host name, or null. */
export function hostNameProblem(name: string): string | null {
  if (name.length === 0) return 'must not be empty.';
  if (name.length > 253) return 'must be at most 253 characters long.';
  if (/^[\d.]+$/.test(name) || name.includes(':') || /^\[.*\]$/.test(name)) return 'must be a host name, not an IP address.';
  if (name.includes('_')) return 'must not contain underscores.';
  const labels = name.split('.');
  if (labels.length < 2) return 'must have at least two labels (e.g. example.com).';
  for (const label of labels) {
    if (label.length === 0) return 'must not contain empty labels.';
    if (label.length > 63) return 'must not have labels longer than 63 characters.';
    if (!LABEL.test(label)) return 'must contain only letters, digits and hyphens (not at the start or end of a label), separated by dots.';
  }
  if (/^\d+$/.test(labels[labels.length - 1])) return 'must not end in an all-numeric label.';
  return null;
}

/** Trimmed, lower-cased, one trailing dot stripped. */
export function normalizeHostName(v: string): string {
  return v.trim().toLowerCase().replace(/\.$/, '');
}
