import type { Db } from '../db/knex';
import { ApiError, notFoundItem } from '../http/errors';
import type { ObjectStorage } from '../infra/object-storage';
import { AttachmentStorage, fileName } from './attachments';
import type { ChatCaller } from './auth';
import type { AttachmentRow } from './sessions';

/** A stored file to answer with, and how (see sendStoredFile). */
export interface AttachmentDownload {
  objects: ObjectStorage;
  key: string;
  headers: Record<string, string>;
  missing: () => ApiError;
}

export type DownloadVariant = 'original' | 'thumbnail';

/**
 * Which stored file a download answers with: the attachment (or its thumbnail) of a session the
 * caller may see, under the name and headers it is served with (never rendered by the browser).
 */
export class AttachmentDownloads {
  constructor(
    private readonly db: Db,
    private readonly storage: AttachmentStorage,
  ) {}

  async open(caller: Exclude<ChatCaller, { kind: 'anonymous' }>, id: number, variant: DownloadVariant | undefined): Promise<AttachmentDownload> {
    const attachment: AttachmentRow | undefined = await this.db('chat_attachments').where({ id }).first();
    // Another session's attachment answers exactly as a missing one: ids tell nothing.
    if (!attachment || (caller.kind === 'customer' && Number(attachment.session_id) !== caller.sessionId)) throw notFoundItem('chat_attachment');
    const thumbnail = variant === 'thumbnail';
    const storageName: string | null = thumbnail ? attachment.thumbnail_storage_name : attachment.storage_name;
    if (!storageName) throw new ApiError(404, 'chat_attachment_no_thumbnail', 'This attachment has no thumbnail.');
    // fileName: rows stored before names took the detected type's extension are served with it too.
    const filename = thumbnail ? `thumbnail-${attachment.name.replace(/\.[^.]*$/, '')}.png` : fileName(attachment.name, attachment.mime_type);
    const ascii = filename.replace(/[^\x20-\x7e]/g, '_').replace(/["\\]/g, '_');
    const missing = () => new ApiError(404, 'chat_attachment_missing', 'The file of this attachment is missing.');
    // Only names we generate map to a key: a tampered row reads as a missing file.
    if (!AttachmentStorage.isName(storageName)) throw missing();
    return {
      objects: this.storage.objects,
      key: this.storage.keyOf(storageName),
      headers: {
        'Content-Type': thumbnail ? 'image/png' : attachment.mime_type === 'text/plain' ? 'text/plain; charset=utf-8' : attachment.mime_type,
        'Content-Disposition': `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(filename)}`,
        'X-Content-Type-Options': 'nosniff',
        'Content-Security-Policy': "default-src 'none'; sandbox",
        'Cache-Control': 'private, no-store',
      },
      missing,
    };
  }
}
