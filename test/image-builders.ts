import zlib from 'node:zlib';

/** Hand-built PNG files (attacks included) and a probe of the event loop and memory. */

function pngChunk(type: string, data: Buffer): Buffer {
  const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(zlib.crc32(body));
  return Buffer.concat([length, body, crc]);
}

/** A zlib stream of `total` zero bytes, deflated a megabyte at a time (never held whole). */
export async function deflateZeros(total: number, level = 9): Promise<Buffer> {
  const deflate = zlib.createDeflate({ level });
  const out: Buffer[] = [];
  deflate.on('data', (c: Buffer) => out.push(c));
  const ended = new Promise((resolve, reject) => deflate.on('end', resolve).on('error', reject));
  const zeros = Buffer.alloc(1 << 20);
  for (let left = total; left > 0; left -= zeros.length) {
    if (!deflate.write(zeros.subarray(0, Math.min(zeros.length, left)))) await new Promise((r) => deflate.once('drain', r));
  }
  deflate.end();
  await ended;
  return Buffer.concat(out);
}

/**
 * A PNG with the given header and compressed image data (split in 64 KiB IDAT chunks). The
 * data need not match the header: that is the point of a decompression bomb.
 */
export function pngFile(opts: { width: number; height: number; colorType: 2 | 6; interlaced: boolean; idat: Buffer }): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(opts.width, 0);
  ihdr.writeUInt32BE(opts.height, 4);
  ihdr[8] = 8; // bits per sample
  ihdr[9] = opts.colorType;
  ihdr[12] = opts.interlaced ? 1 : 0;
  const parts = [Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), pngChunk('IHDR', ihdr)];
  for (let i = 0; i < opts.idat.length; i += 65536) parts.push(pngChunk('IDAT', opts.idat.subarray(i, i + 65536)));
  parts.push(pngChunk('IEND', Buffer.alloc(0)));
  return Buffer.concat(parts);
}

/** The reported bomb: an interlaced PNG whose IHDR says 1x1, its IDAT inflating to 256 MiB (~261 KB). */
export async function interlacedBomb(): Promise<Buffer> {
  return pngFile({ width: 1, height: 1, colorType: 2, interlaced: true, idat: await deflateZeros(256 << 20) });
}

/** A plain (non-interlaced) black RGBA PNG of width x height: 6300x6300 is ~154 KB. */
export async function blankPng(width: number, height: number, level = 9): Promise<Buffer> {
  // Each row: filter byte 0 and 4 zero bytes a pixel.
  return pngFile({ width, height, colorType: 6, interlaced: false, idat: await deflateZeros(height * (1 + width * 4), level) });
}

/**
 * Runs `work` while a 5 ms timer samples the event loop and the resident memory: answers the
 * longest gap between ticks beyond the interval (the loop's worst stall) and the peak RSS
 * growth over the value before (the larger of the sampled peak and the process' maxRSS rise).
 */
export async function probe<T>(work: () => Promise<T>): Promise<{ result: T; stallMs: number; rssGrowthMb: number }> {
  const rss0 = process.memoryUsage.rss();
  const maxRss0 = process.resourceUsage().maxRSS * 1024;
  let peak = rss0;
  let stall = 0;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    stall = Math.max(stall, now - last - 5);
    last = now;
    peak = Math.max(peak, process.memoryUsage.rss());
  }, 5);
  try {
    const result = await work();
    await new Promise((r) => setTimeout(r, 20)); // one more tick after the answer
    const growth = Math.max(peak - rss0, process.resourceUsage().maxRSS * 1024 - maxRss0);
    return { result, stallMs: Math.round(stall), rssGrowthMb: Math.round(growth / 1e6) };
  } finally {
    clearInterval(timer);
  }
}
