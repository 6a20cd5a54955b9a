import { useEffect, useState } from 'preact/hooks';
import { localPath, type Api } from '../api';
import type { ChatAttachment } from './types';

function size(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

/**
 * An attachment of a message: its thumbnail (fetched with the agent's credentials, shown from a
 * blob: URL, which the page's CSP allows) and a download button that saves the file the same way.
 */
export function AttachmentView({ api, attachment }: { api: Api; attachment: ChatAttachment }) {
  const [thumb, setThumb] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    if (!attachment.thumbnail_url) return;
    const controller = new AbortController();
    let url: string | null = null;
    api
      .blob(localPath(attachment.thumbnail_url), controller.signal)
      .then((blob) => {
        url = URL.createObjectURL(blob);
        setThumb(url);
      })
      .catch(() => undefined);
    return () => {
      controller.abort();
      if (url) URL.revokeObjectURL(url);
    };
  }, [api, attachment.thumbnail_url]);
  const download = async () => {
    setError(null);
    try {
      const blob = await api.blob(localPath(attachment.download_url));
      const url = URL.createObjectURL(blob);
      const a = document.createElement('a');
      a.href = url;
      a.download = attachment.name;
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    } catch {
      setError('The file could not be downloaded.');
    }
  };
  return (
    <div class="attachment">
      {thumb ? <img
          src={thumb}
          alt={attachment.name}
          onLoad={(e) => {
            // A thumbnail arriving makes its message taller: keep the newest message in view.
            const log = e.currentTarget.closest('.messages');
            if (log) log.scrollTop = log.scrollHeight;
          }}
        /> : null}
      <button type="button" class="link" onClick={() => void download()}>
        Download {attachment.name}
      </button>{' '}
      <span class="muted small">
        ({attachment.type}, {size(attachment.size)})
      </span>
      {error ? (
        <span class="missing" role="alert">
          {' '}
          {error}
        </span>
      ) : null}
    </div>
  );
}
