import { rename, rm, symlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import {
  watchBackendErrors,
  type BackendErrorStore,
  type WatchBackendErrorsOptions,
} from '../../lib/backend-errors/store.js'
import type { ReloadOutcome } from '../../lib/watch.js'
import { until } from '../helpers/wait.js'

/** Ten seconds for a change to be seen: generous for a loaded machine (the contract says within a second). */
const SEEN_MS = 10_000

const rulesFile = (name: string) =>
  JSON.stringify({ rules: [{ status: 400, errorName: name, message: `${name} happened.` }] })

function recorder() {
  const lines: { level: string; fields: Record<string, unknown>; message: string }[] = []
  const logger = {
    info: (fields: Record<string, unknown>, message: string) => void lines.push({ level: 'info', fields, message }),
    warn: (fields: Record<string, unknown>, message: string) => void lines.push({ level: 'warn', fields, message }),
  } as unknown as NonNullable<WatchBackendErrorsOptions['logger']>
  /** How many reads of the file ended: one that found nothing new logs nothing. */
  const reads = { count: 0 }
  return { lines, logger, reads, onRead: () => void reads.count++ }
}

async function open(t: Test, file: string, options: WatchBackendErrorsOptions = {}): Promise<BackendErrorStore> {
  const store = await watchBackendErrors(file, { debounceMs: 20, rescanMs: 100, ...options })
  t.teardown(() => store.close())
  return store
}

const nameOf = (store: BackendErrorStore) => store.rules.rules[0]?.errorName

t.test(
  'an invalid or missing file at start-up: EBACKENDERRORS with the file and the reason, or the read error',
  async (t) => {
    const dir = t.testdir({ 'bad.json': '{"rules": [{"status": 700, "errorName": "x", "message": "m"}]}' })
    await t.rejects(watchBackendErrors(join(dir, 'bad.json')), {
      code: 'EBACKENDERRORS',
      message: `${join(dir, 'bad.json')}: $.rules[0].status: must be a status from 400 to 599, "4xx" or "5xx"`,
    })
    await t.rejects(watchBackendErrors(join(dir, 'missing.json')), {
      code: 'EBACKENDERRORS',
      message: `${join(dir, 'missing.json')}: no such file or folder`,
    })
  },
)

t.test(
  'a valid change takes effect without a restart; an invalid one keeps the last good rules, logged once',
  async (t) => {
    const dir = t.testdir({ 'rules.json': rulesFile('firstName') })
    const file = join(dir, 'rules.json')
    const log = recorder()
    const store = await open(t, file, { logger: log.logger, onRead: log.onRead })
    t.equal(nameOf(store), 'firstName')
    await writeFile(file, rulesFile('secondName'))
    t.ok(await until(() => nameOf(store) === 'secondName', SEEN_MS))
    t.match(log.lines, [{ level: 'info', fields: { file, rules: 1 }, message: 'backend errors rules reloaded' }])

    await writeFile(file, '{"rules": [1]}')
    t.ok(await until(() => log.lines.length === 2, SEEN_MS))
    // Several re-reads of the same bad file: still one warning. The read that logged it has ended.
    const warned = log.reads.count
    t.ok(await until(() => log.reads.count >= warned + 2, SEEN_MS), 're-read twice')
    t.equal(nameOf(store), 'secondName', 'the last good rules stay in force')
    t.match(log.lines.slice(1), [
      {
        level: 'warn',
        fields: { file, reason: '$.rules[0]: must be an object' },
        message: /last good rules stay in force/,
      },
    ])

    await rm(file)
    t.ok(await until(() => log.lines.length === 3, SEEN_MS))
    t.match(log.lines[2], { level: 'warn', fields: { reason: 'no such file or folder' } }, 'a missing file too')
    t.equal(nameOf(store), 'secondName')

    await writeFile(file, rulesFile('secondName'))
    // A read running as the file was written may have begun before: the one after it read the file written.
    const written = log.reads.count
    t.ok(await until(() => log.reads.count >= written + 2, SEEN_MS), 'read since it was written')
    t.equal(log.lines.length, 3, 'the same rules again: nothing to reload, nothing logged')
    await writeFile(file, '{')
    t.ok(await until(() => log.lines.length === 4, SEEN_MS))
    t.match(
      log.lines[3],
      { level: 'warn', fields: { reason: /^not JSON/ } },
      'a problem after a good version is logged again',
    )
  },
)

/** Written whole in one step (a rename), so that the watcher never reads a file half written, which a loaded machine shows. */
async function replace(file: string, text: string): Promise<void> {
  await writeFile(`${file}.next`, text)
  await rename(`${file}.next`, file)
}

t.test(
  'onReload: a refused version once, again at each SIGHUP, a change or a SIGHUP ok, and the end of a refusal',
  async (t) => {
    const dir = t.testdir({ 'rules.json': rulesFile('firstName') })
    const file = join(dir, 'rules.json')
    const outcomes: ReloadOutcome[] = []
    const log = recorder()
    const store = await open(t, file, { logger: log.logger, onReload: (outcome) => outcomes.push(outcome) })
    await store.reload()
    t.same(outcomes, [{ applied: true, refused: [], refusedNow: 0 }], 'SIGHUP: a reload, even when nothing changed')
    t.match(log.lines, [{ level: 'info', message: 'backend errors rules reloaded' }])
    await replace(file, '{"rules": [1]}')
    t.ok(await until(() => outcomes.length === 2, SEEN_MS))
    t.same(outcomes[1], { applied: false, refused: [{ file, reason: '$.rules[0]: must be an object' }], refusedNow: 1 })
    await store.reload()
    t.same(
      outcomes.slice(2),
      [{ applied: false, refused: [{ file, reason: '$.rules[0]: must be an object' }], refusedNow: 1 }],
      'SIGHUP: refused again',
    )
    await replace(file, rulesFile('firstName'))
    t.ok(await until(() => outcomes.length === 4, SEEN_MS))
    t.same(
      outcomes[3],
      { applied: false, refused: [], refusedNow: 0 },
      'the same rules again: nothing applied, nothing refused any more',
    )
    await replace(file, rulesFile('secondName'))
    t.ok(await until(() => outcomes.length === 5, SEEN_MS))
    t.same(outcomes[4], { applied: true, refused: [], refusedNow: 0 })
    t.equal(nameOf(store), 'secondName')
  },
)

t.test('an atomic rename and a Kubernetes-style symlink swap are both seen', async (t) => {
  const dir = t.testdir({ 'rules.json': rulesFile('firstName') })
  const file = join(dir, 'rules.json')
  const store = await open(t, file)
  await writeFile(join(dir, '.rules.json.tmp'), rulesFile('renamedName'))
  await rename(join(dir, '.rules.json.tmp'), file)
  t.ok(await until(() => nameOf(store) === 'renamedName', SEEN_MS))

  const secret = t.testdir({
    '..v1': { 'rules.json': rulesFile('versionOne') },
    '..v2': { 'rules.json': rulesFile('versionTwo') },
  })
  await symlink('..v1', join(secret, '..data'))
  await symlink(join('..data', 'rules.json'), join(secret, 'rules.json'))
  const mounted = await open(t, join(secret, 'rules.json'))
  t.equal(nameOf(mounted), 'versionOne')
  await symlink('..v2', join(secret, '..data_tmp'))
  await rename(join(secret, '..data_tmp'), join(secret, '..data'))
  t.ok(await until(() => nameOf(mounted) === 'versionTwo', SEEN_MS))
})

t.test('closed: no reload after close', async (t) => {
  const dir = t.testdir({ 'rules.json': rulesFile('firstName') })
  const store = await watchBackendErrors(join(dir, 'rules.json'), { debounceMs: 10, rescanMs: 50 })
  store.close()
  // A store still watching, as the closed one did, shows when the change was there to be seen.
  const witness = await open(t, join(dir, 'rules.json'), { debounceMs: 10, rescanMs: 50 })
  await writeFile(join(dir, 'rules.json'), rulesFile('laterName'))
  t.ok(await until(() => nameOf(witness) === 'laterName', SEEN_MS), 'a store still watching read it')
  t.equal(nameOf(store), 'firstName')
})
