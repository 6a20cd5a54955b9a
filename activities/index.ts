import { WU_NAMESPACE, type Config } from '../src/config';
import type { Db } from '../src/db/knex';
import type { ObjectStorage } from '../src/infra/object-storage';
import { OutboundPolicy } from '../src/infra/outbound-http';
import { lifecycleHorizonMs, MembershipLifecycles } from '../src/memberships/lifecycle';
import { WorkflowIds } from '../src/temporal/workflow-ids';
import { createBillingActivities } from './billing';
import { createChatActivities } from './chat';
import { createDomainActivities } from './domains';
import { createRegisterActivities } from './register';
import { createTenantActivities } from './tenants';
import { createTranslationActivities } from './translations';
import { createWebhookActivities } from './webhooks';

export interface ActivityDeps {
  db: Db;
  config: Config;
  /** Shared file storage (language packs, tenants' uploads), built once by the worker's owner. */
  storage: ObjectStorage;
}

/**
 * Activities (the side effects workflows ask for), built from their dependencies so the
 * worker and the tests share one wiring. Each capability adds its activities here.
 */
export function createActivities(deps: ActivityDeps): Record<string, (...args: any[]) => Promise<unknown>> {
  const { db, config, storage } = deps;
  // The worker's membership writes start lifecycles through the outbox; it sends no signal (its writes are new memberships, or the lifecycle's own steps).
  const lifecycles = new MembershipLifecycles(new WorkflowIds(db, config.WORKFLOW_ID_PREFIX), null, undefined, lifecycleHorizonMs(config));
  return {
    ...createDomainActivities({
      db,
      dnsResolver: config.DOMAIN_DNS_RESOLVER,
      mappingTarget: config.DOMAIN_MAPPING_TARGET,
      apiBase: `${config.REST_PREFIX}/${WU_NAMESPACE}`,
      tlsAddress: config.DOMAIN_TLS_ADDRESS,
      tlsPort: config.DOMAIN_TLS_PORT,
      tlsCaFile: config.DOMAIN_TLS_CA_FILE,
      outbound: new OutboundPolicy(config.OUTBOUND_ALLOWED_HOSTS),
    }),
    ...createRegisterActivities({ db, storage, lifecycles }),
    ...createTenantActivities({ db, config, storage }),
    ...createTranslationActivities({ db, config, storage }),
    ...createChatActivities({ db }),
    ...createWebhookActivities({ db, config }),
    ...createBillingActivities({ db, lifecycles, config }),
  };
}
