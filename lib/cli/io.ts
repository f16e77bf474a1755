import type { Readable, Writable } from 'node:stream'
import type { DestinationStream } from 'pino'
import { createLogDestination, type LogDestinationOptions } from '../log.js'

/** What a subcommand may touch: its streams and environment, so tests run it in-process. */
export interface Io {
  readonly stdin: Readable
  readonly stdout: Writable
  readonly stderr: Writable
  readonly env: Readonly<Record<string, string | undefined>>
}

/** A subcommand: its arguments in, its exit code out. */
export type Command = (args: string[], io: Io) => Promise<number>

/** Exit codes: 0 done, 1 the answer is "no" (refused request, invalid policy), 2 the call itself failed. */
export const EXIT_OK = 0
export const EXIT_NO = 1
export const EXIT_USAGE = 2

/** A stream's bytes, at most the first `limit + 1`: more than `limit` means there was more (the rest is not read). */
export async function readAll(stream: Readable, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = []
  let total = 0
  for await (const chunk of stream) {
    chunks.push(chunk as Buffer)
    total += (chunk as Buffer).length
    if (total > limit) break
  }
  return Buffer.concat(chunks).subarray(0, limit + 1)
}

/**
 * Where a command's JSON log lines go. Node writes to `process.stdout`
 * synchronously when it is a file or a pipe (node's docs, "A note on process
 * I/O"): one system call per line, on the request's path. So the real stdout
 * gets the logger's own destination instead, which writes lines in batches,
 * `shared` when other processes write to the same stdout (`--workers`); a
 * stream given by a caller (the tests) is used as it is.
 */
export function logDestination(
  io: Io,
  shared: boolean,
  onTrouble?: LogDestinationOptions['onTrouble'],
): DestinationStream {
  return io.stdout === process.stdout ? createLogDestination(1, { shared, onTrouble }) : io.stdout
}
