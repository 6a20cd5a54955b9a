/**
 * Workflow definitions (deterministic code only: no I/O, no clocks, no randomness outside
 * the Temporal APIs). The worker bundles this module; each capability adds its workflows
 * here as it lands.
 */
export { domainCheck } from './domainCheck';
export { register } from './register';
export { tenantBootstrap, tenantVerifyWorkflow, tenantTeardown, tenantPush } from './tenants';
export { translationPipeline } from './translationPipeline';
export { chatFollowUp } from './chatFollowUp';
// webhookDelivery stays registered for its runs still in flight (the relay starts webhookShard).
export { webhookDelivery } from './webhookDelivery';
export { membershipLifecycle } from './membershipLifecycle';
export { webhookShard } from './webhookShard';
