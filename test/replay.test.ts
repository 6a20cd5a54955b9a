/**
 * Replays every recorded history in test/histories/ (see scripts/record-histories.ts) against
 * the workflow code as it is now: a change that would break a run already in flight (a step
 * added, removed or reordered without `patched()`) fails here, before it is deployed.
 */
import fs from 'node:fs';
import path from 'node:path';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { Worker } from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import { workflowBundle } from '../src/temporal/worker';
import * as workflows from '../workflows';
import { LIFECYCLE_PATCHES } from '../workflows/membershipLifecycle';
import { TENANT_PATCHES } from '../workflows/tenants';
import { PATCHES } from '../workflows/translationPipeline';
import { SHARD_PATCHES } from '../workflows/webhookShard';

const DIR = path.join(__dirname, 'histories');
const files = fs.existsSync(DIR) ? fs.readdirSync(DIR).filter((f) => f.endsWith('.json')).sort() : [];

function load(file: string) {
  const { workflowId, ...json } = JSON.parse(fs.readFileSync(path.join(DIR, file), 'utf8')) as { workflowId: string };
  return { workflowId, history: historyFromJSON(json) };
}

/** The payloads of a history's markers (a patch marker holds its id), as text. */
function patchesOf(history: ReturnType<typeof load>['history']): string[] {
  return (history.events ?? []).flatMap((e) =>
    Object.values(e.markerRecordedEventAttributes?.details ?? {}).flatMap((p) => (p.payloads ?? []).map((x) => Buffer.from(x.data ?? []).toString('utf8'))),
  );
}

describe('replay of recorded workflow histories', () => {
  test('every workflow type has recorded histories, completed runs among them', () => {
    const types = Object.keys(workflows).filter((t) => !t.startsWith('bench'));
    for (const type of types) expect({ type, recorded: files.some((f) => f.startsWith(`${type}-`)) }).toEqual({ type, recorded: true });
    for (const type of types) expect({ type, completed: files.includes(`${type}-completed.json`) }).toEqual({ type, completed: true });
  });

  // Each patch with the histories of the workflow types it is in (file name prefix).
  const patches = [
    ...Object.values(PATCHES).map((patch) => ({ patch, types: 'translationPipeline-' })),
    ...Object.values(TENANT_PATCHES).map((patch) => ({ patch, types: 'tenant' })),
    ...Object.values(SHARD_PATCHES).map((patch) => ({ patch, types: 'webhookShard-' })),
    ...Object.values(LIFECYCLE_PATCHES).map((patch) => ({ patch, types: 'membershipLifecycle-' })),
  ];
  test.each(patches)('patch $patch: runs from before it (no marker) and after it (its marker) are both replayed', ({ patch, types }) => {
    const marked = files
      .filter((f) => f.startsWith(types))
      .map((f) => patchesOf(load(f).history).some((data) => data.includes(`"${patch}"`)));
    expect({ patch, withMarker: marked.filter(Boolean).length > 0, without: marked.filter((m) => !m).length > 0 }).toEqual({ patch, withMarker: true, without: true });
  });

  test.each(files)('%s replays deterministically', async (file) => {
    const { workflowId, history } = load(file);
    expect(history.events?.length).toBeGreaterThan(0);
    await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history, workflowId);
  }, 60_000);

  test('a history that does not match the code fails replay as non-deterministic (the check can fail)', async () => {
    const file = files.find((f) => f.startsWith('translationPipeline-completed'));
    expect(file).toBeDefined();
    const { workflowId, history } = load(file!);
    // As if the code now scheduled another activity at that step.
    const scheduled = history.events!.find((e) => e.activityTaskScheduledEventAttributes)!.activityTaskScheduledEventAttributes!;
    scheduled.activityType = { name: `${scheduled.activityType!.name}Renamed` };
    await expect(Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history, workflowId)).rejects.toBeInstanceOf(DeterminismViolationError);
  }, 60_000);
});
