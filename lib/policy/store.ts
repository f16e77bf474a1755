import { watch } from 'node:fs'
import type { Logger } from 'pino'
import { POLICY_WATCH_DEFAULTS } from '../defaults.js'
import { entityOfFile, loadPolicyDir, type PolicyProblem } from './load.js'
import type { Policy, PolicySource } from './policy.js'

/** The policies of a watched folder: `get` always reads one whole snapshot. */
export interface PolicyStore extends PolicySource {
  /** How many entities have a policy now. */
  readonly size: number
  /** The entities that have a policy now, sorted. */
  readonly entities: readonly string[]
  /** Stops watching: no reload starts after this, no handle is left open. */
  close(): void
}

export interface ReloadOutcome {
  readonly ok: boolean
  /** The file that failed to load, or the folder when it could not be read. */
  readonly file?: string
  readonly reason?: string
}

export interface WatchPoliciesOptions {
  /** Where reloads and refused files are reported. */
  logger?: Pick<Logger, 'info' | 'warn'>
  /** Called after every reload: once with `ok: true`, or once per file that failed to load. */
  onReload?: (outcome: ReloadOutcome) => void
  /** How long to wait for a burst of file events to settle before reloading, in ms. Default 75. */
  debounceMs?: number
  /** Full re-read at this interval, in case a file event was missed (network file systems), in ms. Default 1000. */
  rescanMs?: number
}


/** An invalid policy at start-up: the CLI prints the message as one line and exits 2. */
export function policyError(message: string): Error & { code: 'EPOLICY' } {
  return Object.assign(new Error(message), { code: 'EPOLICY' as const })
}

interface Snapshot {
  readonly policies: ReadonlyMap<string, Policy>
  readonly entities: readonly string[]
  /** What each entity's policy looks like, to tell whether a reload changed anything. */
  readonly signature: string
}

function snapshotOf(policies: Map<string, Policy>): Snapshot {
  const entities = [...policies.keys()].sort()
  const signature = JSON.stringify(entities.map((entity) => describe(policies.get(entity) as Policy)))
  return { policies, entities, signature }
}

function describe(policy: Policy): unknown[] {
  return [policy.entity, [...policy.currencies], [...policy.paymentInstruments], policy.features, policy.mcc, policy.line1, policy.mode]
}

/**
 * Loads every policy of a folder, then keeps them current. Any file event
 * re-reads the whole folder: that covers an editor's write-then-rename and a
 * Kubernetes ConfigMap's symlink swap alike, whatever file name the event
 * carries. The new policies replace the old ones as one snapshot, in one
 * assignment, so a request sees either the old or the new policy of an entity,
 * never a mix. A file that fails to load keeps its entity's last good policy.
 */
export async function watchPolicies(dir: string, options: WatchPoliciesOptions = {}): Promise<PolicyStore> {
  const { logger, onReload } = options
  const debounceMs = options.debounceMs ?? POLICY_WATCH_DEFAULTS.debounceMs
  const rescanMs = options.rescanMs ?? POLICY_WATCH_DEFAULTS.rescanMs
  const initial = await loadPolicyDir(dir)
  const [problem] = initial.problems
  if (problem !== undefined) {
    const more = initial.problems.length > 1 ? ` (and ${initial.problems.length - 1} more invalid files)` : ''
    throw policyError(`${problem.file}: ${problem.reason}${more}`)
  }
  let current = snapshotOf(initial.policies)
  let reloading = false
  let again = false
  let debounce: NodeJS.Timeout | undefined
  /** Problems already logged, so the periodic re-scan does not repeat a warning every second. */
  let reported = new Set<string>()

  function report(problems: readonly PolicyProblem[]): void {
    const seen = new Set<string>()
    for (const { file, reason } of problems) {
      const key = `${file}\n${reason}`
      seen.add(key)
      if (!reported.has(key)) logger?.warn({ file, reason }, 'policy file refused, its last good policy stays in force')
      onReload?.({ ok: false, file, reason })
    }
    reported = seen
  }

  async function reload(): Promise<void> {
    const loaded = await loadPolicyDir(dir).catch((error: Error) => error)
    if (loaded instanceof Error) {
      report([{ file: dir, reason: loaded.message }])
      return
    }
    const next = new Map(loaded.policies)
    for (const { file } of loaded.problems) {
      const entity = entityOfFile(file)
      const lastGood = current.policies.get(entity)
      if (lastGood !== undefined && !next.has(entity)) next.set(entity, lastGood)
    }
    const snapshot = snapshotOf(next)
    if (snapshot.signature !== current.signature) {
      current = snapshot
      logger?.info({ entities: snapshot.entities }, 'policies reloaded')
    }
    report(loaded.problems)
    if (loaded.problems.length === 0) onReload?.({ ok: true })
  }

  /** One reload at a time; events during a reload ask for one more after it. */
  async function run(): Promise<void> {
    if (reloading) {
      again = true
      return
    }
    reloading = true
    do {
      again = false
      await reload()
    } while (again)
    reloading = false
  }

  function schedule(): void {
    clearTimeout(debounce)
    debounce = setTimeout(() => void run(), debounceMs)
  }

  const watcher = watch(dir, { persistent: false }, schedule)
  // The watcher fails only when the OS refuses it (inotify limits): the periodic re-scan carries on, and
  // a listener must exist or the error would end the process. No test can make the OS do that.
  /* c8 ignore next */
  watcher.on('error', (error) => logger?.warn({ dir, reason: error.message }, 'policy folder watch failed, re-scanning only'))
  const rescan = setInterval(() => void run(), rescanMs)
  rescan.unref()

  return {
    get: (entity) => current.policies.get(entity),
    get size() {
      return current.policies.size
    },
    get entities() {
      return current.entities
    },
    close() {
      watcher.close()
      clearTimeout(debounce)
      clearInterval(rescan)
    },
  }
}
