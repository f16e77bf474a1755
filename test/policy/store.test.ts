import t, { type Test } from 'tap'
import { rename, rm, symlink, writeFile, mkdir, unlink } from 'node:fs/promises'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import {
  watchPolicies,
  type PolicyStore,
  type ReloadOutcome,
  type WatchPoliciesOptions,
} from '../../lib/policy/store.js'
import { policyJson } from '../helpers/fixtures.js'
import { until } from '../helpers/wait.js'

/** Ten seconds for a change to be seen: generous for a loaded machine (the contract says within a second). */
const SEEN_MS = 10_000

interface Logged {
  readonly level: 'info' | 'warn'
  readonly fields: Record<string, unknown>
  readonly message: string
}

function recorder() {
  const lines: Logged[] = []
  const outcomes: ReloadOutcome[] = []
  const logger = {
    info: (fields: Record<string, unknown>, message: string) => void lines.push({ level: 'info', fields, message }),
    warn: (fields: Record<string, unknown>, message: string) => void lines.push({ level: 'warn', fields, message }),
  } as unknown as NonNullable<WatchPoliciesOptions['logger']>
  /** How many reads of the folder ended: one that found nothing new reports nothing else. */
  const reads = { count: 0 }
  return {
    lines,
    outcomes,
    reads,
    logger,
    onReload: (outcome: ReloadOutcome) => void outcomes.push(outcome),
    onRead: () => void reads.count++,
  }
}

async function open(t: Test, dir: string, options: WatchPoliciesOptions = {}): Promise<PolicyStore> {
  const store = await watchPolicies(dir, { debounceMs: 20, ...options })
  t.teardown(() => store.close())
  return store
}

t.test('loads every policy of the folder', async (t) => {
  const dir = t.testdir({ 'a.json': policyJson('a'), 'b.json': policyJson('b'), 'readme.txt': 'ignored' })
  const store = await open(t, dir)
  t.equal(store.size, 2)
  t.same(store.entities, ['a', 'b'])
  t.equal(store.get('a')?.entity, 'a')
  t.equal(store.get('c'), undefined)
})

t.test('an invalid file at start-up is an EPOLICY error naming the file and the reason', async (t) => {
  const dir = t.testdir({ 'a.json': policyJson('a'), 'b.json': policyJson('b', { moto: true }) })
  await t.rejects(watchPolicies(dir), { code: 'EPOLICY', message: `${join(dir, 'b.json')}: $.moto: ` })
  const two = t.testdir({ 'a.json': '{', 'b.json': '[]' })
  await t.rejects(watchPolicies(two), {
    code: 'EPOLICY',
    message: /a\.json: not JSON: .* \(and 1 more invalid files\)$/,
  })
  await t.rejects(watchPolicies(join(two, 'missing')), { code: 'ENOENT' })
  const empty = t.testdir({ 'readme.txt': 'no policy here' })
  await t.rejects(watchPolicies(empty), { code: 'EPOLICY', message: `${empty}: no policies: ` })
})

t.test('a changed, added or removed file takes effect without a restart', async (t) => {
  const dir = t.testdir({ 'a.json': policyJson('a') })
  const log = recorder()
  const store = await open(t, dir, { logger: log.logger, onReload: log.onReload, settleMs: 0 })
  await writeFile(join(dir, 'a.json'), policyJson('a', { currencies: ['EUR'] }))
  t.ok(await until(() => store.get('a')?.currencies.has('EUR') === true, SEEN_MS))
  await writeFile(join(dir, 'b.json'), policyJson('b'))
  t.ok(await until(() => store.size === 2, SEEN_MS))
  t.same(store.entities, ['a', 'b'])
  await unlink(join(dir, 'a.json'))
  t.ok(await until(() => store.get('a') === undefined, SEEN_MS))
  t.same(store.entities, ['b'])
  t.ok(log.outcomes.length >= 3, 'each change reported')
  t.ok(log.outcomes.every((outcome) => outcome.applied && outcome.refused.length === 0 && outcome.refusedNow === 0))
  t.match(log.lines.at(-1), { level: 'info', fields: { entities: ['b'] }, message: 'policies reloaded' })
})

t.test('a file that fails to load keeps the last good policy, and is reported', async (t) => {
  const dir = t.testdir({ 'a.json': policyJson('a', { currencies: ['USD'] }) })
  const log = recorder()
  const store = await open(t, dir, { logger: log.logger, onReload: log.onReload })
  const good = store.get('a')
  await writeFile(join(dir, 'a.json'), policyJson('a', { currencies: ['usd'] }))
  t.ok(await until(() => log.outcomes.some((outcome) => outcome.refused.length > 0), SEEN_MS))
  t.equal(store.get('a'), good, 'the very same last good policy')
  const refused = log.outcomes.find((outcome) => outcome.refused.length > 0)
  t.match(refused, { applied: false, refusedNow: 1 })
  t.equal(refused?.refused[0]?.file, join(dir, 'a.json'))
  t.match(refused?.refused[0]?.reason, /^\$\.currencies\[0\]: /)
  t.match(
    log.lines.find((line) => line.level === 'warn'),
    {
      fields: { file: join(dir, 'a.json'), reason: /currencies/ },
      message: /last good policy stays/,
    },
  )
  // A new file that is invalid from the start has no last good policy: its entity stays unknown.
  await writeFile(join(dir, 'new.json'), '{"entity": "new"}')
  t.ok(
    await until(
      () => log.outcomes.some((outcome) => outcome.refused.some(({ file }) => file === join(dir, 'new.json'))),
      SEEN_MS,
    ),
  )
  t.equal(store.get('new'), undefined)
  t.equal(log.outcomes.at(-1)?.refusedNow, 2)
  // Once fixed, the file takes effect again.
  await writeFile(join(dir, 'a.json'), policyJson('a', { currencies: ['CHF'] }))
  t.ok(await until(() => store.get('a')?.currencies.has('CHF') === true, SEEN_MS))
  t.match(log.outcomes.at(-1), { applied: true, refused: [], refusedNow: 1 })
  // A refused file removed changes no policy, but no file is refused any more.
  await unlink(join(dir, 'new.json'))
  t.ok(await until(() => log.outcomes.at(-1)?.refusedNow === 0, SEEN_MS))
  t.match(log.outcomes.at(-1), { applied: false, refused: [] })
})

t.test(
  'a refused version is logged and reported once, not at every re-scan; a new version of it once more',
  async (t) => {
    const dir = t.testdir({ 'a.json': policyJson('a') })
    const log = recorder()
    await open(t, dir, { logger: log.logger, onReload: log.onReload, onRead: log.onRead, rescanMs: 20 })
    await writeFile(join(dir, 'a.json'), 'oops')
    t.ok(await until(() => log.outcomes.length === 1, SEEN_MS))
    // The read that reported it has ended: the next two re-read the same version.
    const seen = log.reads.count
    t.ok(await until(() => log.reads.count >= seen + 2, SEEN_MS), 're-scanned twice')
    t.equal(log.outcomes.length, 1, 'the re-scans that found the same version reported nothing')
    t.equal(log.lines.filter((line) => line.level === 'warn').length, 1)
    // Another broken version with the very same reason is another refused version.
    await writeFile(join(dir, 'a.json'), '{"entity": "a", "currencies": 1}')
    await writeFile(join(dir, 'a.json'), '{"entity": "a", "currencies": 2}')
    t.ok(await until(() => log.outcomes.length >= 2, SEEN_MS))
    await writeFile(join(dir, 'a.json'), '{"entity": "a", "currencies": 3}')
    t.ok(await until(() => log.outcomes.length >= 3, SEEN_MS))
    t.ok(log.outcomes.every((outcome) => !outcome.applied && outcome.refused.length === 1 && outcome.refusedNow === 1))
  },
)

t.test('nothing changed, nothing reported: the re-scans do not count as reloads', async (t) => {
  const dir = t.testdir({ 'a.json': policyJson('a') })
  const log = recorder()
  await open(t, dir, { logger: log.logger, onReload: log.onReload, onRead: log.onRead, rescanMs: 10 })
  await writeFile(join(dir, 'a.json'), policyJson('a'))
  // A read running as the file was written may have begun before: the one after it read the file written.
  const seen = log.reads.count
  t.ok(await until(() => log.reads.count >= seen + 2, SEEN_MS), 'read since it was written')
  t.same(log.outcomes, [], 'a file written again with the same policy changes nothing in force')
  t.same(log.lines, [])
})

t.test('reload(): at once, counted as applied even when nothing changed; a refused file reported again', async (t) => {
  const dir = t.testdir({ 'a.json': policyJson('a'), 'b.json': policyJson('b') })
  const log = recorder()
  const store = await open(t, dir, { logger: log.logger, onReload: log.onReload, debounceMs: 60_000, rescanMs: 60_000 })
  await store.reload()
  t.same(log.outcomes, [{ applied: true, refused: [], refusedNow: 0 }])
  await writeFile(join(dir, 'a.json'), policyJson('a', { currencies: ['NOK'] }))
  await store.reload()
  t.ok(store.get('a')?.currencies.has('NOK'), 'in force once reload() resolved, without waiting for the watcher')
  await writeFile(join(dir, 'b.json'), '{')
  await store.reload()
  await store.reload()
  t.match(log.outcomes.slice(2), [
    { applied: false, refused: [{ file: join(dir, 'b.json') }], refusedNow: 1 },
    { applied: false, refused: [{ file: join(dir, 'b.json') }], refusedNow: 1 },
  ])
  t.equal(
    log.lines.filter((line) => line.level === 'warn').length,
    2,
    'each asked-for reload that refused a file says so',
  )
  const [first, second] = [store.reload(), store.reload()]
  t.equal(first, second, 'two asked while none has started are one reload')
  await first
})

t.test("an editor's write-and-rename and a ConfigMap's symlink swap are both picked up", async (t) => {
  const dir = t.testdir({ 'a.json': policyJson('a') })
  const store = await open(t, dir)
  await writeFile(join(dir, '.a.json.swp'), policyJson('a', { currencies: ['JPY'] }))
  await rename(join(dir, '.a.json.swp'), join(dir, 'a.json'))
  t.ok(await until(() => store.get('a')?.currencies.has('JPY') === true, SEEN_MS))

  // Kubernetes mounts a ConfigMap as files that link through `..data` to a versioned folder,
  // and updates it by pointing `..data` at a new folder.
  const root = t.testdir({
    v1: { 'k.json': policyJson('k', { currencies: ['GBP'] }) },
    v2: { 'k.json': policyJson('k', { currencies: ['SEK'] }) },
  })
  await symlink('v1', join(root, '..data'))
  await symlink(join('..data', 'k.json'), join(root, 'k.json'))
  const mounted = await open(t, root)
  t.ok(mounted.get('k')?.currencies.has('GBP'))
  await symlink('v2', join(root, '..data_tmp'))
  await rename(join(root, '..data_tmp'), join(root, '..data'))
  t.ok(await until(() => mounted.get('k')?.currencies.has('SEK') === true, SEEN_MS))
})

t.test('a folder that disappears keeps every last good policy and is reported', async (t) => {
  const dir = join(t.testdir({}), 'policies')
  await mkdir(dir)
  await writeFile(join(dir, 'a.json'), policyJson('a'))
  const log = recorder()
  const store = await open(t, dir, { logger: log.logger, onReload: log.onReload, rescanMs: 20 })
  await rm(dir, { recursive: true })
  t.ok(await until(() => log.outcomes.some((outcome) => outcome.refused.some(({ file }) => file === dir)), SEEN_MS))
  t.match(log.outcomes.at(-1), { applied: false, refused: [{ file: dir, reason: /ENOENT/ }], refusedNow: 1 })
  t.equal(store.get('a')?.entity, 'a')
})

t.test('the periodic re-scan alone picks up changes', async (t) => {
  const dir = t.testdir({ 'a.json': policyJson('a') })
  const store = await open(t, dir, { debounceMs: 60_000, rescanMs: 20 })
  await writeFile(join(dir, 'b.json'), policyJson('b'))
  t.ok(await until(() => store.size === 2, SEEN_MS))
})

t.test('after close nothing is reloaded', async (t) => {
  const dir = t.testdir({ 'a.json': policyJson('a') })
  const log = recorder()
  const store = await watchPolicies(dir, { onReload: log.onReload, debounceMs: 5, rescanMs: 5 })
  await writeFile(join(dir, 'c.json'), policyJson('c'))
  t.ok(await until(() => log.outcomes.length > 0, SEEN_MS))
  store.close()
  await store.reload()
  t.equal(log.outcomes.length, 1, 'not even one asked for')
  const seen = log.outcomes.length
  // A store still watching, as the closed one did, shows when the change was there to be seen.
  const witness = await open(t, dir, { debounceMs: 5, rescanMs: 5 })
  await writeFile(join(dir, 'b.json'), policyJson('b'))
  t.ok(await until(() => witness.size === 3, SEEN_MS), 'a store still watching read it')
  t.equal(store.size, 2)
  t.ok(log.outcomes.length <= seen + 1, 'at most the reload that was already running')
})

t.test('reload under traffic: every get() sees one whole version, never a mix', async (t) => {
  const versions = [
    { currencies: ['GBP'], paymentInstruments: ['card/plain'], mcc: '1111' },
    { currencies: ['EUR', 'USD'], paymentInstruments: ['card/token', 'card/plain'], mcc: '2222' },
  ]
  const write = (i: number) => {
    const version = versions[i % 2] as (typeof versions)[number]
    return writeFile(
      join(dir, 'shop.json'),
      policyJson('shop', {
        ...version,
        features: { dynamicMcc: true, paymentFacilitator: false, moto: false, debtRepayment: false },
      }),
    )
  }
  const dir = t.testdir({})
  await write(0)
  const store = await open(t, dir, { debounceMs: 1, rescanMs: 5 })
  const whole = (currencies: string[], instruments: string[], mcc: string | undefined) =>
    versions.some(
      (version) =>
        version.mcc === mcc &&
        version.currencies.join() === currencies.join() &&
        version.paymentInstruments.join() === instruments.join(),
    )
  const seen = new Set<string | undefined>()
  let reads = 0
  let mixed = 0
  let missing = 0
  let writing = true
  const writer = (async () => {
    for (let i = 1; i <= 60; i++) {
      await write(i)
      await sleep(3)
    }
    writing = false
  })()
  const deadline = Date.now() + 10_000
  // eslint-disable-next-line no-unmodified-loop-condition -- the writer above clears it between two awaits of this loop
  while (writing && Date.now() < deadline) {
    for (let i = 0; i < 200; i++) {
      const policy = store.get('shop')
      reads++
      if (policy === undefined) {
        missing++
        continue
      }
      seen.add(policy.mcc)
      if (!whole([...policy.currencies], [...policy.paymentInstruments], policy.mcc)) mixed++
    }
    await sleep(0)
  }
  await writer
  t.equal(missing, 0, 'the entity never disappears while its file is rewritten')
  t.equal(mixed, 0, 'no half-applied policy')
  t.ok(reads > 0)
  t.same([...seen].sort(), ['1111', '2222'], 'both versions were served')
})

t.test('a file deleted then copied back (a deploy that is not atomic) never removes its entity', async (t) => {
  const dir = t.testdir({ 'a.json': policyJson('a'), 'b.json': policyJson('b') })
  const log = recorder()
  const store = await open(t, dir, { onReload: log.onReload, settleMs: 60_000, rescanMs: 60_000, debounceMs: 60_000 })
  await unlink(join(dir, 'a.json'))
  await store.reload()
  t.equal(store.get('a')?.entity, 'a', 'kept while the folder has not settled')
  await rm(join(dir, 'b.json'))
  await store.reload()
  t.same(store.entities, ['a', 'b'], 'a folder emptied for a moment empties nothing')
  await writeFile(join(dir, 'a.json'), policyJson('a', { currencies: ['EUR'] }))
  await writeFile(join(dir, 'b.json'), policyJson('b'))
  await store.reload()
  t.ok(store.get('a')?.currencies.has('EUR'), 'the new version in force')
  t.ok(
    log.outcomes.every((outcome) => outcome.refused.length === 0 && outcome.refusedNow === 0),
    'nothing refused',
  )
})

t.test('a vanished file removes its entity once the folder has stayed the same for settleMs', async (t) => {
  const dir = t.testdir({ 'a.json': policyJson('a'), 'b.json': policyJson('b') })
  const store = await open(t, dir, { settleMs: 100, rescanMs: 20 })
  await unlink(join(dir, 'a.json'))
  await store.reload()
  t.equal(store.get('a')?.entity, 'a', 'kept at first')
  t.ok(await until(() => store.get('a') === undefined, SEEN_MS))
  t.same(store.entities, ['b'])
})

t.test('a folder that would configure no entity is refused; its last good policies stay in force', async (t) => {
  const dir = t.testdir({ 'a.json': policyJson('a') })
  const log = recorder()
  const store = await open(t, dir, { logger: log.logger, onReload: log.onReload, settleMs: 0, rescanMs: 60_000 })
  await unlink(join(dir, 'a.json'))
  await store.reload()
  t.equal(store.get('a')?.entity, 'a')
  t.match(log.outcomes.at(-1), { applied: false, refused: [{ file: dir, reason: /^no policies: / }], refusedNow: 1 })
  t.match(log.lines.at(-1), { level: 'warn', fields: { file: dir } })
  await writeFile(join(dir, 'b.json'), policyJson('b'))
  await store.reload()
  t.same(store.entities, ['b'], 'a folder with a policy again is taken, the vanished file at last removes its entity')
  t.match(log.outcomes.at(-1), { applied: true, refused: [], refusedNow: 0 })
})
