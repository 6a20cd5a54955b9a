/** A translation job as GET /translations/jobs answers it (the fields the console shows). */
export interface Job {
  id: number;
  project_id: number | null;
  slug: string;
  type: 'plugin' | 'theme';
  version: string;
  locale: string;
  status: string;
  source: string;
  total_strings: number;
  remaining_strings: number;
  human_strings: number;
  ai_strings: number;
  batches_done: number;
  workflow_id: string;
  failure_step: string | null;
  failure_kind: string | null;
  failure_reason: string | null;
  rejection_reason: string | null;
  approved_at: string | null;
  approved_by: string | null;
  download_url: string | null;
  package_size: number | null;
  logs?: { at: string; step: string; level: string; message: string }[];
  date_created: string;
  date_modified: string;
}

export interface JobString {
  index: number;
  context: string | null;
  source: string;
  plural: string | null;
  references: string[];
  note: string | null;
  translation: string[] | null;
  state: 'human' | 'ai' | 'missing';
}

/** Statuses in which the pipeline is working (the page keeps polling). */
export const IN_PROGRESS = ['importing', 'processing', 'packaging'];

/** The queue's views: which statuses each shows. */
export const VIEWS: { id: string; label: string; statuses: string[] }[] = [
  { id: 'pending', label: 'Waiting for approval', statuses: ['pending_approval'] },
  { id: 'working', label: 'In progress', statuses: IN_PROGRESS },
  { id: 'failed', label: 'Failed or expired', statuses: ['failed', 'expired'] },
  { id: 'ready', label: 'Ready', statuses: ['ready'] },
  { id: 'all', label: 'All', statuses: [] },
];
