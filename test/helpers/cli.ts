import { PassThrough } from 'node:stream'
import { main } from '../../lib/cli/main.js'

export interface CliResult {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/** Runs `payments-gate ARGS` in-process with `stdin` as its input. */
export async function runCli(args: string[], stdin: string | Buffer = ''): Promise<CliResult> {
  const input = new PassThrough()
  const stdout = new PassThrough()
  const stderr = new PassThrough()
  const out: Buffer[] = []
  const err: Buffer[] = []
  stdout.on('data', (chunk: Buffer) => out.push(chunk))
  stderr.on('data', (chunk: Buffer) => err.push(chunk))
  input.end(stdin)
  const code = await main(args, { stdin: input, stdout, stderr, env: {} })
  return { code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') }
}
