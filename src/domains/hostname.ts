import { z } from 'zod';

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

const DOC_LABEL = '[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?';
/**
 * hostNameProblem's rules as one pattern, for the document: at most 253 characters (a
 * trailing dot aside), two labels or more, the last not all digits. (Surrounding spaces, which
 * are trimmed, are left out.) test/document-rules.test.ts holds the two to each other.
 */
export const HOST_NAME_PATTERN = `^(?=.{1,253}\\.?$)(?:${DOC_LABEL}\\.)+(?![0-9]+\\.?$)${DOC_LABEL}\\.?$`;

/** A host name from JSON: trimmed, lower-cased, trailing dot stripped, then validated. */
export const hostName = () =>
  z
    .string()
    .meta({ pattern: HOST_NAME_PATTERN, maxLength: 254, description: 'A host name such as shop.example.com (any case; one trailing dot allowed).' })
    .transform((v, ctx) => {
      const name = normalizeHostName(v);
      const problem = hostNameProblem(name);
      if (problem) {
        ctx.addIssue({ code: 'custom', message: `is not a valid host name: it ${problem}` });
        return z.NEVER;
      }
      return name;
    });
