import type { Logger } from 'pino'
import { CodedError } from '../coded-error.js'
import { POLICY_WATCH_DEFAULTS } from '../defaults.js'
import { watchFolder, type FileProblem, type ReloadOutcome, type WatchOptions } from '../watch.js'
import { entityOfFile, loadPolicyDir, type PolicyProblem } from './load.js'
import type { Policy, PolicySource } from './policy.js'

/** The policies of a watched folder: `get` always reads one whole snapshot. */
export interface PolicyStore extends PolicySource {
  /** How many entities have a policy now. */
  readonly size: number
  /** The entities that have a policy now, sorted. */
  readonly entities: readonly string[]
  /** Re-reads the folder now, as SIGHUP asks; resolves once the policies read are in force. */
  reload(): Promise<void>
  /** Stops watching: no reload starts after this, no handle is left open. */
  close(): void
}

export type { ReloadOutcome }

export interface WatchPoliciesOptions extends WatchOptions {
  /** Where reloads and refused files are reported. */
  logger?: Pick<Logger, 'info' | 'warn'>
  /** Told what a reload did, when it applied something, refused a new version of a file, or changed how many are refused. */
  onReload?: (outcome: ReloadOutcome) => void
  /**
   * How long the folder must stay as it is before a vanished file removes its
   * entity, in ms, so that a deploy that deletes then copies is not seen. Default 2000.
   */
  settleMs?: number
}

interface Snapshot {
  readonly policies: ReadonlyMap<string, Policy>
  readonly entities: readonly string[]
  /** What each entity's policy looks like, to tell whether a reload changed anything. */
  readonly signature: string
}

/** Why a folder with no valid policy is refused: every payment would be 400 `entityIsNotConfigured`. */
export const NO_POLICIES =
  'no policies: a folder that configures no entity is refused, the last good policies stay in force'

function snapshotOf(policies: Map<string, Policy>): Snapshot {
  const entities = [...policies.keys()].sort()
  const signature = JSON.stringify(entities.map((entity) => describe(policies.get(entity) as Policy)))
  return { policies, entities, signature }
}

function describe(policy: Policy): unknown[] {
  return [
    policy.entity,
    [...policy.currencies],
    [...policy.paymentInstruments],
    policy.features,
    policy.mcc,
    policy.line1,
    policy.mode,
    policy.rateLimit,
  ]
}

/**
 * Loads every policy of a folder, then keeps them current. Any file event
 * re-reads the whole folder, whatever file name the event carries (watch.ts).
 * The new policies replace the old ones as one snapshot, in one assignment, so
 * a request sees either the old or the new policy of an entity, never a mix. A
 * file that fails to load keeps its entity's last good policy; each refused
 * version is logged and reported once, not at every re-scan. A file that
 * vanished keeps its entity until the folder has stayed the same for
 * `settleMs`, and a folder that would leave no entity at all is refused
 * (docs/policies.md): a deploy caught half-way empties nothing.
 */
export async function watchPolicies(dir: string, options: WatchPoliciesOptions = {}): Promise<PolicyStore> {
  const { logger, onReload } = options
  const initial = await loadPolicyDir(dir)
  const [problem] = initial.problems
  if (problem !== undefined) {
    const more = initial.problems.length > 1 ? ` (and ${initial.problems.length - 1} more invalid files)` : ''
    throw new CodedError('EPOLICY', `${problem.file}: ${problem.reason}${more}`)
  }
  if (initial.policies.size === 0) throw new CodedError('EPOLICY', `${dir}: ${NO_POLICIES}`)
  const settleMs = options.settleMs ?? POLICY_WATCH_DEFAULTS.settleMs
  let current = snapshotOf(initial.policies)
  /** Each refused file, to the version of it already reported. */
  let refused = new Map<string, string>()
  /** While files are missing: how the folder looked, and since when, to tell when it has settled. */
  let missing: { readonly looks: string; readonly since: number } | undefined

  async function reload(forced: boolean): Promise<void> {
    const loaded = await loadPolicyDir(dir).catch((error: Error) => error)
    let problems: readonly PolicyProblem[]
    let changed = false
    if (loaded instanceof Error) {
      problems = [{ file: dir, reason: loaded.message }]
    } else {
      problems = loaded.problems
      const next = new Map(loaded.policies)
      for (const { file } of problems) {
        const entity = entityOfFile(file)
        const lastGood = current.policies.get(entity)
        if (lastGood !== undefined && !next.has(entity)) next.set(entity, lastGood)
      }
      keepUnsettled(next, problems)
      if (next.size === 0) {
        problems = [...problems, { file: dir, reason: NO_POLICIES }]
      } else {
        const snapshot = snapshotOf(next)
        changed = snapshot.signature !== current.signature
        if (changed) current = snapshot
      }
    }
    const before = refused.size
    const reported = refused
    refused = new Map()
    const fresh: FileProblem[] = []
    for (const { file, reason, text } of problems) {
      const version = `${reason}\n${text ?? ''}`
      refused.set(file, version)
      if (!forced && reported.get(file) === version) continue
      logger?.warn({ file, reason }, 'policy file refused, its last good policy stays in force')
      fresh.push({ file, reason })
    }
    const applied = changed || (forced && problems.length === 0)
    if (applied) logger?.info({ entities: current.entities }, 'policies reloaded')
    if (applied || fresh.length > 0 || refused.size !== before)
      onReload?.({ applied, refused: fresh, refusedNow: refused.size })
  }

  /** Puts back the entities whose file vanished, until the folder has looked the same for `settleMs`. */
  function keepUnsettled(next: Map<string, Policy>, problems: readonly PolicyProblem[]): void {
    const gone = current.entities.filter((entity) => !next.has(entity))
    if (gone.length === 0) {
      missing = undefined
      return
    }
    const looks = snapshotOf(next).signature + JSON.stringify(problems)
    const now = performance.now()
    if (missing?.looks !== looks) missing = { looks, since: now }
    if (now - missing.since >= settleMs) return
    for (const entity of gone) next.set(entity, current.policies.get(entity) as Policy)
  }

  const watch = watchFolder(dir, reload, options)
  return {
    get: (entity) => current.policies.get(entity),
    get size() {
      return current.policies.size
    },
    get entities() {
      return current.entities
    },
    reload: watch.reload,
    close: watch.close,
  }
}
