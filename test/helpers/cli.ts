/** The command line, run in-process (`runCli`) or as a child process (`spawnCli`). */
import { spawn, type ChildProcess } from 'node:child_process'
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

export interface Running {
  readonly child: ChildProcess
  /** Everything written so far on stdout and stderr. */
  readonly output: () => { stdout: string; stderr: string }
  /** Resolves with the exit code. */
  readonly exited: Promise<number | null>
  /** Resolves once stdout or stderr matches. */
  waitFor(pattern: RegExp): Promise<void>
}

/** The real CLI in a child process, through the same TypeScript loader the tests run with. */
export function spawnCli(args: string[], env: Record<string, string> = {}): Running {
  const child = spawn(process.execPath, [...process.execArgv, 'lib/cli.ts', ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  const waiters: { pattern: RegExp; resolve: () => void }[] = []
  const check = () => {
    for (const waiter of [...waiters]) {
      if (waiter.pattern.test(stdout) || waiter.pattern.test(stderr)) {
        waiters.splice(waiters.indexOf(waiter), 1)
        waiter.resolve()
      }
    }
  }
  child.stdout?.on('data', (chunk: Buffer) => {
    stdout += chunk.toString()
    check()
  })
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString()
    check()
  })
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  return {
    child,
    output: () => ({ stdout, stderr }),
    exited,
    waitFor: (pattern) =>
      new Promise<void>((resolve, reject) => {
        waiters.push({ pattern, resolve })
        void exited.then(() => reject(new Error(`exited before ${pattern}: ${stderr}`)))
        check()
      }),
  }
}
