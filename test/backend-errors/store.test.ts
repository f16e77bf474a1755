import { rename, rm, symlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import t, { type Test } from 'tap'
import {
  watchBackendErrors,
  type BackendErrorStore,
  type WatchBackendErrorsOptions,
} from '../../lib/backend-errors/store.js'
import type { ReloadOutcome } from '../../lib/watch.js'

/** Polls until `condition` holds; fails the test after ten seconds, generous for a loaded machine (the contract says within a second). */
async function eventually(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !condition(); i++) await sleep(10)
  if (!condition()) throw new Error('condition not met within 10 s')
}

const rulesFile = (name: string) =>
  JSON.stringify({ rules: [{ status: 400, errorName: name, message: `${name} happened.` }] })

function recorder() {
  const lines: { level: string; fields: Record<string, unknown>; message: string }[] = []
  const logger = {
    info: (fields: Record<string, unknown>, message: string) => void lines.push({ level: 'info', fields, message }),
    warn: (fields: Record<string, unknown>, message: string) => void lines.push({ level: 'warn', fields, message }),
  } as unknown as NonNullable<WatchBackendErrorsOptions['logger']>
  return { lines, logger }
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
    const store = await open(t, file, { logger: log.logger })
    t.equal(nameOf(store), 'firstName')
    await writeFile(file, rulesFile('secondName'))
    await eventually(() => nameOf(store) === 'secondName')
    t.match(log.lines, [{ level: 'info', fields: { file, rules: 1 }, message: 'backend errors rules reloaded' }])

    await writeFile(file, '{"rules": [1]}')
    await eventually(() => log.lines.length === 2)
    // Several re-reads of the same bad file: still one warning.
    await sleep(350)
    t.equal(nameOf(store), 'secondName', 'the last good rules stay in force')
    t.match(log.lines.slice(1), [
      {
        level: 'warn',
        fields: { file, reason: '$.rules[0]: must be an object' },
        message: /last good rules stay in force/,
      },
    ])

    await rm(file)
    await eventually(() => log.lines.length === 3)
    t.match(log.lines[2], { level: 'warn', fields: { reason: 'no such file or folder' } }, 'a missing file too')
    t.equal(nameOf(store), 'secondName')

    await writeFile(file, rulesFile('secondName'))
    await sleep(350)
    t.equal(log.lines.length, 3, 'the same rules again: nothing to reload, nothing logged')
    await writeFile(file, '{')
    await eventually(() => log.lines.length === 4)
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
    await eventually(() => outcomes.length === 2)
    t.same(outcomes[1], { applied: false, refused: [{ file, reason: '$.rules[0]: must be an object' }], refusedNow: 1 })
    await store.reload()
    t.same(
      outcomes.slice(2),
      [{ applied: false, refused: [{ file, reason: '$.rules[0]: must be an object' }], refusedNow: 1 }],
      'SIGHUP: refused again',
    )
    await replace(file, rulesFile('firstName'))
    await eventually(() => outcomes.length === 4)
    t.same(
      outcomes[3],
      { applied: false, refused: [], refusedNow: 0 },
      'the same rules again: nothing applied, nothing refused any more',
    )
    await replace(file, rulesFile('secondName'))
    await eventually(() => outcomes.length === 5)
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
  await eventually(() => nameOf(store) === 'renamedName')

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
  await eventually(() => nameOf(mounted) === 'versionTwo')
})

t.test('closed: no reload after close', async (t) => {
  const dir = t.testdir({ 'rules.json': rulesFile('firstName') })
  const store = await watchBackendErrors(join(dir, 'rules.json'), { debounceMs: 10, rescanMs: 50 })
  store.close()
  await writeFile(join(dir, 'rules.json'), rulesFile('laterName'))
  await sleep(200)
  t.equal(nameOf(store), 'firstName')
})
