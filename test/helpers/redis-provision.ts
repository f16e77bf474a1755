/**
 * Before any test runs (tap's `before`, test/before.ts): the Redis tests need `redis-server` and
 * `redis-sentinel` (docs/development.md, tests). Installed where the run may install them, else the
 * run stops at once with one line saying what to install, instead of failing in a dozen files later.
 */
import { accessSync, constants } from 'node:fs'
import { delimiter, join } from 'node:path'

export const REDIS_COMMANDS = ['redis-server', 'redis-sentinel'] as const
export const REDIS_PACKAGES = ['redis-server', 'redis-sentinel'] as const

/** What the machine offers, as far as the decision needs it. */
export interface RedisFacts {
  /** The Redis commands that are not on PATH. */
  readonly missing: readonly string[]
  /** Root may install packages; anyone else is not asked for a password halfway through a test run. */
  readonly root: boolean
  readonly aptGet: boolean
  /** PAYMENTS_GATE_SKIP_REDIS=1 outside CI: the Redis tests are skipped, loudly (test/helpers/redis.ts). */
  readonly skip: boolean
}

export type RedisPlan =
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

export function redisFacts(env: Readonly<Record<string, string | undefined>>, uid: number | undefined): RedisFacts {
  return {
    missing: REDIS_COMMANDS.filter((command) => !onPath(command, env.PATH)),
    root: uid === 0,
    aptGet: onPath('apt-get', env.PATH),
    skip: env.CI !== 'true' && env.PAYMENTS_GATE_SKIP_REDIS === '1',
  }
}

/** The one line a run that cannot install Redis stops with. */
export function installLine(missing: readonly string[], why: string): string {
  return (
    `!!! npm test needs ${missing.join(' and ')} (${why}): install them (Debian: apt-get install -y ${REDIS_PACKAGES.join(' ')}), ` +
    'or set PAYMENTS_GATE_SKIP_REDIS=1 to skip the Redis tests.'
  )
}

export function redisPlan(facts: RedisFacts): RedisPlan {
  if (facts.missing.length === 0) return { action: 'ready' }
  if (facts.skip) return { action: 'skip', message: `!!! ${facts.missing.join(' and ')} not on PATH: the Redis tests are skipped (PAYMENTS_GATE_SKIP_REDIS=1).` }
  if (!facts.root) return { action: 'stop', message: installLine(facts.missing, 'not on PATH, and this run is not root') }
  if (!facts.aptGet) return { action: 'stop', message: installLine(facts.missing, 'not on PATH, and there is no apt-get') }
  return { action: 'install', packages: REDIS_PACKAGES }
}
