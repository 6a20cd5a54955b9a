import type { Request } from 'express';
import type { Config } from '../config';
import type { Db } from '../db/knex';
import { invalidParams } from '../http/errors';
import { AttachmentStorage, cleanName, imageSize, receiveFile, Thumbnailer, typeNotAllowed, type ReceivedFile, type Sniffed } from './attachments';
import { assertOpen, insertMessage, lockSession, type AttachmentRow, type MessageRow, type SenderType } from './sessions';

export interface UploadTarget {
  sessionId: number;
  sender: { sender_type: SenderType; agent_id: number | null; sender_name: string };
}

/**
 * An attachment upload from the request to its rows: the file streamed to disk, its type,
 * a thumbnail, then the attachment and its message in one transaction. Until that transaction has
 * committed, any failure removes every file written: no file without a row, no row without a file.
 */
export class AttachmentUploads {
  private readonly thumbnails: Thumbnailer;

  constructor(
    private readonly db: Db,
    private readonly storage: AttachmentStorage,
    private readonly config: Config,
  ) {
    this.thumbnails = new Thumbnailer({
      maxBytes: config.CHAT_THUMBNAIL_MAX_BYTES,
      maxPixels: config.CHAT_THUMBNAIL_MAX_PIXELS,
      timeoutSeconds: config.CHAT_THUMBNAIL_TIMEOUT_SECONDS,
      concurrency: config.CHAT_THUMBNAIL_CONCURRENCY,
    });
  }

  async upload(req: Request, to: UploadTarget): Promise<{ att: AttachmentRow; message: MessageRow }> {
    const file = await receiveFile(req, this.storage, this.config.CHAT_ATTACHMENT_MAX_BYTES);
    const written = [file.storageName];
    try {
      if (file.caption !== null && file.caption.length > 10_000) throw invalidParams({ message: 'message must be at most 10000 characters long.' });
      const sniffed = await this.sized(file);
      const thumb = await this.thumbnails.make(this.storage.pathOf(file.storageName), file.size, sniffed);
      let thumbName: string | null = null;
      if ('png' in thumb) {
        thumbName = AttachmentStorage.newName();
        written.push(thumbName); // before the write: a partial file is removed too
        await this.storage.write(thumbName, thumb.png);
      } else if (thumb.skipped !== 'type') req.log.info({ reason: thumb.skipped, size: file.size, width: sniffed.width, height: sniffed.height }, 'attachment stored without a thumbnail');
      const name = cleanName(file.name);
      return await this.db.transaction(async (trx) => {
        const s = await lockSession(trx, to.sessionId);
        assertOpen(s);
        const [att] = await trx('chat_attachments')
          .insert({
            session_id: to.sessionId,
            uploader_type: to.sender.sender_type,
            name,
            mime_type: sniffed.mime,
            size: file.size,
            sha256: file.sha256,
            width: sniffed.width,
            height: sniffed.height,
            storage_name: file.storageName,
            thumbnail_storage_name: thumbName,
          })
          .returning('*');
        const r = await insertMessage(trx, s, { ...to.sender, body: file.caption?.trim() || `Sent a file: ${name}`, attachment_id: att.id });
        return { att, message: r.message };
      });
    } catch (err) {
      await Promise.all(written.map((n) => this.storage.remove(n).catch((e) => req.log.warn({ err: e, storage_name: n }, 'attachment cleanup failed'))));
      throw err;
    }
  }

  /** A JPEG whose size lies past the sniffed bytes gets it from the file's header; unreadable: 415. */
  private async sized(file: ReceivedFile): Promise<Sniffed> {
    if (file.sniffed.mime !== 'image/jpeg' || file.sniffed.width !== null) return file.sniffed;
    const size = await imageSize(this.storage.pathOf(file.storageName));
    if (!size) throw typeNotAllowed();
    return { ...file.sniffed, ...size };
  }
}
