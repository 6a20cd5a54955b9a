import { z } from 'zod';
import { allOptional, fields } from '../http/validation';
import { hostName } from './hostname';

export const DOMAIN_STAGES = ['domain-mapping', 'checking-dns', 'checking-ssl-cert', 'done', 'done-without-ssl', 'failed', 'ssl-failed'] as const;
export type DomainStage = (typeof DOMAIN_STAGES)[number];

/** Stages in which a domain is never active (the flag is forced to false). */
export const INACTIVE_STAGES: ReadonlySet<string> = new Set(['checking-dns', 'checking-ssl-cert', 'failed', 'ssl-failed']);
/** Stages a check workflow is working through. */
export const CHECKING_STAGES: ReadonlySet<string> = new Set(['checking-dns', 'checking-ssl-cert']);

const domainFields = {
  domain: hostName(),
  blog_id: fields.ref(),
  customer_id: fields.ref(),
  primary_domain: fields.flag(),
  active: fields.flag(),
  secure: fields.flag(),
  stage: z.enum(DOMAIN_STAGES),
};

export const createDomainSchema = z
  .strictObject({
    ...allOptional(domainFields),
    domain: domainFields.domain,
  })
  // A primary domain needs its site (store.ts, checkDomain): what the document can say of it on create.
  .meta({ if: { required: ['primary_domain'], properties: { primary_domain: { const: true } } }, then: { required: ['blog_id'], properties: { blog_id: { type: 'integer', minimum: 1 } } } });

export const updateDomainSchema = z.strictObject(allOptional(domainFields));
