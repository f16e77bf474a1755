import type { Readable, Writable } from 'node:stream'

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

/** A start-up or usage failure: the CLI prints its message as one line on stderr and exits 2. */
export class UsageError extends Error {}

export async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of stream) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}
