import { constants, type Stats } from 'node:fs'
import { open } from 'node:fs/promises'
import { FileRefused } from './file-error.js'

/** Bytes asked of the kernel at a time past a file's stated size (a file that grows, a /proc file that says 0). */
const CHUNK = 65536

/** Why a file that opened is not read: in the words of lib/file-error.ts. */
function notRegular(stats: Stats): string {
  if (stats.isDirectory()) return 'a folder, where a file is expected'
  if (stats.isFIFO()) return 'a named pipe (FIFO), where a regular file is expected'
  return 'a device, where a regular file is expected'
}

/**
 * At most `limit + 1` bytes of a regular file, links followed: more than
 * `limit` bytes returned means the file is larger. Anything else (a FIFO, a
 * device such as /dev/zero, a folder) is refused with a `FileRefused` before
 * a byte is read (docs/cli.md, files read).
 */
export async function readFileHead(path: string, limit: number): Promise<Buffer> {
  // Opening a FIFO waits for a writer, forever at start-up, unless non-blocking; a regular file ignores the flag.
  // The type is checked on the opened file, so a file swapped for a FIFO after a stat cannot slip through.
  const handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK)
  try {
    const stats = await handle.stat()
    if (!stats.isFile()) throw new FileRefused(notRegular(stats))
    const chunks: Buffer[] = []
    let total = 0
    while (total <= limit) {
      const size = Math.min(limit + 1 - total, Math.max(stats.size + 1 - total, CHUNK))
      const { bytesRead, buffer } = await handle.read(Buffer.allocUnsafe(size), 0, size, null)
      if (bytesRead === 0) break
      chunks.push(buffer.subarray(0, bytesRead))
      total += bytesRead
    }
    return Buffer.concat(chunks, total)
  } finally {
    await handle.close()
  }
}

/** A regular file's bytes, refused with a `FileRefused` when it is not one or holds more than `limit` bytes. */
export async function readLimitedFile(path: string, limit: number): Promise<Buffer> {
  const bytes = await readFileHead(path, limit)
  if (bytes.length > limit) throw new FileRefused(`larger than ${sizeText(limit)}, the most this kind of file may hold`)
  return bytes
}

/** A regular file's text (UTF-8), bounded as `readLimitedFile`. */
export async function readLimitedText(path: string, limit: number): Promise<string> {
  return (await readLimitedFile(path, limit)).toString('utf8')
}

function sizeText(bytes: number): string {
  return bytes % 1048576 === 0
    ? `${bytes / 1048576} MiB`
    : bytes % 1024 === 0
      ? `${bytes / 1024} KiB`
      : `${bytes} bytes`
}
