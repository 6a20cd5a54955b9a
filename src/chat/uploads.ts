import type { Request } from 'express';
import type { Knex } from 'knex';
import type { Config } from '../config';
import type { Db } from '../db/knex';
import { ApiError, invalidParams } from '../http/errors';
import { unstorableProblems } from '../http/input';
import { AttachmentStorage, fileName, imageSize, MAX_CAPTION_CHARS, receiveFile, Thumbnailer, typeNotAllowed, type ReceivedFile, type Sniffed } from './attachments';
import { assertOpen, insertMessage, lockSession, type AttachmentRow, type MessageRow, type SenderType } from './sessions';

export interface UploadTarget {
  sessionId: number;
  sender: { sender_type: SenderType; agent_id: number | null; sender_name: string };
  /** The client address (req.ip). */
  address: string;
}

type QuotaScope = { kind: 'session'; sessionId: number } | { kind: 'address'; address: string };

/**
 * An attachment upload from the request to its rows: quotas, the file streamed to a temporary
 * file, its type, a thumbnail, both put in the object storage, then the attachment and its
 * message in one transaction. Until that transaction has committed, any failure removes every
 * object written: no file without a row, no row without a file.
 *
 * Quotas bind customers (agents and the API credentials are not limited): files and bytes per
 * session and per client address within a rolling window, counted from chat_attachments so that
 * every API replica enforces the same limit. They are checked before the body is read (cheap, no
 * lock), and again inside the transaction under the session's row lock and an advisory lock on
 * the address, so concurrent uploads cannot overshoot.
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
    const limited = to.sender.sender_type === 'customer';
    if (limited) {
      try {
        await this.checkQuotas(this.db, to, null);
      } catch (err) {
        req.resume();
        throw err;
      }
    }
    const file = await receiveFile(req, this.storage, this.config.CHAT_ATTACHMENT_MAX_BYTES);
    const written = [file.storageName];
    try {
      if (file.caption !== null) {
        // A multipart field is text input as any other: what PostgreSQL cannot store is a 400.
        const problems = unstorableProblems({ message: file.caption });
        if (file.caption.length > MAX_CAPTION_CHARS) problems.message = `message must be at most ${MAX_CAPTION_CHARS} characters long.`;
        if (Object.keys(problems).length) throw invalidParams(problems);
      }
      const sniffed = await this.sized(file);
      // Decoded from the temporary file in this process; then the file and its thumbnail go to the store.
      const thumb = await this.thumbnails.make(this.storage.tempPath(file.storageName), file.size, sniffed);
      await this.storage.store(file.storageName, sniffed.mime);
      let thumbName: string | null = null;
      if ('png' in thumb) {
        thumbName = AttachmentStorage.newName();
        written.push(thumbName); // before the write: a partial object is removed too
        await this.storage.write(thumbName, thumb.png, 'image/png');
      } else if (thumb.skipped !== 'type') req.log.info({ reason: thumb.skipped, size: file.size, width: sniffed.width, height: sniffed.height }, 'attachment stored without a thumbnail');
      const name = fileName(file.name, sniffed.mime);
      return await this.db.transaction(async (trx) => {
        const s = await lockSession(trx, to.sessionId);
        assertOpen(s);
        if (limited) await this.checkQuotas(trx, to, file.size);
        const [att] = await trx('chat_attachments')
          .insert({
            session_id: to.sessionId,
            uploader_type: to.sender.sender_type,
            uploader_address: to.address,
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
    } finally {
      await this.storage.removeTemp(file.storageName).catch((e) => req.log.warn({ err: e, storage_name: file.storageName }, 'temporary upload file not removed'));
    }
  }

  /** A JPEG whose size lies past the sniffed bytes gets it from the file's header; unreadable: 415. */
  private async sized(file: ReceivedFile): Promise<Sniffed> {
    if (file.sniffed.mime !== 'image/jpeg' || file.sniffed.width !== null) return file.sniffed;
    const size = await imageSize(this.storage.tempPath(file.storageName));
    if (!size) throw typeNotAllowed();
    return { ...file.sniffed, ...size };
  }

  /**
   * Both quotas, for an upload of `bytes` (null before the body is read: then only a quota with
   * no room left refuses). In a transaction, the session row is locked by the caller and the
   * address is locked here (always after the session: one order, no deadlock).
   */
  private async checkQuotas(q: Knex, to: UploadTarget, bytes: number | null): Promise<void> {
    const c = this.config;
    await this.checkQuota(q, { kind: 'session', sessionId: to.sessionId }, c.CHAT_ATTACHMENT_SESSION_MAX_FILES, c.CHAT_ATTACHMENT_SESSION_MAX_TOTAL_BYTES, bytes);
    if (q.isTransaction) await q.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [`chat_attachment_address:${to.address}`]);
    await this.checkQuota(q, { kind: 'address', address: to.address }, c.CHAT_ATTACHMENT_ADDRESS_MAX_FILES, c.CHAT_ATTACHMENT_ADDRESS_MAX_TOTAL_BYTES, bytes);
  }

  private async checkQuota(q: Knex, scope: QuotaScope, maxFiles: number, maxBytes: number, bytes: number | null): Promise<void> {
    const window = this.config.CHAT_ATTACHMENT_QUOTA_WINDOW_SECONDS;
    const inWindow = () => {
      const rows = q('chat_attachments').where('uploader_type', 'customer').whereRaw('date_created > now() - make_interval(secs => ?)', [window]);
      return scope.kind === 'session' ? rows.where('session_id', scope.sessionId) : rows.where('uploader_address', scope.address);
    };
    const used = await inWindow().first(q.raw('count(*)::int AS files'), q.raw('coalesce(sum(size), 0)::bigint AS bytes'));
    const usage = { files: Number(used.files), bytes: Number(used.bytes) };
    const adding = bytes ?? 1;
    if (adding > maxBytes) {
      // Waiting would not help: the file alone is over the quota.
      throw new ApiError(413, 'chat_attachment_too_large', `The file is larger than the ${scope.kind}'s attachment quota of ${maxBytes} bytes.`, { limit: maxBytes });
    }
    let unit: 'files' | 'bytes';
    let excess: number;
    if (usage.files + 1 > maxFiles) [unit, excess] = ['files', usage.files + 1 - maxFiles];
    else if (usage.bytes + adding > maxBytes) [unit, excess] = ['bytes', usage.bytes + adding - maxBytes];
    else return;
    // Retry-After: when enough of the window's uploads, oldest first, have aged out of it.
    const ageing: { size: string; wait: number }[] = await inWindow()
      .select('size', q.raw('ceil(extract(epoch from date_created + make_interval(secs => ?) - now()))::int AS wait', [window]))
      .orderBy([{ column: 'date_created' }, { column: 'id' }]);
    let wait = window;
    let freed = 0;
    for (const row of ageing) {
      freed += unit === 'files' ? 1 : Number(row.size);
      if (freed >= excess) {
        wait = Math.max(1, row.wait);
        break;
      }
    }
    const limit = unit === 'files' ? maxFiles : maxBytes;
    const who = scope.kind === 'session' ? 'this session' : 'this address';
    throw new ApiError(
      429,
      'chat_attachment_quota_exceeded',
      `Attachment quota reached: at most ${limit} ${unit} from ${who} per ${window} seconds. Try again in ${wait} seconds.`,
      { quota: `${scope.kind}_${unit}`, limit, usage: usage[unit], window_seconds: window, retry_after: wait },
      { 'Retry-After': String(wait) },
    );
  }
}
