/** The command line, run in-process (`runCli`) or as a child process (`spawnCli`). */
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PassThrough } from 'node:stream'
import { onExit } from 'signal-exit'
import type { Test } from 'tap'
import { main } from '../../lib/cli/main.js'
import type { ServeSetup } from '../../lib/cli/serve.js'
import { writeCredentials, writeFingerprintKey } from './fixtures.js'
import { scanLine } from './logs.js'
import { uncovered } from './uncovered.js'

export interface CliResult {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/** Runs `payments-gate ARGS` in-process with `stdin` as its input and `env` as its variables. */
export async function runCli(
  args: string[],
  stdin: string | Buffer = '',
  env: Readonly<Record<string, string>> = {},
): Promise<CliResult> {
  const input = new PassThrough()
  const stdout = new PassThrough()
  const stderr = new PassThrough()
  const out: Buffer[] = []
  const err: Buffer[] = []
  stdout.on('data', (chunk: Buffer) => out.push(chunk))
  stderr.on('data', (chunk: Buffer) => err.push(chunk))
  input.end(stdin)
  const code = await main(args, { stdin: input, stdout, stderr, env })
  return { code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') }
}

/** The signals `serve` listens for, for the life of its process (lib/cli/signals.ts). */
const SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP'] as const

/**
 * `runCli` for a command that stops at start-up, such as a refused `serve`: the signal listeners it leaves on this
 * process, which would go with a process of its own, are taken off after it.
 */
export async function runCliOnce(args: string[], env: Readonly<Record<string, string>> = {}): Promise<CliResult> {
  const before = SIGNALS.map((signal) => process.listeners(signal))
  try {
    return await runCli(args, '', env)
  } finally {
    SIGNALS.forEach((signal, i) => {
      for (const listener of process.listeners(signal))
        if (!before[i]?.includes(listener)) process.off(signal, listener)
    })
  }
}

/** What keeps this process alive (servers, sockets, timers, file reads), by kind. */
export function openResources(): string[] {
  return process.getActiveResourcesInfo()
}

/** Whether everything open now was open at `before` (`openResources()`): what a command run here opened, it closed. */
export function closedSince(before: readonly string[]): boolean {
  const left = [...before]
  for (const kind of openResources()) {
    const at = left.indexOf(kind)
    if (at === -1) return false
    left.splice(at, 1)
  }
  return true
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

/**
 * The child's node options: the resolve hook the tests run with, and nothing of tap's own (its mock
 * loader, which no child uses, costs every child its start-up time). Coverage still reaches the
 * child: tap's process-info hook rides in NODE_OPTIONS.
 */
const CHILD_ARGS = [`--import=${new URL('../typescript.mjs', import.meta.url).href}`]

/**
 * In `spawnCli`'s `env`: the child's coverage counts towards lib/'s. A child runs outside the coverage unless given it:
 * a covered child records the coverage of every module it loads, which multiplies its CPU, and the lines of lib/ most
 * children run are covered in the test processes. Given it where only a process of its own runs the lines: the
 * signals and the stop, the reloads, `--workers`' primary and workers (docs/development.md, tests, lists them).
 */
export const COVERED = { _TAPJS_PROCESSINFO_COVERAGE_: '1' } as const

/**
 * The real CLI (or another `script` of the repository) in a child process, its TypeScript run as the tests run theirs,
 * outside the coverage unless `env` holds COVERED; a built script (dist/cli.js) with none of the tests' hooks, which
 * load some packages as bundles (test/bundled.mjs): it loads its modules as a user's process does.
 */
export function spawnCli(
  args: string[],
  env: Record<string, string> = {},
  script = 'lib/cli.ts',
  /** The child's stdout and stderr: read by the test, or file descriptors the test opened (not in `output()` then). */
  fds: { stdout?: number; stderr?: number } = {},
): Running {
  const childEnv = { ...process.env, _TAPJS_PROCESSINFO_COVERAGE_: '0', ...env }
  const argv = [...(script.endsWith('.ts') ? CHILD_ARGS : []), script, ...args]
  const [command, commandArgs] =
    childEnv._TAPJS_PROCESSINFO_COVERAGE_ === '0' ? uncovered(argv, childEnv) : [process.execPath, argv]
  const child = spawn(command, commandArgs, {
    env: childEnv,
    stdio: ['ignore', fds.stdout ?? 'pipe', fds.stderr ?? 'pipe'],
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
  // A test that times out is ended by a signal, its teardowns not run: its children must not outlive it.
  const forget = onExit(() => void child.kill('SIGKILL'))
  const exited = new Promise<number | null>((resolve) =>
    child.on('exit', (code) => {
      forget()
      // The child's log lines are the suite's too: scanned for secrets like a captured logger's.
      for (const line of stdout.split('\n')) if (line !== '') scanLine(line)
      resolve(code)
    }),
  )
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

/**
 * The ports a `serve` child bound, from its `gateway listening` line. Given port 0, it binds free ones itself, which no
 * other process can take between a `freePort` and its start. Rejects when it exits before, or has not listened
 * within `timeoutMs` (a store it cannot reach), with what it wrote.
 */
export async function boundPorts(
  run: Running,
  timeoutMs = 60_000,
): Promise<{ listen: number; admin: number | undefined }> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => {
      const { stdout, stderr } = run.output()
      reject(new Error(`not listening after ${timeoutMs} ms:\n${stdout}${stderr}`))
    }, timeoutMs)
  })
  try {
    await Promise.race([run.waitFor(LISTENING), late])
  } finally {
    clearTimeout(timer)
  }
  const line = run
    .output()
    .stdout.split('\n')
    .find((text) => LISTENING.test(text)) as string
  const { listen, admin } = JSON.parse(line) as { listen: { port: number }; admin?: { port: number } }
  return { listen: listen.port, admin: admin?.port }
}

const LISTENING = /"msg":"gateway listening"/

/**
 * `payments-gate serve` in a process of its own on a free port of 127.0.0.1, in front of `target`, with the test user's
 * credentials, a fingerprint key and `--shutdown-delay 0`, then `args`; stopped (SIGTERM) when the test ends.
 */
export async function gatewayProcess(t: Test, target: string, args: string[]): Promise<{ url: string; run: Running }> {
  const dir = t.testdir()
  const credentials = await writeCredentials(dir)
  const run = spawnCli([
    'serve',
    '--listen',
    '127.0.0.1:0',
    '--target',
    target,
    '--credentials',
    credentials,
    '--idempotency-fingerprint-key',
    await writeFingerprintKey(dir),
    '--shutdown-delay',
    '0',
    ...args,
  ])
  t.teardown(async () => {
    run.child.kill('SIGTERM')
    await run.exited
  })
  const { listen } = await boundPorts(run)
  return { url: `http://127.0.0.1:${listen}`, run }
}

/**
 * `serve`'s gateway built by `startServing` in this process (loaded when first asked for, as main loads it), in front
 * of `target`, with the test user's credentials and a fingerprint key, then `extra`; stopped when the test ends. Its
 * log lines, scanned for secrets as a child's are, are the returned `lines`. What a process of its own adds is argv's
 * reading (test/cli/options.test.ts) and signals (test/cli/signals.test.ts).
 */
export async function servedHere(t: Test, target: string, extra: Partial<ServeSetup>) {
  const stdout = new PassThrough()
  const lines: string[] = []
  stdout.on('data', (chunk: Buffer) => {
    for (const line of chunk.toString().split('\n').filter(Boolean)) {
      scanLine(line)
      lines.push(line)
    }
  })
  // Its own folder: a test may serve two gateways, and t.testdir() makes the folder afresh on each call.
  const dir = await mkdtemp(join(tmpdir(), 'served-here-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const { startServing } = await import('../../lib/cli/serve.js')
  const serving = await startServing(
    {
      listen: { host: '127.0.0.1', port: 0 },
      target: new URL(target),
      policies: 'policies',
      credentials: await writeCredentials(dir),
      idempotencyFingerprintKey: await writeFingerprintKey(dir),
      vendor: 'example',
      basePath: '',
      bodyLimit: 65536,
      timeout: 30_000,
      admin: undefined,
      ...extra,
    },
    { stdin: new PassThrough(), stdout, stderr: new PassThrough(), env: {} },
  )
  t.teardown(() => serving.stop())
  return { serving, lines, url: `http://127.0.0.1:${serving.address.port}` }
}
