/**
 * The bench worker's workflows (bench/worker.ts bundles this module): every production workflow
 * and the bench-only ones, which stay out of the production bundle.
 */
export * from '../../workflows';
export { benchLocal, benchNoop } from './benchNoop';
