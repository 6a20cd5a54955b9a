import { z } from 'zod';
import { hostNameProblem, normalizeHostName } from '../config/host-names';

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
