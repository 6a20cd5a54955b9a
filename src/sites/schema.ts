import { z } from 'zod';
import { hostName } from '../domains/hostname';
import { allOptional, fields } from '../http/validation';

export const SITE_TYPES = ['default', 'site_template', 'customer_owned', 'pending', 'external', 'main', 'demo'] as const;

const siteFields = {
  title: fields.label(250),
  description: fields.text(),
  domain: hostName(),
  path: z
    .string()
    .max(255)
    .regex(/^\/[A-Za-z0-9._~%/-]*$/, { message: 'must start with "/" and contain only letters, digits and . _ ~ % / -' }),
  customer_id: fields.ref(),
  membership_id: fields.ref(),
  template_id: fields.ref(),
  type: z.enum(SITE_TYPES),
  active: fields.flag(),
  public: fields.flag(),
  archived: fields.flag(),
  site_meta: fields.jsonObject(),
};

export const createSiteSchema = z.strictObject({
  ...allOptional(siteFields),
  title: siteFields.title,
  domain: siteFields.domain,
});

export const updateSiteSchema = z.strictObject(allOptional(siteFields));
