/**
 * Before any test runs (tap's `before`, test/before.ts): the Redis tests need `redis-server`,
 * `redis-sentinel` and `redis-cli`, the tests of deploy/'s alert rules and dashboard `promtool` (docs/development.md,
 * tests). Installed where the run may install them, else the run stops at once with one line saying
 * what to install, instead of failing in a dozen files later.
 */
import { accessSync, constants } from 'node:fs'
import { delimiter, join } from 'node:path'

/** Each command the tests run that npm does not install, and the Debian package that has it. */
export const TEST_COMMANDS: Readonly<Record<string, string>> = {
  'redis-server': 'redis-server',
  'redis-sentinel': 'redis-sentinel',
  // The Redis Cluster tests create their cluster with `redis-cli --cluster create` (test/helpers/redis-cluster.ts).
  'redis-cli': 'redis-tools',
  promtool: 'prometheus',
}

/** What the machine offers, as far as the decision needs it. */
export interface ToolFacts {
  /** The commands that are not on PATH. */
  readonly missing: readonly string[]
  /** Root may install packages; anyone else is not asked for a password halfway through a test run. */
  readonly root: boolean
  readonly aptGet: boolean
  /** PAYMENTS_GATE_SKIP_REDIS=1 outside CI: the tests that need a missing command are skipped, loudly (test/helpers/redis.ts). */
  readonly skip: boolean
}

export type ToolPlan =
  | { readonly action: 'ready' }
  | { readonly action: 'skip'; readonly message: string }
  | { readonly action: 'install'; readonly packages: readonly string[] }
  | { readonly action: 'stop'; readonly message: string }

/** Whether `command` is an executable file in one of PATH's folders (what a shell would run). */
export function onPath(command: string, path: string | undefined): boolean {
  for (const folder of (path ?? '').split(delimiter)) {
    if (folder === '') continue
    try {
      accessSync(join(folder, command), constants.X_OK)
      return true
    } catch {
      // not in this folder
    }
  }
  return false
}

export function toolFacts(env: Readonly<Record<string, string | undefined>>, uid: number | undefined): ToolFacts {
  return {
    missing: Object.keys(TEST_COMMANDS).filter((command) => !onPath(command, env.PATH)),
    root: uid === 0,
    aptGet: onPath('apt-get', env.PATH),
    skip: env.CI !== 'true' && env.PAYMENTS_GATE_SKIP_REDIS === '1',
  }
}

/** The Debian packages that hold `commands`. */
export function packagesOf(commands: readonly string[]): string[] {
  return [...new Set(commands.map((command) => TEST_COMMANDS[command] ?? command))]
}

/** The one line a run that cannot install the commands stops with. */
export function installLine(missing: readonly string[], why: string): string {
  return (
    `!!! npm test needs ${missing.join(' and ')} (${why}): install them (Debian: apt-get install -y ${packagesOf(missing).join(' ')}), ` +
    'or set PAYMENTS_GATE_SKIP_REDIS=1 to skip the tests that need them.'
  )
}

export function toolPlan(facts: ToolFacts): ToolPlan {
  if (facts.missing.length === 0) return { action: 'ready' }
  if (facts.skip)
    return {
      action: 'skip',
      message: `!!! ${facts.missing.join(' and ')} not on PATH: the tests that need them are skipped (PAYMENTS_GATE_SKIP_REDIS=1).`,
    }
  if (!facts.root)
    return { action: 'stop', message: installLine(facts.missing, 'not on PATH, and this run is not root') }
  if (!facts.aptGet)
    return { action: 'stop', message: installLine(facts.missing, 'not on PATH, and there is no apt-get') }
  return { action: 'install', packages: packagesOf(facts.missing) }
}
